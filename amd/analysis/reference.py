"""The paper's own numbers (data/paper_reference.csv, package data of `amd.reference_data`), looked up for the
cells we ran.

Source: arXiv 2608.07169 and its project page; each row names the table or figure it was read from, and the
leakage protocol its memory runs used: the paper's main results are `shared` (memory distilled from the evaluated
tasks, retrieval never excluding the task's own), so they sit only beside our cells run under that protocol.
A model matches a reference row when the reference name, reduced to letters and digits, occurs in our model
name reduced the same way ('Qwen3-4B' matches 'Qwen/Qwen3-4B'); the longest such name wins.
"""

import csv
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib.resources import files

REFERENCE_FILE = files("amd.reference_data") / "paper_reference.csv"
CITATION = "Paper numbers: arXiv 2608.07169, read from its tables and project page."


def _squash(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


@dataclass(frozen=True)
class Reference:
    rows: tuple

    def paper_model(self, model: str | None) -> str | None:
        """The paper's name for our model, or None when the paper did not run it."""
        if not model:
            return None
        squashed = _squash(model)
        names = {row["model"] for row in self.rows} | {row["teacher"] for row in self.rows}
        matches = [name for name in names if name and _squash(name) in squashed]
        return max(matches, key=len) if matches else None

    def value(self, table, benchmark, model, setting, teacher=None, protocol=None) -> float | None:
        """The paper's number for this cell; `teacher` (our teacher's model) is checked when the row names one, and
        the row's protocol must be the cell's (rows without one, zero-shot and teacher runs, hold for any)."""
        paper_model = self.paper_model(model)
        paper_teacher = self.paper_model(teacher)
        for row in self.rows:
            if (row["table"], row["benchmark"], row["setting"]) != (table, benchmark, setting):
                continue
            if row["protocol"] and row["protocol"] != protocol:
                continue
            if paper_model is None or row["model"] != paper_model:
                continue
            if row["teacher"] and paper_teacher and row["teacher"] != paper_teacher:
                continue
            return float(row["value"])
        return None


@lru_cache(maxsize=4)
def load_reference(path=REFERENCE_FILE) -> Reference:
    with path.open(newline="", encoding="utf-8") as handle:
        return Reference(tuple(csv.DictReader(handle)))
