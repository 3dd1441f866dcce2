"""Where the pipeline puts each result, in one place.

The Snakefile builds its output paths from these templates, and the analysis reads a run's cell (student, teacher,
memory config, k, seed, ...) back from its path, so the two can never disagree. Names in a path are the short
config names ([A-Za-z0-9_]+), never raw agent specs (those hold ':', '/', '@').
"""

import re
from pathlib import Path

NAME = r"[A-Za-z0-9_]+"
K_ITEM = re.compile(r"^([a-z]+)([0-9]+)$")  # one memory type code and its k, as in k_wf1_st2

TEACHER_RUN = "results/{benchmark}/teacher-{teacher}/trajectories.jsonl"
BANK_DIR = "results/{benchmark}/bank/{method}/{teacher}-{writer}-{embedder}-{representation}"
ZERO_SHOT_RUN = "results/{benchmark}/student-{student}/zero_shot/seed{seed}/trajectories.jsonl"
MEMORY_RUN = (
    "results/{benchmark}/student-{student}/{teacher}-{writer}-{embedder}-{representation}"
    "/{memcfg}/{protocol}/k_{k}/seed{seed}/trajectories.jsonl"
)
# The teacher–student fit probe (amd probe): a memory run of the student on the config's small probe task set
PROBE_RUN = MEMORY_RUN.replace("/student-{student}/", "/probe-{student}/")
TABLE = "results/tables/{table}.{ext}"
ESTIMATE = "results/plan/estimate.{ext}"  # amd plan --estimate: the grid's cost before launch
SETUP_DONE = "results/setup/{target}.done"  # a benchmark's setup (a make target) has run
FIGURE = "results/{figure}.pdf"
RUN_FILE, VIEW_FILE = "trajectories.jsonl", "view.html"  # a run's page (amd view) lies beside its run file


def _pattern(template: str) -> re.Pattern:
    parts = re.split(r"\{(\w+)\}", template)
    regex = "".join(
        re.escape(part) if i % 2 == 0 else f"(?P<{part}>{r'[0-9]+' if part == 'seed' else NAME})"
        for i, part in enumerate(parts)
    )
    return re.compile(regex + "$")


_RUN_PATTERNS = {
    "teacher": _pattern(TEACHER_RUN),
    "zero_shot": _pattern(ZERO_SHOT_RUN),
    "memory": _pattern(MEMORY_RUN),
    "probe": _pattern(PROBE_RUN),
}


def view_path(run_path: str) -> str:
    return run_path.removesuffix(RUN_FILE) + VIEW_FILE


def run_of_view(run: str) -> str:
    """The run file of a page, from the path between results/ and /view.html (the view rule's `run` wildcard)."""
    return f"results/{run}/{RUN_FILE}"


def format_k(k: dict, type_codes) -> str:
    """{'wf': 1, 'st': 2, 'fn': 1} with codes ('wf', 'st') -> 'wf1_st2' (only the types the config uses, in its
    order)."""
    return "_".join(f"{code}{int(k[code])}" for code in type_codes)


def parse_k(text: str) -> dict:
    """'wf1_st2' -> {'wf': 1, 'st': 2}."""
    return {match.group(1): int(match.group(2)) for item in text.split("_") if (match := K_ITEM.match(item))}


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
            if "k" in cell:
                cell["k"] = parse_k(cell["k"])
            if "seed" in cell:
                cell["seed"] = int(cell["seed"])
            return cell
    return {"role": "other", "path": text}
