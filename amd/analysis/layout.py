"""Where the pipeline puts each result, in one place.

The Snakefile builds its output paths from these templates, and the analysis reads a run's cell (student, teacher,
memory config, k, seed, ...) back from its path, so the two can never disagree. Names in a path are the short
config names ([A-Za-z0-9_]+), never raw agent specs (those hold ':', '/', '@'). A bank (and the runs that read it)
carries the name of each of its method's settings (amd.core.spec.Setting, e.g. AMD's representation) after a dash
(`{build}`); a method without settings has none. A memory run of a sensitivity variant of the harness (the config's
`variants`, e.g. `paper_text`) carries its name after its memory config (`{variant}`: `wf_st_fn-paper_text`); the
release's runs carry none.
"""

import re
from dataclasses import dataclass
from pathlib import Path

from amd.core import per_type
from amd.core.vocabulary import memory_configs, method_spec

NAME = r"[A-Za-z0-9_]+"
BUILD = rf"(?:-{NAME})*"  # the `build` part: "-NAME" per setting of the bank's method, in the spec's order
VARIANT = rf"(?:-{NAME})?"  # the `variant` part: "-NAME" for a run of a harness variant, "" for the release's

TEACHER_RUN = "results/{benchmark}/teacher-{teacher}/trajectories.jsonl"
BANK_DIR = "results/{benchmark}/bank/{method}/{teacher}-{writer}-{embedder}{build}"
ZERO_SHOT_RUN = "results/{benchmark}/student-{student}/zero_shot/seed{seed}/trajectories.jsonl"
MEMORY_RUN = (
    "results/{benchmark}/student-{student}/{teacher}-{writer}-{embedder}{build}"
    "/{memcfg}{variant}/{protocol}/k_{k}/seed{seed}/trajectories.jsonl"
)
# The teacher–student fit probe (amd probe): a memory run of the student on the config's small probe task set
PROBE_RUN = MEMORY_RUN.replace("/student-{student}/", "/probe-{student}/")
TABLE = "results/tables/{table}.{ext}"
ESTIMATE = "results/plan/estimate.{ext}"  # amd plan --estimate: the grid's cost before launch
SETUP_DONE = "results/setup/{target}.done"  # a benchmark's setup (a make target) has run
FIGURE = "results/{figure}.pdf"
RUN_FILE, VIEW_FILE = "trajectories.jsonl", "view.html"  # a run's page (amd view) lies beside its run file
# results/'s own folders beside the benchmarks' (tables, the estimate, setup marks, jobs' logs and timings): no
# config may be named after one, since a config's own outputs go to results/NAME/ (amd.workflow.cells.Cells.own_path)
FOLDERS = ("tables", "plan", "setup", "logs", "benchmarks")


# A release folder (a config's `release`, kept by `amd release sync`) holds files of the config's results tree at
# the same paths under it, JSON-lines files gzipped (run files, online histories: `released_name`).
PACKED = ".gz"


def released_name(relative: str) -> str:
    """The name a release keeps a results file under: a .jsonl file gzipped, any other as it is."""
    return relative + PACKED if relative.endswith(".jsonl") else relative


WILDCARDS = {"seed": r"[0-9]+", "build": BUILD, "variant": VARIANT}


def under(template: str, folder: str | None) -> str:
    """A results/ template moved into results/FOLDER/ (a config's own tree); as it is for None."""
    return template if folder is None else template.replace("results/", f"results/{folder}/", 1)


@dataclass(frozen=True)
class RunPaths:
    """Where one config's runs and banks go: results/ for the embedded default, results/NAME/ for any
    other config, so two configs never write one run file (a run they share is run again in each tree, its model
    replies then coming from the response cache)."""

    teacher_run: str = TEACHER_RUN
    bank_dir: str = BANK_DIR
    zero_shot_run: str = ZERO_SHOT_RUN
    memory_run: str = MEMORY_RUN
    probe_run: str = PROBE_RUN


def run_paths(folder: str | None) -> RunPaths:
    return RunPaths(**{name: under(template, folder) for name, template in vars(RunPaths()).items()})


def _pattern(template: str) -> re.Pattern:
    parts = re.split(r"\{(\w+)\}", template)
    regex = "".join(
        re.escape(part) if i % 2 == 0 else f"(?P<{part}>{WILDCARDS.get(part, NAME)})"
        for i, part in enumerate(parts)
    )  # a config's own tree (results/NAME/...) reads as the embedded default's
    return re.compile(regex.replace("results/", f"results/(?:{NAME}/)?", 1) + "$")


_RUN_PATTERNS = {
    "teacher": _pattern(TEACHER_RUN),
    "zero_shot": _pattern(ZERO_SHOT_RUN),
    "memory": _pattern(MEMORY_RUN),
    "probe": _pattern(PROBE_RUN),
}


_JOB_PATTERNS = {**_RUN_PATTERNS, "bank": _pattern(BANK_DIR)}


def job_wildcards(path: str) -> tuple[str, dict] | None:
    """The role of a job's path (teacher, zero_shot, memory, probe, bank) and the names in it as the rules'
    wildcards hold them (text, e.g. k as "wf1_st2"); None for a path outside the layout."""
    for role, pattern in _JOB_PATTERNS.items():
        match = pattern.search(Path(path).as_posix())
        if match:
            return role, match.groupdict()
    return None


def build_part(method: str, cell: dict) -> str:
    """The `build` part of a bank of `method` for a cell naming a value of each of the method's settings."""
    return "".join(f"-{cell[setting.key]}" for setting in method_spec(method).settings)


def build_names(method: str, part: str) -> dict:
    """The names in a `build` part, by setting key ({} where the part does not fit the method's settings)."""
    names = part.split("-")[1:]
    keys = [setting.key for setting in method_spec(method).settings]
    return dict(zip(keys, names)) if len(names) == len(keys) else {}


def variant_part(name: str | None) -> str:
    """The `variant` part of a memory run's path: "-NAME" for a harness variant, "" for the release's harness."""
    return f"-{name}" if name else ""


def variant_name(part: str) -> str | None:
    return part.removeprefix("-") or None


def view_path(run_path: str) -> str:
    return run_path.removesuffix(RUN_FILE) + VIEW_FILE


def run_of_view(run: str) -> str:
    """The run file of a page, from the path between results/ and /view.html (the view rule's `run` wildcard)."""
    return f"results/{run}/{RUN_FILE}"


def describe_run(path) -> dict:
    """The cell a run file belongs to, read from its path: role plus every name in the path.

    A path outside the layout (a file a person made by hand) is described by its location only.
    """
    text = Path(path).as_posix()
    for role, pattern in _RUN_PATTERNS.items():
        match = pattern.search(text)
        if match:
            cell = {"role": role, **match.groupdict()}
            if role == "zero_shot":
                cell["memcfg"] = "zero_shot"
            if "build" in cell:
                cell |= _build_columns(cell)
            if "variant" in cell:
                cell["variant"] = variant_name(cell["variant"])
            if "k" in cell:
                cell["k"] = per_type.from_segment(cell["k"])
            if "seed" in cell:
                cell["seed"] = int(cell["seed"])
            return cell
    return {"role": "other", "path": text}


def _build_columns(cell: dict) -> dict:
    """A run's settings by key, read from its path (none for a config no registered method has)."""
    method = memory_configs().get(cell["memcfg"])
    return build_names(method.method, cell["build"]) if method and method.method else {}
