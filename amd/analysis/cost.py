"""What a run cost, in tokens and US dollars, by role: the agent's replies (`agent`), the student replies its memory
method asked for beside them (`memory`: a decomposition, keywords, a stage plan), a simulated user's replies (`user`,
ToolSandbox) and the writer that distilled the memory it read (`writer`: the bank's whole build, counted in every run
that reads the bank, plus what the run's memory method says it used beside its records: AMD's online writer model).

Dollars come from the price table `data/prices.csv` (package data `amd.reference_data`; USD per million tokens, each
price with its date and source): (prompt - cached) x input + cached x cached_input + completion x output. Hosted
models are the `openai:` specs; a model you serve yourself (`local:`, `vllm:`) and the model-free agents and writers
(oracle, rules) cost 0 $, and their tokens still count. An `openai:` model missing from the table, or usage a file
does not record, leaves the run's dollars (and its token total) unknown, with a note saying why: never a guess.
"""

import csv
import hashlib
import io
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any

from amd.core.registry import load_target
from amd.core.trajectory import TrajectoryRecord
from amd.core.vocabulary import run_method
from amd.llm.specs import price_name
from amd.memory.writing import RULES

PRICE_FILE = files("amd.reference_data") / "prices.csv"
HOSTED = "openai:"


@dataclass(frozen=True)
class Price:
    input: float
    cached_input: float | None
    output: float
    date: str
    source: str


@cache
def price_table() -> dict[str, Price]:
    rows = csv.DictReader(io.StringIO(PRICE_FILE.read_bytes().decode("utf-8"), newline=""))
    return {row["spec"]: Price(float(row["input"]), float(row["cached_input"]) if row["cached_input"] else None,
                               float(row["output"]), row["date"], row["source"]) for row in rows}


@dataclass
class Usage:
    role: str  # agent, memory, user or writer
    spec: str  # the model (or model-free agent or writer) that took the tokens
    prompt: int = 0
    completion: int = 0
    cached_prompt: int = 0
    known: bool = True  # False: some of it was not recorded

    @property
    def tokens(self) -> int | None:
        return self.prompt + self.completion if self.known else None

    def add(self, prompt: int, completion: int, cached_prompt: int = 0) -> None:
        self.prompt += prompt
        self.completion += completion
        self.cached_prompt += cached_prompt


def dollars(usage: Usage) -> float | None:
    """US dollars of one usage; None when its tokens are unknown or its hosted model has no price."""
    if usage.tokens is None:
        return None
    if not usage.spec.startswith(HOSTED) or usage.tokens == 0:
        return 0.0
    price = price_table().get(price_name(usage.spec))
    if price is None:
        return None
    return priced(usage.prompt, usage.cached_prompt, usage.completion, price.input, price.cached_input, price.output)


def priced(prompt: int, cached_prompt: int, completion: int, input_usd: float, cached_input_usd: float | None,
           output_usd: float) -> float:
    """US dollars of these tokens at these prices per million tokens. Cached prompt tokens are billed at their own
    price where the model has one, else as any prompt token."""
    cached = cached_prompt if cached_input_usd is not None else 0
    return ((prompt - cached) * input_usd + cached * (cached_input_usd or 0) + completion * output_usd) / 1e6


def run_cost(records: list[TrajectoryRecord], run_path) -> dict:
    """{tokens, usd, parts: [{role, spec, prompt, completion, cached_prompt, tokens, usd}], notes} of one run file."""
    parts, notes = _usages(records, run_path)
    rows = [asdict(usage) | {"tokens": usage.tokens, "usd": dollars(usage)} for usage in parts]
    for row in rows:
        if row["tokens"] is not None and row["usd"] is None:
            notes.append(f"{row['role']}: no price for {price_name(row['spec'])} in {PRICE_FILE.name}: add its row (USD per "
                         "million tokens, with date and source)")
    known = all(row["tokens"] is not None for row in rows)
    return {"tokens": sum(row["tokens"] for row in rows) if known else None,
            "usd": sum(row["usd"] for row in rows) if all(row["usd"] is not None for row in rows) else None,
            "parts": rows, "notes": notes}


def _usages(records: list[TrajectoryRecord], run_path) -> tuple[list[Usage], list[str]]:
    by_key: dict[tuple[str, str], Usage] = {}
    notes: list[str] = []

    def usage(role: str, spec: str) -> Usage:
        return by_key.setdefault((role, spec), Usage(role, spec))

    for record in records:
        spec = record["agent"]["spec"]
        tokens = record["tokens"]
        usage("agent", spec).add(tokens["prompt"], tokens["completion"], tokens.get("cached_prompt", 0))
        if "memory_calls" in record:
            usage("memory", spec).add(record["memory_calls"]["prompt"], record["memory_calls"]["completion"])
        if "user_calls" in record:
            calls = record["user_calls"]
            usage("user", calls["spec"]).add(calls["prompt"], calls["completion"], calls.get("cached_prompt", 0))
        elif "user_model" in record["checker"]:
            usage("user", record["checker"]["user_model"]).known = False
            notes.append(f"user: {record['task_id']} was recorded before amd counted the user simulator's tokens")
    parts = list(by_key.values())
    if records:
        parts += _writer_usages(records[0]["memory"], records, run_path, notes)
    return parts, list(dict.fromkeys(notes))


def _writer_usages(memory: Mapping[str, Any], records: list[TrajectoryRecord], run_path,
                   notes: list[str]) -> list[Usage]:
    """The bank's build (read at the path the run recorded, relative to the current folder) and what the run's
    memory method says its run used beside the records (its spec's run_usage, e.g. an online writer model)."""
    parts = _bank_writers(bank, memory.get("bank_sha256"), notes) if (bank := memory.get("bank")) else []
    spec = run_method(memory)
    for used in load_target(spec.run_usage)(records, run_path) if spec and spec.run_usage else []:
        if "note" in used:
            notes.append(used["note"])
        parts.append(Usage(used["role"], used["spec"], used.get("prompt", 0), used.get("completion", 0),
                           known=used.get("known", True)))
    return parts


def _bank_writers(bank: str, sha256: str | None, notes: list[str]) -> list[Usage]:
    path = Path(bank) / "manifest.json"
    if not path.exists():
        notes.append(f"writer: the run's bank {bank} is not here (relative to this folder): its build is unknown")
        return [Usage("writer", "?", known=False)]
    raw = path.read_bytes()
    if sha256 and hashlib.sha256(raw).hexdigest() != sha256:
        notes.append(f"writer: {bank} was rebuilt after the run (its manifest's sha256 differs): its build is unknown")
        return [Usage("writer", "?", known=False)]
    manifest = json.loads(raw)
    if "pool" in manifest:  # a pooled bank was written by its members' writers
        return [part for member in manifest["pool"]["members"].values()
                for part in _bank_writers(member["bank"], member["bank_sha256"], notes)]
    spec, written = manifest["writer"]["spec"], manifest.get("writer_usage")
    if written is None and spec != RULES:
        notes.append(f"writer: {bank} was built before amd recorded its writer's tokens")
        return [Usage("writer", spec, known=False)]
    written = written or {}
    return [Usage("writer", spec, written.get("prompt", 0), written.get("completion", 0),
                  written.get("cached_prompt", 0))]
