"""One vocabulary: the config schema, the command line and the workflow take memory types, configs and options,
protocols, benchmarks and outputs from the registered methods' specs (amd.core.vocabulary) and amd.core.registry; no module
outside the memory methods names a method's words, and none outside the benchmarks names a benchmark."""

import ast
import re
from pathlib import Path

import pytest

from amd.cli import build_parser
from amd.cli.run import _memory
from amd.core.errors import AmdError
from amd.core.per_type import from_flag_value
from amd.core.registry import BENCHMARKS, MEMORY_METHODS, Registry
from amd.core.vocabulary import (
    ZERO_SHOT,
    memory_configs,
    memory_types,
    method_specs,
    option_flags,
    output_names,
)
from amd.workflow.config import ConfigError, active_config, validate_config
from amd.workflow.grid import Grid

REPO = Path(__file__).resolve().parents[1]
AMD = REPO / "amd"
BENCHMARK_PACKAGES = {"bfcl_eval", "appworld", "agentdojo", "tool_sandbox"}


def python_files(outside=()):
    return [path for path in AMD.rglob("*.py")
            if not any(path.is_relative_to(AMD / part) for part in outside)]


def minimal_config(**experiment) -> dict:
    """The embedded default's config, with one experiment of its own."""
    config = active_config({}, REPO / "config")
    config["experiments"] = {"probe_me": {"benchmarks": ["bfcl"], "students": ["qwen05"],
                                          "memory_configs": [ZERO_SHOT], "outputs": ["table2_ablation"]} | experiment}
    return config


def test_a_config_may_name_every_registered_memory_config_and_nothing_else():
    for name in memory_configs():
        validate_config(minimal_config(memory_configs=[name]))
    with pytest.raises(ConfigError, match=r"experiments\.probe_me\.memory_configs\.0: 'wf_st_fnn' is not a known memory config \(did you mean 'wf_st_fn'\?\)"):
        validate_config(minimal_config(memory_configs=["wf_st_fnn"]))
    with pytest.raises(ConfigError, match=r"experiments\.probe_me\.outputs\.0"):
        validate_config(minimal_config(outputs=["table9"]))


def good_and_bad_value(option):
    """A value of the option's kind within its bounds, and one of another kind."""
    good = {"bool": True, "int": int(option.minimum or 1), "number": option.minimum or 0.5,
            "text": option.choices[0] if option.choices else "x"}[option.kind]
    return good, ("yes" if option.kind == "bool" else [good])


def test_the_config_schema_checks_every_memory_option_by_its_kind():
    checked = 0
    for spec in method_specs():
        for name, option in spec.run_options.items():
            good, bad = good_and_bad_value(option)
            config = minimal_config()
            config["defaults"]["memory_options"] = {spec.name: {name: good}}
            validate_config(config)
            config["defaults"]["memory_options"] = {spec.name: {name: bad}}
            with pytest.raises(ConfigError, match=rf"defaults\.memory_options\.{spec.name}\.{name}:"):
                validate_config(config)
            checked += 1
        config = minimal_config()
        config["defaults"]["memory_options"] = {spec.name: {"no_such_option": 1}}
        with pytest.raises(ConfigError, match=rf"defaults\.memory_options\.{spec.name}: .*'no_such_option'"):
            validate_config(config)
    assert checked >= 9  # AMD's run options at least


def test_a_config_outside_its_bounds_or_choices_is_rejected():
    config = minimal_config()
    for spec in method_specs():
        for name, option in spec.run_options.items():
            if option.minimum is not None:
                config["defaults"]["memory_options"] = {spec.name: {name: option.minimum - 1}}
                with pytest.raises(ConfigError, match=rf"memory_options\.{spec.name}\.{name}: .* below the smallest"):
                    validate_config(config)
            if option.choices:
                config["defaults"]["memory_options"] = {spec.name: {name: "no such choice"}}
                with pytest.raises(ConfigError, match=rf"memory_options\.{spec.name}\.{name}: .* not one of the choices"):
                    validate_config(config)


def test_the_command_line_reads_every_type_and_each_options_flag():
    for code, memory_type in memory_types().items():
        assert from_flag_value(f"{code}=2", "--k", int) == {memory_type.name: 2}
        assert from_flag_value(f"{memory_type.name}=0.5", "--delta", float) == {memory_type.name: 0.5}
    with pytest.raises(AmdError, match="unknown memory type 'wx'"):
        from_flag_value("wx=1", "--k", int)
    flags = option_flags()
    assert flags  # AMD's online memory has one
    for flag, (name, _) in flags.items():
        parsed = build_parser().parse_args(["run", "bfcl", "--agent", "oracle", "--out", "x", "--memory-option",
                                            "a=b", flag])
        assert parsed.memory_option == ["a=b", f"{name}=true"]
        with pytest.raises(AmdError, match=f"takes no --memory bank and no memory option .*{flag}"):
            _memory(build_parser().parse_args(["run", "bfcl", "--agent", "oracle", "--out", "x", flag]), {}, {}, {})


def test_the_workflow_wildcards_take_every_registered_config_method_and_output_and_nothing_else():
    wildcard = {"memcfg": Grid.memory_config_names(), "method": Grid.method_names(),
                "table": Grid.output_names("table"), "figure": Grid.output_names("figure")}
    names = {"memcfg": [name for name in memory_configs() if name != ZERO_SHOT], "method": MEMORY_METHODS.names(),
             "table": output_names("table"), "figure": output_names("figure")}
    for key, regex in wildcard.items():
        assert names[key] and all(re.fullmatch(regex, name) for name in names[key]), key
        assert not any(re.fullmatch(regex, name) for name in (ZERO_SHOT, "x", names[key][0] + "x")), key


