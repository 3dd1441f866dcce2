"""The paper's own numbers (data/paper_reference.csv, package data of `amd.reference_data`), looked up for the
cells we ran, and which setting a table row is.

A paper number stands beside one of our cells only where the cell is in the paper's own setting:
- the same model: the run's model, lower-cased, is one that data/paper_models.csv names for the paper's model, and
  the row's teacher is the cell's teacher the same way (exact: 'Qwen/Qwen3-4B' is the paper's Qwen3-4B,
  'Qwen/Qwen3-4B-Instruct-2507' is not);
- the same task set: as many tasks as the paper ran on that benchmark (data/paper_task_sets.csv: AppWorld's 168
  test_normal tasks, BFCL's 200 multi_turn_base tasks, ToolSandbox's 129 base scenarios), so the 91 offline
  ToolSandbox scenarios, a cross split's held-out 30 % or a probe set get none;
- the same protocol: the paper's for that table (PAPER_PROTOCOLS: `shared`, in which its main results and analyses
  were measured; Table 6's two disjoint protocols at the task level); rows without memory hold for any;
- the same sampling: greedy (temperature 0, or none recorded); a sampled run is a sensitivity run of ours;
- the same harness: the release's, which made the numbers; a run of a harness variant (e.g. `paper_text`, the
  paper's text where it and the release disagree) is a sensitivity run, labelled with the variant's name.
"""

import csv
import io
from dataclasses import dataclass
from functools import lru_cache
from importlib.resources import files

from amd.core.vocabulary import (
    CROSS_SPLIT_TASK,
    EXCLUSION_UNITS,
    GROUP,
    SELF_EXCLUDED_TASK,
    SHARED,
    ZERO_SHOT,
)

DATA = files("amd.reference_data")
REFERENCE_FILE = DATA / "paper_reference.csv"
CITATION = "Paper numbers: arXiv 2608.07169, read from its tables, text and project page."
PAPER_PROTOCOLS = {"table6_protocols": (CROSS_SPLIT_TASK, SELF_EXCLUDED_TASK)}  # every other output: (SHARED,)
NO_MEMORY = ("teacher", ZERO_SHOT)  # reference rows that hold under any protocol

# Which setting a table row is (its `setting` column).
PAPER, STRICTER, BOTH, OTHER = "paper", "stricter", "both", "other"
SETTING_NOTE = ("setting: paper = the paper's own (its protocol for this table, greedy students); stricter = ours "
                "(a task never retrieves memory of its own group); both = no memory (zero-shot and teacher runs "
                "serve both); sampled T=… = students sampled at that temperature (a sensitivity run); paper_text = "
                "the paper's text where it and the authors' release disagree (a sensitivity run; the release made "
                "the paper's numbers; any other harness variant is named likewise); other = any other protocol. "
                "Paper numbers stand only beside rows of the paper's setting (or both) whose model and task set are "
                "the paper's.")


def paper_protocols(table: str) -> tuple[str, ...]:
    return PAPER_PROTOCOLS.get(table, (SHARED,))


def sampled(temperature) -> bool:
    return isinstance(temperature, (int, float)) and temperature > 0  # NaN (not recorded) is not


def setting(table: str, protocol, temperature=None, variant=None) -> str:
    """The setting of a row of `table` run under `protocol` (None: no memory) at `temperature`, in a harness
    `variant` (None or NaN: the release's)."""
    if sampled(temperature):
        return f"sampled T={temperature:g}"
    if isinstance(variant, str):
        return variant
    if not isinstance(protocol, str):
        return BOTH
    if protocol in paper_protocols(table):
        return PAPER
    return STRICTER if EXCLUSION_UNITS.get(protocol) == GROUP else OTHER


def _read(name: str) -> tuple[dict, ...]:
    return tuple(csv.DictReader(io.StringIO((DATA / name).read_bytes().decode("utf-8"), newline="")))


@dataclass(frozen=True)
class Reference:
    rows: tuple
    models: dict  # our model id, lower-cased -> the paper's name for it
    task_counts: dict  # benchmark -> how many tasks the paper ran

    def paper_model(self, model: str | None) -> str | None:
        """The paper's name for our model (exact, by the alias table), or None when the paper did not run it."""
        return self.models.get(model.strip().lower()) if model else None

    def value(self, table, benchmark, model, memory, *, tasks, teacher=None, protocol=None,
              temperature=None, variant=None) -> float | None:
        """The paper's number for this cell, or None where the cell is not in the paper's setting (module doc):
        `memory` as the reference names it (a config, `teacher`, a representation, `st=5`), `tasks` the cell's
        task count, `teacher` our teacher's model, `variant` the run's harness variant (None: the release's)."""
        if setting(table, protocol, temperature, variant) not in (PAPER, BOTH):
            return None
        if tasks != self.task_counts.get(benchmark):
            return None
        paper_model = self.paper_model(model)
        for row in self.rows:
            if (row["table"], row["benchmark"], row["memory"], row["model"]) != (table, benchmark, memory,
                                                                                 paper_model):
                continue
            if (row["protocol"] or None) != (None if memory in NO_MEMORY else protocol):
                continue
            if row["teacher"] not in ("", "self") and self.paper_model(teacher) != row["teacher"]:
                continue
            return float(row["value"])
        return None


@lru_cache(maxsize=1)
def load_reference() -> Reference:
    models = {row["model"].lower(): row["paper_model"] for row in _read("paper_models.csv")}
    task_counts = {row["benchmark"]: int(row["tasks"]) for row in _read("paper_task_sets.csv")}
    return Reference(_read("paper_reference.csv"), models, task_counts)
