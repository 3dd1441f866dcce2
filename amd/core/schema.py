"""The trajectory record: one JSON object per task, one JSONL file per run.

The schema itself, with every field described, is `amd/core/trajectory.schema.json`, completed with the fields memory
methods add to it (their specs' `record_fields`); this module reads, validates and writes it. Writes are durable (flush + fsync per record) so a crash never loses a finished task.
"""

import json
import logging
import os
from collections import Counter
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

import jsonschema

from amd.core.errors import AmdError
from amd.core.files import atomic_file
from amd.core.trajectory import TrajectoryRecord, upgrade

RecordT = TypeVar("RecordT", bound=Mapping[str, Any])
log = logging.getLogger("amd")


@lru_cache(maxsize=1)
def _validator():
    return jsonschema.Draft202012Validator(trajectory_schema())


def trajectory_schema() -> dict:
    """The trajectory schema with what each registered memory method adds to the memory setting and to injection
    records."""
    from amd.core.vocabulary import method_specs

    schema = json.loads((Path(__file__).parent / "trajectory.schema.json").read_text())
    places = {"memory": schema["properties"]["memory"], "injection": schema["$defs"]["injection"]}
    for spec in method_specs():
        for place, fields in spec.record_fields.items():
            for name, field in fields.items():
                known = places[place]["properties"]
                if known.setdefault(name, field) != field:
                    raise AmdError(f"memory method {spec.name}: trajectory field {place}.{name} is declared twice")
    return schema


def validate(record: RecordT, where: str = "record") -> RecordT:
    """Return `record` if it is a valid trajectory, else raise AmdError naming the first problem."""
    error = next(iter(_validator().iter_errors(record)), None)
    if error is not None:
        field = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        raise AmdError(f"{where}: invalid trajectory at {field}: {error.message[:300]}")
    return record


def read_trajectories(path) -> list[TrajectoryRecord]:
    """Read and validate every record of a run file, each as the current version reads it (amd.core.trajectory.upgrade:
    an older file's records gain the fields added since, the file itself is left as it is); a bad line is an error
    naming the file and line number.
    (A run killed mid-write leaves a partial last line; the runner cuts it with `drop_truncated_tail` first.)"""
    path = Path(path)
    if not path.exists():
        raise AmdError(f"{path}: no such trajectory file")
    with open(path, "rb") as handle:
        return [parse_line(raw, path, number) for number, raw in enumerate(handle, start=1) if raw.strip()]


def parse_line(raw: bytes, path, number: int) -> TrajectoryRecord:
    """One line of a run file as a validated record (read_trajectories); a bad line names its file and number."""
    line = _decoded(raw, Path(path), number)
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise AmdError(f"{path}:{number}: corrupt trajectory line ({exc.msg})") from None
    return upgrade(validate(record, where=f"{path}:{number}"))


