"""The reference pages of the docs site, generated from the code at every build (docs/gen_pages.py writes them through
mkdocs-gen-files; tests/test_docs.py checks them): every config key from the workflow's schema, every command and
option from the `amd` parsers, the result paths and their wildcards, the trajectory schema.

Modules are found by what they define (`defining_module`), never by a hard-coded path, so moving a module changes
nothing here.
"""

import argparse
import ast
import importlib
import json
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
KINDS = {"integer": "whole number", "number": "number", "string": "text", "boolean": "true/false",
         "array": "list", "object": "mapping", "null": "null"}
# What each wildcard of a result path stands for (tests/test_docs.py: every wildcard of every path has one).
WILDCARDS = {
    "benchmark": "a benchmark of the config's `benchmarks` (bfcl, appworld, toolsandbox, agentdojo, or a plug-in's)",
    "teacher": "a name under `teachers` (or `teacher_pools`) whose trajectories the bank distils",
    "writer": "a name under `writers`: who writes the memory entries (`rules`, or a model)",
    "embedder": "a name under `embedders`: the model that embeds entries and queries",
    "build": "`-NAME` for each setting of the bank's memory method (AMD's representation: `-amd`); empty for a "
             "method without settings",
    "method": "a registered memory method (amd, reasoningbank, memp, sasm, or a plug-in's)",
    "student": "a name under `students`",
    "memcfg": "a memory config (wf, wf_st, wf_st_fn, ..., a baseline's, or a plug-in's)",
    "variant": "`-NAME` for a run of a harness variant of the config's `variants` (e.g. `-paper_text`); empty for "
               "the benchmark's own harness",
    "protocol": "the leakage protocol (self_excluded, self_excluded_task, cross_split, cross_split_task, shared)",
    "k": "top-k per memory type code, e.g. `wf1_st1_fn1`",
    "seed": "the run's sampling seed",
    "table": "a registered table (table1_main, table2_ablation, ..., or a plug-in's)",
    "figure": "a registered figure (fig3_steps, fig4_student_size, fig5_k_sweep, or a plug-in's)",
    "ext": "`csv` or `md`",
    "server": "a model server of a served agent: AGENT-dDEPTH-bN for a batch of its jobs (amd.workflow.servers), "
              "AGENT-solo-HASH for a job outside the config's experiments",
    "target": "a benchmark's set-up make target (e.g. appworld-venv)",
}


# ---- finding the code -----------------------------------------------------------------------------------------

def defining_module(name: str) -> str:
    """The dotted name of the module of amd/ that defines `name` at its top level (a function, class or constant)."""
    for path in sorted((REPO / "amd").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            defined = [node.name] if isinstance(node, (ast.FunctionDef, ast.ClassDef)) else [
                target.id for target in getattr(node, "targets", [getattr(node, "target", None)])
                if isinstance(target, ast.Name)]
            if name in defined:
                return ".".join(path.relative_to(REPO).with_suffix("").parts)
    raise LookupError(f"no module of amd/ defines {name}")


def load(name: str):
    return getattr(importlib.import_module(defining_module(name)), name)


def amd_parser() -> argparse.ArgumentParser:
    """The parser of the `amd` command, found through pyproject.toml's console script."""
    target = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]["amd"]
    return importlib.import_module(target.split(":")[0]).build_parser()


