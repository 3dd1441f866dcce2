"""A memory bank's manifest and entries as Python types, and how a bank of an older version is read.

Versions: a manifest names its schema (`BANK_SCHEMA`). A bank of an older version is read as the current one reads
it: `upgrade` migrates its manifest and entries in memory, filling in what a field's absence meant, and leaves its
files as they were written (so their checksums, and the manifest's sha256 that runs record, still hold). A newer
version than this amd knows is refused, as is one too old to migrate.

    amd.memory_bank/1  (to 2026-12-01) AMD's three types in fixed files, function vectors in function_reasoning.npy,
                       no method, no task groups: not migrated (rebuild it)
    amd.memory_bank/2  (2026-12-01 to 12-04) any method's types, entries with source_group; over time
                       solved_task_ids (12-02), files (12-03), instruction_like and delta (12-04) were added
    amd.memory_bank/3  every manifest holds delta and instruction_like
"""

from typing import Any, NotRequired, TypedDict, cast

from amd.core.errors import AmdError
from amd.memory.screening import Screened, instruction_like

FAMILY = "amd.memory_bank"
VERSION = 3
BANK_SCHEMA = f"{FAMILY}/{VERSION}"
OLDEST_MIGRATED = 2


class MethodInfo(TypedDict):
    name: str  # the registered memory method that built the bank
    version: str  # its implementation's version


class SourceFile(TypedDict):
    """A run file the bank was distilled from."""

    path: str
    sha256: str
    records: int
    successful: int
    teacher: NotRequired[str]  # a pooled bank's: the member it came from


class TypeInfo(TypedDict):
    embedded: str  # the entry field whose embedding the type's FAISS index holds


BankManifest = TypedDict("BankManifest", {  # functional form: `schema` would shadow a TypedDict class attribute
    "schema": str,
    "amd_version": str,
    "method": MethodInfo,
    "writer": dict[str, Any],  # spec and kind (a model's params); a pooled bank's: spec and by_teacher
    "writer_usage": NotRequired[dict[str, Any]],  # a model writer's replies and tokens
    "embedder": str,
    "dim": int,
    "sources": list[SourceFile],
    "agents": list[dict[str, Any]],
    "benchmarks": list[str],
    "task_ids": list[str],
    "task_groups": dict[str, str],  # task id -> its exclusion group when the bank was built
    "solved_task_ids": NotRequired[list[str]],  # absent from banks built before 2026-12-02
    "types": dict[str, TypeInfo],
    "counts": dict[str, int],
    "instruction_like": Screened,  # entries whose text reads as an instruction to the agent (amd.memory.screening)
    "delta": dict[str, float],  # the embedder's calibrated δ by type name; {}: a run's own or the types' defaults
    "files": NotRequired[dict[str, str]],  # sha256 of every other file; absent before 2026-12-03 (not verified)
    "pool": NotRequired[dict[str, Any]],  # a bank pooled from several teachers (amd.memory.pool)
})
BankManifest.__doc__ = """A bank's manifest.json as the current schema reads it (`Bank.manifest`, whatever version wrote
it), plus the fields its method added (`BankContents.manifest`, e.g. AMD's audit and representation), which
`Bank.method_field` reads."""


class BankEntry(TypedDict):
    """What every entry of a bank holds, whatever its method (one line of TYPE.jsonl), beside the method's own fields
    (its type's embedded field among them); amd's code reads these, a method reads its own, so `Bank.entries`
    holds them as dicts."""

    id: str
    type: str
    source_task_id: str
    source_group: str  # that task's exclusion group, filled in by the build
    source_teacher: NotRequired[str]  # a pooled bank's: whose trajectory it came from


def version_of(schema: object) -> int | None:
    """The version number of a bank schema name ("amd.memory_bank/N"); None for anything else."""
    family, _, number = str(schema).partition("/")
    return int(number) if family == FAMILY and number.isdigit() else None


def check_version(manifest: object, where: str) -> None:
    """Refuse, in one line, a manifest this amd cannot read: not a bank's, newer than it knows, or too old."""
    schema = manifest.get("schema") if isinstance(manifest, dict) else None
    version = version_of(schema)
    if version is None:
        raise AmdError(f"{where}: not a memory bank's manifest (schema {schema!r}, expected {BANK_SCHEMA!r}); build "
                       "one with `amd memory build`")
    if version > VERSION:
        raise AmdError(f"{where}: bank schema {schema!r} is newer than this amd reads ({BANK_SCHEMA!r}): update amd "
                       "or rebuild the bank with this one")
    if version < OLDEST_MIGRATED:
        raise AmdError(f"{where}: bank schema {schema!r} is too old to read (AMD's fixed types, function vectors in "
                       "function_reasoning.npy, no task groups); rebuild it with `amd memory build`, or delete it "
                       "and rerun snakemake")


def upgrade(manifest: dict[str, Any], entries: dict[str, list[dict[str, Any]]]) -> BankManifest:
    """The manifest of a bank `check_version` accepted, as this version reads it: an older version's migrated step by
    step, the fields added since it was written filled in by what their absence meant (the entries, the same in
    every version so far, are read to fill in what the build measured on them). Changes `manifest` in place."""
    while (version := version_of(manifest["schema"])) != VERSION:
        MIGRATIONS[cast(int, version)](manifest, entries)
    return cast(BankManifest, manifest)  # a current manifest: what the build writes


def _from_2(manifest: dict[str, Any], entries: dict[str, list[dict[str, Any]]]) -> None:
    manifest.setdefault("delta", {})  # none recorded: a run used its own δ or the types' defaults
    manifest.setdefault("instruction_like", instruction_like(entries))  # before the build screened its entries
    manifest["schema"] = f"{FAMILY}/3"


MIGRATIONS = {2: _from_2}  # version -> what takes a manifest of it to the next