def _decoded(raw: bytes, path: Path, number: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AmdError(f"{path}:{number}: not UTF-8 text (byte {raw[exc.start]:#04x} at column {exc.start + 1}); "
                       "a trajectory file is JSON lines in UTF-8") from None


def read_run(path) -> list[TrajectoryRecord]:
    """The records of one run's file (read_trajectories), refused when they are not one run: a task written twice,
    or the records of several runs (another agent, memory setting or benchmark), as two writers of one file leave."""
    records = read_trajectories(path)
    runs = Counter(json.dumps([r["benchmark"], r["agent"], r["memory"]], sort_keys=True) for r in records)
    if len(runs) > 1:
        described = "; ".join(f"{_run_name(json.loads(run))}: {count} tasks"
                              for run, count in runs.most_common())
        raise AmdError(f"{path}: holds the records of {len(runs)} different runs ({described}); one file holds one "
                       "run: rerun each into its own --out")
    repeated = [task for task, count in Counter(r["task_id"] for r in records).items() if count > 1]
    if repeated:
        shown = ", ".join(repeated[:5]) + (f" and {len(repeated) - 5} more" if len(repeated) > 5 else "")
        raise AmdError(f"{path}: {len(repeated)} tasks are written more than once ({shown}); a run writes each "
                       "task once: rerun into a fresh --out")
    return records


def _run_name(run: list) -> str:
    benchmark, agent, memory = run
    return f"{benchmark}, agent {agent['spec']}, memory {memory.get('config')}"


class RunFile:
    """A run file one process appends records to, holding every line of it, so that records cannot be lost without a
    word: each append checks that the path is still the file this process writes (the same file, the size it left),
    and where it was removed, replaced or cut (another process: a second workflow started with --nolock removes a
    failed job's outputs) rewrites it whole from what it holds, with a warning. Appends are durable (flush + fsync
    per record); a write that fails part way (a full disk) is cut back off, so the file keeps only whole lines.
    Lines are held as written or read (validated then), never re-encoded."""

    def __init__(self, path):
        self.path = Path(path)
        self._handle = open(self.path, "ab+", buffering=0)  # noqa: SIM115 (held for the run, until close)
        self._handle.seek(0)
        self.lines: list[bytes] = [line for line in self._handle.read().splitlines(keepends=True) if line.strip()]
        self._size = self._handle.tell()

    def append(self, record: Mapping[str, Any]) -> None:
        validate(record)
        line = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
        self.keep()
        try:
            rest = memoryview(line)
            while rest:
                rest = rest[self._handle.write(rest):]
            os.fsync(self._handle.fileno())
        except OSError:
            self._handle.truncate(self._size)
            raise
        self.lines.append(line)
        self._size += len(line)

    def keep(self) -> None:
        """Rewrite the file from the lines held if the path is no longer the file this process wrote."""
        if self._intact():
            return
        log.warning("%s was removed, replaced or cut while this run wrote it (by another process); rewrote it from "
                    "the %d records this run holds", self.path, len(self.lines))
        self.rewrite(self.lines)

    def rewrite(self, lines: list[bytes]) -> None:
        """Replace the file with `lines` in one rename, so readers never see a half-written file."""
        with atomic_file(self.path, "wb") as handle:
            handle.writelines(lines)
        self._handle.close()
        self._handle = open(self.path, "ab", buffering=0)  # noqa: SIM115 (held for the run, until close)
        self.lines, self._size = list(lines), sum(map(len, lines))

    def close(self) -> None:
        self._handle.close()

    def _intact(self) -> bool:
        try:
            found = os.stat(self.path)
        except FileNotFoundError:
            return False
        held = os.fstat(self._handle.fileno())
        return (found.st_dev, found.st_ino, found.st_size) == (held.st_dev, held.st_ino, self._size)


def drop_truncated_tail(path) -> int:
    """Cut a partial last line (left by a killed writer) so appends start on a fresh line; the bytes cut."""
    path = Path(path)
    if not path.exists():
        return 0
    with open(path, "r+b") as handle:
        end = handle.seek(0, os.SEEK_END)
        cut = _last_line_start(handle, end)
        if cut == end:
            return 0
        handle.truncate(cut)
        handle.flush()
        os.fsync(handle.fileno())
    return end - cut


def _last_line_start(handle, end: int, block: int = 1 << 16) -> int:
    """Where the bytes after the file's last newline begin (`end` when it ends with one), reading from the end."""
    position = end
    while position > 0:
        start = max(0, position - block)
        handle.seek(start)
        chunk = handle.read(position - start)
        if position == end and chunk.endswith(b"\n"):
            return end
        newline = chunk.rfind(b"\n")
        if newline >= 0:
            return start + newline + 1
        position = start
    return 0


def expected_tasks_path(path) -> Path:
    return Path(str(path) + ".tasks.json")


def write_expected_tasks(path, benchmark: str, task_ids: list[str]) -> None:
    """Beside a run file, the tasks the run was asked for: what a score divides by."""
    with atomic_file(expected_tasks_path(path)) as handle:
        json.dump({"benchmark": benchmark, "task_ids": list(task_ids)}, handle)


def expected_tasks(path) -> list[str] | None:
    """The tasks a run was asked for, or None for a run file without that record (made by hand or before it)."""
    listed = expected_tasks_path(path)
    if not listed.exists():
        return None
    try:
        return list(json.loads(listed.read_bytes())["task_ids"])
    except (ValueError, KeyError, TypeError):
        raise AmdError(f"{listed}: not the list of tasks `amd run` writes; delete it to score {path} by its "
                       "records alone, or rerun the run") from None