# ---- the guard: no module outside amd/memory/, amd/methods/ and their command (amd/cli/memory.py) names a method's words

# Words that also mean something outside memory, and the only parts of amd where they are used so.
OTHER_MEANINGS = {
    "function": ("agent", "benchmarks", "llm"),  # the OpenAI tool type {"type": "function", "function": ...}
    "amd": ("cli", "core", "llm", "benchmarks", "workflow"),  # the program, its package folder; --prompting amd
    "rb": ("core", "llm"),  # a file mode
    "prompts": ("workflow",),  # the checkout's prompts/ folder (a release names the commit's state of it)
    "audit": ("analysis", "cli"),  # amd groups --audit: an audit of a run's injections
}


def method_words() -> set[str]:
    """Every method's name, config (zero_shot is built in), memory type code and name, option and setting."""
    words = set(MEMORY_METHODS.names()) | (set(memory_configs()) - {ZERO_SHOT})
    words |= set(memory_types()) | {t.name for t in memory_types().values()}
    for spec in method_specs():
        words |= set(spec.build_options) | set(spec.run_options) | {s.key for s in spec.settings}
        words |= {s.section for s in spec.settings}
    return words


def named_words(tree: ast.AST, words: set[str], options: set[str]):
    """(line, word) for each string constant (docstrings aside) that is a word or sets one (`word=...`), and each
    attribute or keyword argument named after an option (args.online, row.representation, f(per_turn=...))."""
    skip = docstrings(tree)
    assigned = re.compile(r"(?<![\w.-])(" + "|".join(map(re.escape, sorted(words))) + r")=")
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            found = {node.value} & words or set(assigned.findall(node.value))
        elif isinstance(node, ast.Attribute):
            found = {node.attr} & options
        elif isinstance(node, ast.keyword):
            found = {node.arg} & options
        else:
            continue
        for word in found:
            yield getattr(node, "lineno", 0), word


def allowed(path: Path, word: str) -> bool:
    return path.relative_to(AMD).parts[0] in OTHER_MEANINGS.get(word, ())


def test_no_module_outside_the_memory_methods_names_a_method_option_or_config():
    words = method_words()
    options = words - set(MEMORY_METHODS.names()) - set(memory_configs()) - set(memory_types())
    options -= {t.name for t in memory_types().values()}
    found = [f"{path.relative_to(REPO)}:{line}: {word!r}"
             for path in python_files(outside=("memory", "methods", "cli/memory.py"))
             for line, word in named_words(ast.parse(path.read_text()), words, options) if not allowed(path, word)]
    assert not found, "\n".join(found)
    for path in [*(REPO / "rules").glob("*.smk"), REPO / "Snakefile"]:
        text = path.read_text()
        quoted = set(re.findall(r"[\"']([a-z_]+)[\"']", text)) | set(re.findall(r"wildcards\.(\w+)", text))
        assert not quoted & words, f"{path.relative_to(REPO)} names {sorted(quoted & words)}"


def test_the_guard_finds_single_names_dict_keys_option_keys_and_option_attributes():
    words = method_words()
    options = set(method_specs()[0].run_options)
    option = min(options)
    config = next(name for name in memory_configs() if name != ZERO_SHOT)
    code = (f"a = {config!r}\nb = {{{option!r}: 1}}\nc = f'--memory-option {option}=true'\nd = args.{option}\n"
            f"e = f({option}=1)\n")
    assert sorted(line for line, _ in named_words(ast.parse(code), words, options)) == [1, 2, 3, 4, 5]
    assert not list(named_words(ast.parse(f'"""{config} in a docstring"""\nx = "unrelated"'), words, options))


def docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            found.add(id(body[0].value))
    return found


def test_no_module_outside_the_benchmarks_names_a_benchmark():
    """Code, string literals and imports; docstrings and comments may cite where a number was measured."""
    names = set(BENCHMARKS.names()) | BENCHMARK_PACKAGES
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, sorted(names))) + r")\b", re.IGNORECASE)
    for path in python_files(outside=("benchmarks", *(f"methods/{name}/spec.py" for name in ("reasoningbank", "memp", "sasm")))):
        tree = ast.parse(path.read_text())
        skip = docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
                text = node.value
            elif isinstance(node, ast.Name):
                text = node.id
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                text = " ".join([getattr(node, "module", None) or ""] + [alias.name for alias in node.names])
            else:
                continue
            assert not pattern.search(text.replace("_", " ")), f"{path.relative_to(REPO)}:{node.lineno}: {text!r}"


def test_the_agent_loop_never_imports_a_memory_method():
    for path in (AMD / "agent").glob("*.py"):
        imports = [node for node in ast.walk(ast.parse(path.read_text()))
                   if isinstance(node, (ast.Import, ast.ImportFrom))]
        modules = [getattr(node, "module", None) or node.names[0].name for node in imports]
        assert not any(module.startswith("amd.memory") for module in modules), path.name


def test_a_registry_refuses_a_second_entry_and_suggests_a_near_name():
    registry = Registry("thing")
    registry.add("alpha", "json:dumps")
    with pytest.raises(AmdError, match="registered twice"):
        registry.add("alpha", "json:loads")
    with pytest.raises(AmdError, match=r"unknown thing 'alpah' \(did you mean 'alpha'\?\)"):
        registry.load("alpah")
    registry.add("later", unavailable="needs a licence")
    with pytest.raises(AmdError, match="declared but cannot run here: needs a licence"):
        registry.load("later")
    assert registry.load("alpha")({"a": 1}) == '{"a": 1}'