def cell(text) -> str:
    """Text for a Markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|").replace("<", "&lt;")


def code(text) -> str:
    """`text` as a Markdown code span; one that holds a backtick is fenced by two."""
    return f"`` {text} ``" if "`" in str(text) else f"`{text}`"


# ---- the config ------------------------------------------------------------------------------------------------

def config_rows(schema: dict) -> Iterator[tuple[str, dict]]:
    """(key path, its schema) for every key of the config, entries of named mappings as NAME (BENCHMARK, ...)."""
    defs = schema.get("$defs", {})

    def resolved(node: dict) -> dict:
        while "$ref" in node:
            target = defs[node["$ref"].rsplit("/", 1)[1]]
            node = {**target, **{key: value for key, value in node.items() if key != "$ref"}}
        return node

    def walk(node: dict, path: str) -> Iterator[tuple[str, dict]]:
        node = resolved(node)
        for key, child in node.get("properties", {}).items():
            yield from entry(child, f"{path}.{key}" if path else key)
        entries = node.get("additionalProperties")
        if isinstance(entries, dict) and entries:
            names = resolved(node.get("propertyNames", {})).get("title", "name")
            yield from entry(entries, f"{path}.{names.upper().replace(' ', '_')}")

    def entry(node: dict, path: str) -> Iterator[tuple[str, dict]]:
        yield path, resolved(node)
        yield from walk(node, path)

    yield from walk(schema, "")


def type_words(node: dict) -> str:
    if "enum" in node:
        return "one of " + ", ".join(code(value) for value in node["enum"])
    if "forms" in node:
        return f"{node.get('title', 'text')}: " + ", ".join(code(form) for form in node["forms"])
    if "oneOf" in node:
        return " or ".join(type_words(choice) for choice in node["oneOf"])
    kinds = node.get("type", "object" if "properties" in node else "")
    words = " or ".join(KINDS.get(kind, kind) for kind in ([kinds] if isinstance(kinds, str) else kinds))
    if words == "list" and isinstance(node.get("items"), dict):
        words = f"list of {type_words(node['items']) or 'values'}"
    bounds = [f"≥ {node['minimum']}" if "minimum" in node else "", f"> {node['exclusiveMinimum']}"
              if "exclusiveMinimum" in node else "", f"≤ {node['maximum']}" if "maximum" in node else ""]
    return " ".join([words or node.get("title", ""), *filter(None, bounds)]).strip()


def default_of(path: str, base: dict):
    value = base
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return ""
        value = value[part]
    return "" if isinstance(value, dict) else f"`{json.dumps(value)}`"


def config_reference() -> str:
    schema = load("config_schema")()
    module = importlib.import_module(defining_module("config_schema"))
    base = module.read_config(REPO / module.CONFIG_DIR / module.BASE_FILE)
    lines = ["# Config reference", "",
             ("Every key of a workflow config, generated from the schema the workflow checks configs with "
             f"(`{defining_module('config_schema')}`; memory methods and benchmarks add their options to it). "
             "**Default** is the value in `config/base.yaml`, what every config starts from; the embedded default "
             "(`config/config.yaml`) and your `--configfile` files go over it ([Configs](../guides/configs.md)). "
             "Upper-case parts of a key are names you choose (`students.NAME`) or registered names (`BENCHMARK`)."),
             ""]
    section = None
    for path, node in config_rows(schema):
        top = path.split(".")[0]
        if top != section:
            section = top
            lines += ["", f"## `{top}`", "", cell(node.get("description", "")), "",
                      "| key | type | default | description |", "|---|---|---|---|"]
        description = node.get("description", "").removeprefix("generated: ")
        lines.append(f"| `{path}` | {cell(type_words(node))} | {default_of(path, base)} | {cell(description)} |")
    return "\n".join(lines) + "\n"


# ---- the command line ------------------------------------------------------------------------------------------

def commands(parser: argparse.ArgumentParser, name: str = "amd") -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """(command line, help, parser) for every command and sub-command."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for sub_name, sub in action.choices.items():
                yield f"{name} {sub_name}", helps.get(sub_name) or "", sub
                yield from commands(sub, f"{name} {sub_name}")


def option_rows(parser: argparse.ArgumentParser) -> Iterator[str]:
    formatter = parser._get_formatter()
    for action in parser._actions:
        if action.help == argparse.SUPPRESS or isinstance(action, (argparse._HelpAction,
                                                                    argparse._SubParsersAction)):
            continue
        name = ", ".join(action.option_strings) or action.metavar or action.dest
        if action.option_strings and action.nargs != 0:
            name += f" {action.metavar or action.dest.upper()}"
        default = "" if action.default in (None, argparse.SUPPRESS, [], False) or action.required else (
            f"`{action.default}`")
        what = formatter._expand_help(action) if action.help else ""
        if action.choices and not isinstance(action.choices, dict):
            what += " Choices: " + ", ".join(f"`{choice}`" for choice in action.choices) + "."
        yield f"| `{name}` | {'yes' if action.required else ''} | {default} | {cell(what)} |"


def cli_reference() -> str:
    parser = amd_parser()
    lines = ["# Command reference", "",
             ("Every command of `amd` and every option, generated from its parsers. Each Snakemake rule is one of "
             "these calls; `amd COMMAND --help` prints the same. The names listed (benchmarks, memory methods and "
             "configs, tables, figures) are those registered in this tree when the site was built: a plug-in "
             "installed beside amd adds its own, and `amd COMMAND --help` lists them."), ""]
    for command, help_text, sub in commands(parser):
        rows = list(option_rows(sub))
        lines += [f"## `{command}`", "", cell(help_text), "", "```", sub.format_usage().strip(), "```", ""]
        if rows:
            lines += ["| option | required | default | what |", "|---|---|---|---|", *rows, ""]
    return "\n".join(lines) + "\n"


# ---- result paths ----------------------------------------------------------------------------------------------

