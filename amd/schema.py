"""The trajectory record: one JSON object per task, one JSONL file per run.

The schema itself, with every field described, is `amd/trajectory.schema.json`, completed with the fields memory
methods add to it (their specs' `record_fields`); this module reads, validates and writes it. Writes are durable (flush + fsync per record) so a crash never loses a finished task.
"""

import json
import os
from functools import lru_cache
from pathlib import Path

import jsonschema

from amd.errors import AmdError
from amd.files import atomic_file

SCHEMA_NAME = "amd.trajectory/1"


@lru_cache(maxsize=1)
def _validator():
    return jsonschema.Draft202012Validator(trajectory_schema())


def trajectory_schema() -> dict:
    """The trajectory schema with what each registered memory method adds to the memory setting and to injection
    records."""
    from amd.vocabulary import method_specs

    schema = json.loads((Path(__file__).parent / "trajectory.schema.json").read_text())
    places = {"memory": schema["properties"]["memory"], "injection": schema["$defs"]["injection"]}
    for spec in method_specs():
        for place, fields in spec.record_fields.items():
            for name, field in fields.items():
                known = places[place]["properties"]
                if known.setdefault(name, field) != field:
                    raise AmdError(f"memory method {spec.name}: trajectory field {place}.{name} is declared twice")
    return schema


def validate(record: dict, where: str = "record") -> dict:
    """Return `record` if it is a valid trajectory, else raise AmdError naming the first problem."""
    error = next(iter(_validator().iter_errors(record)), None)
    if error is not None:
        field = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        raise AmdError(f"{where}: invalid trajectory at {field}: {error.message[:300]}")
    return record


def read_trajectories(path) -> list[dict]:
    """Read and validate every record of a run file; a bad line is an error naming the file and line number.
    (A run killed mid-write leaves a partial last line; the runner cuts it with `drop_truncated_tail` first.)"""
    path = Path(path)
    if not path.exists():
        raise AmdError(f"{path}: no such trajectory file")
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise AmdError(f"{path}:{number}: corrupt trajectory line ({exc.msg})") from None
        records.append(validate(record, where=f"{path}:{number}"))
    return records


def append_durably(path, record: dict) -> None:
    """Append one validated record and make it durable before returning."""
    validate(record)
    line = json.dumps(record, ensure_ascii=False) + "\n"
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line)
        handle.flush()
        os.fsync(handle.fileno())


def drop_truncated_tail(path) -> None:
    """Cut a partial last line (left by a killed writer) so appends start on a fresh line."""
    path = Path(path)
    if not path.exists():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        cut = data.rfind(b"\n") + 1
        with open(path, "r+b") as handle:
            handle.truncate(cut)
            handle.flush()
            os.fsync(handle.fileno())


def rewrite_sorted(path, sort_key) -> None:
    """Reorder the lines of a run file by `sort_key(record)` and replace it in one rename, so readers never see a
    half-written file. Every line must have been validated already (written by `append_durably`, or read by
    `read_trajectories`): lines are moved as they are, not validated or re-encoded."""
    path = Path(path)
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    lines.sort(key=lambda line: sort_key(json.loads(line)))
    with atomic_file(path) as handle:
        handle.writelines(line + "\n" for line in lines)
