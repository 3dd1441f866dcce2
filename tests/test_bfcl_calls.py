"""The safe BFCL call parser: literal calls of known functions are accepted, everything else refused unrun."""

import json
import os
import re
import subprocess

import pytest

from amd.benchmarks.base import CallRejected, Proposal, canonical_call
from amd.benchmarks.bfcl.benchmark import BfclMultiTurn
from amd.benchmarks.bfcl.calls import parse_call, validate_arguments


def _doc(name, *params):
    properties = {param: {"type": "string"} for param in params}
    return {"name": name, "parameters": {"type": "dict", "properties": properties, "required": list(params)}}


DOCS = {doc["name"]: doc for doc in [
    _doc("cd", "folder"), _doc("ls"), _doc("mv", "source", "destination"), _doc("sort", "file_name"),
    _doc("record", "values", "options", "offset"),
]}


@pytest.mark.parametrize("source, expected", [
    ("cd(folder='document')", ("cd", {"folder": "document"})),
    ("  ls()  ", ("ls", {})),
    ("sort('final_report.pdf')", ("sort", {"file_name": "final_report.pdf"})),
    ("mv('a.txt', destination='temp')", ("mv", {"source": "a.txt", "destination": "temp"})),
    ("mv(destination='temp', source='a.txt')", ("mv", {"destination": "temp", "source": "a.txt"})),
    ("record(values=[1, [2.5, None], {'k': (4, -5.5)}], options={'on': True, 'tags': {1, 2}})",
     ("record", {"values": [1, [2.5, None], {"k": (4, -5.5)}], "options": {"on": True, "tags": {1, 2}}})),
    ("record(offset=-3)", ("record", {"offset": -3})),
    ("record([-1e3, +2])", ("record", {"values": [-1000.0, 2]})),
])
def test_accepts_literal_calls_and_maps_positional_args(source, expected):
    assert parse_call(source, DOCS) == expected


def test_canonical_form_reads_back_to_the_same_call():
    name, kwargs = parse_call("record([1, 'a\\'b', {'x': -2.0}], offset=None)", DOCS)
    text = canonical_call(name, kwargs)
    assert text == "record(values=[1, \"a'b\", {'x': -2.0}], offset=None)"
    assert parse_call(text, DOCS) == (name, kwargs)


@pytest.mark.parametrize("source, reason", [
    ("__import__('os').system('touch /tmp/x')", "plain name"),
    ("open('/etc/passwd')", "unknown function 'open'"),
    ("exec(\"import os; os.system('id')\")", "unknown function 'exec'"),
    ("eval('1+1')", "unknown function 'eval'"),
    ("os.system('ls')", "attribute access"),
    ("cd(folder=ls())", "function call"),
    ("cd(folder=x)", "variable name"),
    ("cd(folder=lambda: 1)", "lambda"),
    ("cd(folder=f'{x}')", "f-string"),
    ("cd(**{'folder': 'x'})", "**"),
    ("cd(*['x'])", "* unpacking"),
    ("cd(folder={**{'a': 1}})", "**"),
    ("cd(folder=[c for c in 'ab'])", "comprehension"),
    ("cd(folder='abc'[0])", "subscript"),
    ("cd(folder=1 + 2)", "arithmetic"),
    ("cd(folder=-x)", "sign"),
    ("cd(folder=(y := 1))", "assignment"),
    ("cd(folder=...)", "unsupported constant"),
    ("cd(folder=b'x')", "unsupported constant"),
    ("cd(folder=1e999)", "not a finite number"),
    ("cd(folder={[1]: 2})", "not a valid literal"),
    ("cd(folder='a'); ls()", "not valid call syntax"),
    ("import os", "not valid call syntax"),
    ("[cd(folder='a')]", "not a function call"),
    ("'cd'", "not a function call"),
    ("cdd(folder='a')", "did you mean 'cd'"),
    ("cd('a', 'b')", "at most 1"),
    ("cd('a', folder='b')", "twice"),
    ("cd(path='a')", "no parameter 'path'"),
    ("cd(folder='" + "a" * 30_000 + "')", "too long"),
    ("cd(folder=" + "[" * 40 + "]" * 40 + ")", "nested deeper"),
    ("cd(folder=" + "[" * 5000 + "]" * 5000 + ")", "not valid call syntax"),
    ("cd(folder=" + "-" * 5000 + "1)", "not valid call syntax"),
])
def test_refuses_anything_but_literal_calls_of_known_functions(source, reason):
    with pytest.raises(CallRejected, match=None) as refused:
        parse_call(source, DOCS)
    assert reason in str(refused.value)