def layout_module():
    """The module the workflow takes its result paths from (the layout rules/common.smk imports)."""
    common = (REPO / "rules" / "common.smk").read_text()
    return importlib.import_module(re.search(r"^from (\S+) import layout$", common, re.MULTILINE).group(1) + ".layout")


def path_templates() -> dict[str, str]:
    layout = layout_module()
    return {name: value for name, value in vars(layout).items()
            if name.isupper() and isinstance(value, str) and value.startswith("results/")}


def paths_reference() -> str:
    layout = layout_module()
    templates = path_templates()
    used = sorted({wildcard for template in templates.values() for wildcard in re.findall(r"\{(\w+)\}", template)})
    lines = ["# Result paths and wildcards", "",
             (f"Where the workflow puts each result, generated from `{layout.__name__}` (the one place paths are "
             "made; the analysis reads a run's cell back from its path). A config with a `name` of its own puts its "
             "tables, figures and estimate under `results/NAME/` (`results/paper/tables/...`); runs, banks and "
             "scores are shared by the configs that name the same agents. Each job's log is the path under "
             "`results/logs/`, its wall time and memory under `results/benchmarks/`. A run's page, `view.html`, "
             "lies beside its `trajectories.jsonl`."), "",
             "| what | path |", "|---|---|"]
    lines += [f"| `{name}` | `{template}` |" for name, template in templates.items()]
    lines += ["", "## Wildcards", "", "| wildcard | what it stands for |", "|---|---|"]
    lines += [f"| `{{{name}}}` | {cell(WILDCARDS.get(name, ''))} |" for name in used]
    lines += ["", ("An example: `results/agentdojo/student-qwen15/oracle-rules-minilm-amd/wf_st_fn/self_excluded/"
              "k_wf1_st1_fn1/seed0/trajectories.jsonl` is the embedded default's 1.5B student with AMD memory "
              "distilled from the oracle's trajectories by the `rules` writer, embedded by MiniLM.")]
    return "\n".join(lines) + "\n"


# ---- the trajectory schema -------------------------------------------------------------------------------------

def trajectory_rows(schema: dict) -> Iterator[tuple[str, dict]]:
    defs = schema.get("$defs", {})

    def walk(node: dict, path: str, seen: frozenset) -> Iterator[tuple[str, dict]]:
        ref = node.get("$ref", "")
        if ref:
            name = ref.rsplit("/", 1)[1]
            if name in seen:
                return
            node, seen = {**defs[name], **node}, seen | {name}
        for key, child in node.get("properties", {}).items():
            child_path = f"{path}.{key}" if path else key
            yield child_path, child
            yield from walk(child, child_path, seen)
        items = node.get("items")
        if isinstance(items, dict):
            yield from walk(items, f"{path}[]", seen)

    yield from walk(schema, "", frozenset())


def trajectory_reference() -> str:
    schema = load("trajectory_schema")()
    lines = ["# Trajectory schema", "",
             ("One JSON object per task, one JSONL file per run; every reader validates against this schema "
             f"(`{defining_module('trajectory_schema')}.trajectory_schema`, with the fields memory methods add), "
             "generated here field by field. `[]` marks the items of a list."), "", cell(schema.get("description", "")),
             "", "| field | type | description |", "|---|---|---|"]
    for path, node in trajectory_rows(schema):
        kinds = node.get("type", "")
        words = " or ".join(KINDS.get(kind, kind) for kind in ([kinds] if isinstance(kinds, str) else kinds))
        lines.append(f"| `{path}` | {words} | {cell(node.get('description', ''))} |")
    return "\n".join(lines) + "\n"


# ---- the package's modules -------------------------------------------------------------------------------------

def module_summaries() -> dict[str, str]:
    """Every module of amd/ (its path) and the first sentence of its docstring."""
    summaries = {}
    for path in sorted((REPO / "amd").rglob("*.py")):
        docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        first = " ".join(docstring.split("\n\n")[0].split())
        summaries[path.relative_to(REPO).as_posix()] = first
    return summaries


def modules_reference() -> str:
    lines = ["# Modules", "",
             ("Every module of the `amd` package and the first paragraph of its docstring, generated from the code. "
             "Layers run benchmarks → agent → memory → analysis → workflow and the command line, over a small core "
             "(errors, files, schema, registries) and the model layer; nothing imports upward. A plug-in needs only "
             "[`amd.api`](api.md)."), "", "| module | what it is |", "|---|---|"]
    lines += [f"| `{path}` | {cell(summary)} |" for path, summary in module_summaries().items()]
    return "\n".join(lines) + "\n"


PAGES = {"reference/config.md": config_reference, "reference/modules.md": modules_reference, "reference/cli.md": cli_reference,
         "reference/paths.md": paths_reference, "reference/trajectory.md": trajectory_reference}
