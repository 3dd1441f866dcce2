"""`amd memory build`: run files in, a bank out. The method distils entries from the records; this module reads
and checks the records, embeds each type's embedded field, writes the manifest and the bank."""

import json
import logging
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import amd
from amd.benchmarks.base import create_benchmark
from amd.core.errors import AmdError
from amd.core.files import sha256_file
from amd.core.schema import read_run
from amd.core.spec import parse_options
from amd.core.trajectory import TrajectoryRecord
from amd.core.vocabulary import method_spec
from amd.memory.bank import BankContents, check_bank_out, copy_bank, load_bank, write_bank
from amd.memory.bank_schema import BANK_SCHEMA, BankManifest, SourceFile
from amd.memory.embed import get_embedder
from amd.memory.method import BuildContext, method_class
from amd.memory.screening import instruction_like
from amd.memory.writing import open_writer

ENTRY_FIELDS = ("id", "type", "source_task_id")
VECTOR_TOLERANCE = 1e-4  # how far one embedder's vectors of the same texts may differ across machines (float rounding)
SHOWN_IDS = 5  # entry ids a warning names
log = logging.getLogger("amd.memory")


def build_bank(trajectory_paths: list, method: str, writer: str, embedder_spec: str, out_dir,
               writer_params: dict | None = None, options: dict | None = None, concurrency: int = 4,
               benchmark_options: dict | None = None, delta: dict | None = None) -> dict:
    """Distill the records of `trajectory_paths` with memory method `method` into a bank at `out_dir`; returns the
    manifest. `benchmark_options` are the benchmark's own, as for `amd run` (e.g. where its data is). `delta` (by
    type code or name): the embedder's calibrated δ, over the one amd knows for it; the manifest records it for
    the method's types, and a run uses it unless given its own (amd.memory.method.open_memory)."""
    if concurrency < 1:
        raise AmdError(f"writer concurrency must be at least 1, got {concurrency}")
    check_bank_out(out_dir)
    spec = method_spec(method)
    parsed = parse_options(method, "build", dict(options or {}), spec.build_options)
    implementation = method_class(spec.implementation)()
    embedder = get_embedder(embedder_spec)
    sources, records = _read_sources(trajectory_paths)
    if not records:
        raise AmdError(f"no trajectories in {', '.join(map(str, trajectory_paths))}: a bank is distilled from a "
                       "teacher's run; run the teacher first")
    groups = {record["task_id"]: record["task_group"] for record in records}  # an older file's: read_run fills it in
    benchmarks, opening = {}, threading.Lock()

    def benchmark(name: str):  # called from the writer's threads: each benchmark opened once
        with opening:
            if name not in benchmarks:
                benchmarks[name] = create_benchmark(name, **(benchmark_options or {}))
            return benchmarks[name]

    writer_obj = open_writer(writer, writer_params)
    try:
        contents = implementation.build(records, BuildContext(writer_obj, benchmark, parsed, concurrency))
    finally:
        writer_obj.close()
        for opened in benchmarks.values():
            opened.close()
    _check_entries(contents, method, groups)
    screened = instruction_like(contents.entries)
    if screened["count"]:
        log.warning("%d of %d entries read as instructions to the agent (prompt injection in the teacher's "
                    "trajectories? marks: %s), e.g. %s; they are kept, and a run shows memory as data: check them "
                    "with `amd memory show`", screened["count"], screened["of"],
                    ", ".join(f"{mark} {n}" for mark, n in screened["by_mark"].items()),
                    ", ".join(screened["entries"][:SHOWN_IDS]))
    vectors = {t: embedder.embed([entry[contents.embedded[t]] for entry in entries], progress=True)
               for t, entries in contents.entries.items()}
    usage = writer_obj.usage()
    manifest: BankManifest = {
        "schema": BANK_SCHEMA, "amd_version": amd.__version__,
        "method": {"name": method, "version": implementation.version},
        "writer": writer_obj.describe(),
        "embedder": embedder.spec, "dim": embedder.dim,
        "sources": sources, "agents": _unique([record["agent"] for record in records]),
        "benchmarks": sorted({record["benchmark"] for record in records}),
        "task_ids": sorted(groups), "task_groups": dict(sorted(groups.items())),
        "solved_task_ids": sorted({record["task_id"] for record in records if record["success"] is True}),
        "types": {t: {"embedded": contents.embedded[t]} for t in contents.entries},
        "counts": {t: len(entries) for t, entries in contents.entries.items()},
        "instruction_like": screened,
        "delta": bank_delta(spec.types, embedder.calibrated_delta, delta or {}),
    }
    if usage:
        manifest["writer_usage"] = usage
    written = {**manifest, **contents.manifest}
    write_bank(Path(out_dir), written, contents, vectors)
    return written


