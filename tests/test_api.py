"""amd.api, the public API of plug-ins: the type checker holds a plug-in to its contracts before any run does, options
arrive parsed by their declaration, and a registry refuses an entry that is not what it holds."""

import pydoc
import re
import subprocess
import sys
from pathlib import Path

import pytest

import amd.api
from amd.core.errors import AmdError
from amd.core.registry import Registry
from amd.core.spec import Option, parse_options

REPO = Path(__file__).resolve().parents[1]
COUNTER = (REPO / "tests" / "plugins" / "counter.py").read_text()


def without_method(source: str, name: str) -> str:
    """`source` with the method `name` (its def and body, up to the next def, blank line or the end) cut out."""
    cut, count = re.subn(rf"\n    def {name}\(.*?(?=\n    def |\n\n|\Z)", "", source, count=1, flags=re.DOTALL)
    assert count == 1, name
    return cut


def test_a_plugin_that_lacks_a_required_member_fails_the_type_checker_and_the_whole_one_passes(tmp_path):
    (tmp_path / "whole.py").write_text(COUNTER)
    (tmp_path / "no_start.py").write_text(without_method(COUNTER, "start"))
    (tmp_path / "no_score.py").write_text(without_method(COUNTER, "score"))
    done = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml"),
                           "--cache-dir", str(tmp_path / "cache"), "--no-incremental", "whole.py", "no_start.py",
                           "no_score.py"], check=False, cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={"PATH": "/usr/bin:/bin", "MYPYPATH": str(REPO)})
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert not [line for line in errors if line.startswith("whole.py")], done.stdout
    assert any(line.startswith("no_start.py") and 'abstract attributes "start"' in line for line in errors), done.stdout
    assert any(line.startswith("no_score.py") and 'abstract attributes "score"' in line for line in errors), done.stdout


@pytest.mark.parametrize("option,given,parsed", [
    (Option("bool", "b"), "Yes", True), (Option("bool", "b"), False, False), (Option("bool", "b"), " 0 ", False),
    (Option("int", "i", minimum=1, maximum=99), "5", 5), (Option("int", "i", minimum=1), 7, 7),
    (Option("number", "n", minimum=0, maximum=1), "0.25", 0.25), (Option("number", "n"), 2, 2.0),
    (Option("text", "t", choices=("always", "repeat")), " Repeat ", "repeat"), (Option("text", "t"), "A b", "A b"),
])
def test_an_option_is_parsed_once_by_its_kind(option, given, parsed):
    value = option.parse(given, "x")
    assert value == parsed and type(value) is type(parsed)


@pytest.mark.parametrize("option,given,message", [
    (Option("bool", "b"), "maybe", "memory option x must be true or false, got 'maybe'"),
    (Option("int", "i", minimum=1, maximum=99), "0", "memory option x must be a whole number from 1 to 99, got '0'"),
    (Option("int", "i", minimum=20), "many", "memory option x must be a whole number of at least 20, got 'many'"),
    (Option("int", "i"), True, "memory option x must be a whole number, got True"),
    (Option("number", "n", minimum=0, maximum=1), "fast", "memory option x must be a number from 0.0 to 1.0, got 'fast'"),
    (Option("number", "n", maximum=1), "nan", "memory option x must be a number of at most 1.0, got 'nan'"),
    (Option("text", "t", choices=("after", "before")), "middle",
     "memory option x must be one of after, before, got 'middle'"),
])
def test_a_value_its_option_refuses_is_named_with_what_it_must_be(option, given, message):
    with pytest.raises(AmdError) as refused:
        option.parse(given, "x")
    assert str(refused.value) == message


def test_options_are_checked_against_the_declared_ones_and_build_options_say_so():
    declared = {"depth": Option("int", "how deep", minimum=1)}
    assert parse_options("toy", "build", {"depth": "3"}, declared) == {"depth": 3}
    with pytest.raises(AmdError, match=r"memory method toy has no run option \['colour'\]; options: depth"):
        parse_options("toy", "run", {"colour": "red"}, declared)
    with pytest.raises(AmdError, match="^build option depth must be a whole number of at least 1, got '0'$"):
        parse_options("toy", "build", {"depth": "0"}, declared)


def test_a_registry_refuses_an_entry_that_is_not_what_it_holds():
    specs: Registry[Option] = Registry("toy", check=lambda found: isinstance(found, Option), expected="an Option")
    specs.add("kinds", "amd.core.spec:KINDS")
    with pytest.raises(AmdError, match=r"toy 'kinds': amd.core.spec:KINDS must be an Option, got \("):
        specs.load("kinds")


def test_every_public_name_is_there_and_says_what_it_is():
    for name in amd.api.__all__:
        value = getattr(amd.api, name)
        if callable(value) and not isinstance(value, Registry):
            doc = (value.__doc__ or "").strip()
            assert doc and not doc.startswith(f"{name}("), name  # not a dataclass's generated signature


def test_help_lists_the_lazily_loaded_names_and_exclusion_is_public():
    shown = pydoc.render_doc(amd.api, renderer=pydoc.plaintext)
    for name in ("BankHooks", "Bank", "BuildContext", "injection_records", "Exclusion"):
        assert f"\n    {name}" in shown or f"class {name}" in shown, name
    assert set(amd.api.__all__) <= set(dir(amd.api))
    assert amd.api.Exclusion("source_group", "g1").hides({"source_group": "g1", "source_task_id": "t1"})