@pytest.mark.parametrize("name, arguments, reason", [
    ("open", {"file": "/etc/passwd"}, "unknown function 'open'"),
    (None, {}, "must be a string"),
    ("cd", "folder='x'", "must be an object"),
    ("cd", {"path": "x"}, "no parameter 'path'"),
    ("cd", {"folder": object()}, "unsupported type object"),
    ("cd", {"folder": float("nan")}, "not a finite number"),
    ("record", {"values": [{"k": set()}]}, "empty sets"),
    ("cd", {1: "x"}, "must be strings"),
])
def test_refuses_bad_structured_calls(name, arguments, reason):
    with pytest.raises(CallRejected) as refused:
        validate_arguments(name, arguments, DOCS)
    assert reason in str(refused.value)


MATH_DOCS = {doc["name"]: doc for doc in [
    _doc("power", "base", "exponent"), _doc("logarithm", "value", "base", "precision"),
    _doc("square_root", "number", "precision"),
]}


@pytest.mark.parametrize("source, refused", [
    ("power(base=10, exponent=1000000000)", "about 1e+09 digits"),
    ("power(-2, 99999)", "about 3.01e+04 digits"),
    ("logarithm(value=20, base=10, precision=10000000)", "precision 10000000 is above the limit"),
    ("square_root(number=2, precision=1001)", "precision 1001 is above the limit"),
    ("power(base=10, exponent=10000)", None),
    ("power(base=1, exponent=1000000000)", None),
    ("power(base=2.5, exponent=1000000000)", None),  # a float result overflows at once, inside the backend
    ("power(base=10, exponent=-1000000000)", None),
    ("logarithm(value=980.0, base=20, precision=10)", None),
])
def test_math_calls_without_a_bound_on_time_or_memory_are_refused(source, refused):
    if refused is None:
        parse_call(source, MATH_DOCS)
        return
    with pytest.raises(CallRejected, match=re.escape(refused)):
        parse_call(source, MATH_DOCS)


def test_an_unbounded_math_call_fails_fast_in_a_real_episode():
    episode = BfclMultiTurn().start("multi_turn_base_15")  # MathAPI among its classes
    episode.next_user_message(None)
    source = '{"name": "power", "arguments": {"base": 10, "exponent": 1000000000}}'
    outcome = episode.execute([Proposal(source=source, name="power", arguments={"base": 10, "exponent": 10**9})])
    assert outcome.calls == [] and outcome.error and "above the limit" in outcome.observations[0]


def test_non_text_source_is_refused():
    with pytest.raises(CallRejected, match="must be a string"):
        parse_call(None, DOCS)


def test_structured_call_without_arguments_is_an_empty_call():
    assert validate_arguments("ls", None, DOCS) == ("ls", {})


HOSTILE = [
    "__import__('os').system('touch {sentinel}')",
    "open('{sentinel}', 'w')",
    "exec(\"open('{sentinel}', 'w')\")",
    "eval(\"__import__('os').system('touch {sentinel}')\")",
    "os.system('touch {sentinel}')",
    "mkdir(dir_name=__import__('os').system('touch {sentinel}'))",
    "cd(folder=ls())",
    "mkdir(dir_name=(lambda: open('{sentinel}', 'w'))())",
    "mkdir(dir_name=f\"{{open('{sentinel}', 'w')}}\")",
    "mkdir(**{{'dir_name': 'evil'}})",
    "mkdir(dir_name=[open('{sentinel}', 'w') for _ in 'a'])",
    "mkdir(dir_name=['evil'][0])",
]


@pytest.fixture
def episode():
    episode = BfclMultiTurn().start("multi_turn_base_0")  # GorillaFileSystem + TwitterAPI
    episode.next_user_message(None)
    return episode


def test_hostile_calls_are_refused_and_nothing_runs(episode, tmp_path, monkeypatch):
    sentinel = tmp_path / "sentinel"
    spawned = []
    monkeypatch.setattr(os, "system", lambda *args: spawned.append(args) or 0)
    monkeypatch.setattr(subprocess, "Popen", lambda *args, **kwargs: spawned.append(args))
    listing_before = episode.execute([Proposal(source="ls(a=True)")]).observations
    for template in HOSTILE:
        source = template.format(sentinel=sentinel)
        outcome = episode.execute([Proposal(source=source)])
        assert outcome.calls == [] and outcome.error, source
        assert outcome.rejected[0]["text"] == source and outcome.rejected[0]["reason"]
        assert json.loads(outcome.observations[0])["error"].startswith("rejected call: ")
    assert not sentinel.exists()
    assert spawned == []
    assert episode.execute([Proposal(source="ls(a=True)")]).observations == listing_before
    assert episode.decoded_calls == [[["ls(a=True)"], ["ls(a=True)"]]]  # refused steps leave no decoded calls


def test_refused_call_reports_its_function_as_failing(episode):
    outcome = episode.execute([Proposal(source="cd(folder=ls())"), Proposal(source="pwd()")])
    assert [call.call for call in outcome.calls] == ["pwd()"]
    assert len(outcome.observations) == 2 and "rejected call" in outcome.observations[0]
    assert outcome.failing_functions == ["cd"] and outcome.error