def bank_delta(types, calibrated: Mapping[str, float], given: Mapping[str, float]) -> dict[str, float]:
    """{type name: δ} for the method's `types` that the embedder's calibration or `given` (by code or name, over it)
    sets; {} where neither sets any."""
    known = {key for memory_type in types for key in (memory_type.code, memory_type.name)}
    if unknown := sorted(set(given) - known):
        raise AmdError(f"--delta for {', '.join(unknown)}: the method has no such memory type ({', '.join(sorted(known))})")
    chosen = {}
    for memory_type in types:
        for values in (calibrated, given):
            for key in (memory_type.code, memory_type.name):
                if key in values:
                    chosen[memory_type.name] = float(values[key])
    return chosen


def _read_sources(paths) -> tuple[list[SourceFile], list[TrajectoryRecord]]:
    sources: list[SourceFile] = []
    records: list[TrajectoryRecord] = []
    for path in paths:
        file_records = read_run(path)
        sources.append({"path": str(path), "sha256": sha256_file(path), "records": len(file_records),
                        "successful": sum(r["success"] is True for r in file_records)})
        records.extend(file_records)
    return sources, records


def _check_entries(contents: BankContents, method: str, groups: dict) -> None:
    """Every entry names its id, type and source task; its source group is filled in here."""
    for type_name, entries in contents.entries.items():
        if type_name not in contents.embedded:
            raise AmdError(f"memory method {method}: type {type_name!r} names no embedded field")
        for entry in entries:
            missing = [name for name in (*ENTRY_FIELDS, contents.embedded[type_name]) if name not in entry]
            if missing:
                raise AmdError(f"memory method {method}: entry {entry.get('id')!r} lacks {', '.join(missing)}")
            entry["source_group"] = groups[entry["source_task_id"]]


def _unique(items: Sequence[Mapping[str, Any]]) -> list[dict]:
    return [json.loads(text) for text in dict.fromkeys(json.dumps(i, sort_keys=True) for i in items)]


def reuse_bank(out_dir, released) -> bool:
    """Put the bank at `released` (a release's copy of this build) at `out_dir` in place of the one just built there,
    where the two are one build: the same manifest but for the vector files' checksums (the same sources, method,
    writer, embedder and entries) and vectors equal to float rounding (the embedder on another machine). A run's
    records name its bank's manifest sha256, so a run seeded from a release resumes only over the release's bank."""
    if not Path(released, "manifest.json").exists():
        log.info("%s: no bank released there; %s is the one just built", released, out_dir)
        return False
    built, other = load_bank(out_dir), load_bank(released)
    same = (_without_vectors(built.manifest) == _without_vectors(other.manifest)
            and all(np.allclose(built.vectors(t), other.vectors(t), atol=VECTOR_TOLERANCE) for t in built.entries))
    if not same:
        log.warning("%s: not the build just made (other sources, settings, entries or vectors): %s is kept as built, "
                    "so runs seeded from a release over that bank run again", released, out_dir)
        return False
    copy_bank(other, out_dir)
    log.info("%s: the released bank of this build, put in place of the one just built (manifest sha256 %s)",
             out_dir, other.manifest_sha256[:12])
    return True


def _without_vectors(manifest: Mapping[str, Any]) -> dict:
    files = {name: sha for name, sha in manifest.get("files", {}).items() if not name.endswith(".faiss")}
    return {**manifest, "files": files}
