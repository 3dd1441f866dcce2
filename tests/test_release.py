"""A config's release folder (`release`, amd release sync|check): the workflow seeds every run from its released copy
and reuses the released bank, so a fresh checkout with the release and nothing else asks no model for a finished
task, an online run included; `amd release check` verifies the checksums and rebuilds the scores, tables and figure
from the released run files alone. End to end with the real `amd` under Snakemake and a scripted student on BFCL
(the online memory test's: one refused call, then the ground truth; FAILING fails)."""

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from scripted_server import ScriptedServer
from test_memory_online import TASKS, student
from test_pipeline_workflow import REPO, SNAKEMAKE, WORKFLOW_FILES, planned_jobs

from amd.core.errors import AmdError
from amd.core.files import whole_lines, write_gzip
from amd.workflow import release

TEACHER_TASKS = ["multi_turn_base_0", "multi_turn_base_1", "multi_turn_base_2"]
RESULTS = "results/relpilot"
RELEASE = "release/relpilot"
ONLINE = "bfcl/student-scripted/oracle_r-rules-hashed-amd/wf_st_fn_online/self_excluded/k_wf20_st20_fn20/seed0"
ZERO_SHOT = "bfcl/student-scripted/zero_shot/seed0"
BANK = "bfcl/bank/amd/oracle_r-rules-hashed-amd"


def config(url: str) -> dict:
    return {"name": "relpilot", "release": RELEASE,
            "benchmarks": {"bfcl": {"teacher_tasks": TEACHER_TASKS, "student_tasks": TASKS}},
            "teachers": {"oracle_r": {"spec": "oracle", "concurrency": 2}},
            "students": {"scripted": {"spec": f"vllm:student@{url}"}},
            "embedders": {"hashed": {"spec": "hash:256", "delta": {"wf": -1, "st": -1}}},
            "defaults": {"teacher": "oracle_r", "embedder": "hashed", "k": {"wf": 20, "st": 20, "fn": 20}},
            "experiments": {"ablation": {"benchmarks": ["bfcl"], "students": ["scripted"],
                                         "memory_configs": ["zero_shot", "wf_st_fn", "wf_st_fn_online"],
                                         "outputs": ["table2_ablation", "fig3_steps"]}},
            "note": "a release test"}


def checkout(where: Path, url: str) -> tuple[Path, dict]:
    """A copy of the workflow as a fresh clone has it (no results/, no cache), the real `amd` on PATH."""
    where.mkdir()
    for name in WORKFLOW_FILES:
        source = REPO / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, where / name)
    (where / "relpilot.yaml").write_text(yaml.safe_dump(config(url)))
    bin_dir = where / "bin"
    bin_dir.mkdir()
    (bin_dir / "amd").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m amd.cli "$@"\n')
    (bin_dir / "amd").chmod(0o755)
    env = os.environ | {"PATH": f"{bin_dir}:{Path(sys.executable).parent}:{os.environ['PATH']}",
                        "PYTHONPATH": str(REPO), "AMD_CACHE_DIR": str(where / "cache")}
    return where, env


def run(where, env, *argv, check=True):
    done = subprocess.run(argv, cwd=where, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert not check or done.returncode == 0, f"{argv} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def workflow(where, env, *argv):
    return run(where, env, str(SNAKEMAKE), "all", "--cores", "1", "--configfile", "relpilot.yaml", *argv)


def amd(where, env, *argv, check=True):
    return run(where, env, sys.executable, "-m", "amd.cli", *argv, check=check)


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in whole_lines(path)]


def outcome(path: Path) -> list[tuple]:
    """What a run did, task by task (wall times aside): verdicts, steps and what memory it was given."""
    return [(r["task_id"], r["success"], r["n_steps"], r["system_memory"], r["turns"]) for r in records(path)]


@pytest.fixture(scope="module")
def answers():
    from test_memory_online import answers as online_answers

    return online_answers.__wrapped__()


@pytest.fixture(scope="module")
def pilot(answers, tmp_path_factory):
    """A finished pilot (A), synced into its release; the scripted server stays up for the module."""
    tmp = tmp_path_factory.mktemp("release")
    with ScriptedServer(student(answers)) as server:
        where, env = checkout(tmp / "a", server.url)
        workflow(where, env)
        synced = amd(where, env, "release", "sync", "--configfile", "relpilot.yaml")
        yield {"tmp": tmp, "where": where, "env": env, "server": server, "synced": synced.stdout}


def test_the_workflow_passes_the_release_as_params_so_a_growing_release_reruns_nothing(pilot):
    where, env = pilot["where"], pilot["env"]
    planned = run(where, env, str(SNAKEMAKE), "-n", "-p", "--forceall", "all", "--cores", "1", "--configfile",
                  "relpilot.yaml").stdout
    for run_dir in (ZERO_SHOT, ONLINE, "bfcl/teacher-oracle_r"):
        assert f"--resume-from {RELEASE}/{run_dir}/trajectories.jsonl.gz" in planned
    assert f"--reuse {RELEASE}/{BANK}" in planned
    released = where / RELEASE / ZERO_SHOT / "trajectories.jsonl.gz"
    before = released.read_bytes()
    write_gzip(released, gzip.decompress(before) + b"\n")  # the release grows (here: a blank line)
    try:
        assert planned_jobs(workflow(where, env, "-n")) == {}
    finally:
        released.write_bytes(before)


def test_sync_copies_whole_records_and_the_manifest_names_what_anyone_needs_to_check_it(pilot):
    folder = pilot["where"] / RELEASE
    manifest = json.loads((folder / "MANIFEST.json").read_text())
    assert manifest["format"] == release.FORMAT and manifest["name"] == "relpilot"
    assert manifest["runs"][f"{ONLINE}/trajectories.jsonl"] == {"records": 4, "tasks": 4}
    assert manifest["models"]["scripted"]["spec"].startswith("vllm:student@")
    assert manifest["machine"]["cores"] == os.cpu_count() and manifest["config"][-1]["path"] == "relpilot.yaml"
    assert {"tables/table2_ablation.md", "fig3_steps.pdf", f"{BANK}/manifest.json",
            f"{ONLINE}/trajectories.jsonl.online.jsonl.gz", f"{ONLINE}/score.json"} <= set(manifest["files"])
    assert not any("cache" in name or name.endswith(".log") for name in manifest["files"])
    results = pilot["where"] / RESULTS / ONLINE / "trajectories.jsonl"
    assert gzip.decompress((folder / ONLINE / "trajectories.jsonl.gz").read_bytes()) == results.read_bytes()


def test_a_sync_during_a_run_leaves_the_line_being_written_and_never_drops_a_released_record(pilot, tmp_path):
    where, env = pilot["where"], pilot["env"]
    copy = tmp_path / "copy"
    shutil.copytree(where, copy, ignore=shutil.ignore_patterns("cache", ".snakemake"))
    run_file = copy / RESULTS / ZERO_SHOT / "trajectories.jsonl"
    lines = run_file.read_bytes().splitlines(keepends=True)
    shutil.rmtree(copy / RELEASE)
    run_file.write_bytes(b"".join(lines[:2]) + lines[2][:40])  # a job writing its third record
    amd(copy, env, "release", "sync", "--configfile", "relpilot.yaml")
    released = copy / RELEASE / ZERO_SHOT / "trajectories.jsonl.gz"
    assert gzip.decompress(released.read_bytes()) == b"".join(lines[:2])
    run_file.write_bytes(lines[0])  # results/ holds less than the release (a fresh machine before its run)
    amd(copy, env, "release", "sync", "--configfile", "relpilot.yaml")
    assert gzip.decompress(released.read_bytes()) == b"".join(lines[:2])
    run_file.write_bytes(lines[0] + lines[1].replace(b'"n_steps": ', b'"n_steps": 1').replace(b"\n", b"") + b"\n")
    refused = amd(copy, env, "release", "sync", "--configfile", "relpilot.yaml", check=False)
    assert refused.returncode == 2 and "hold different records of 1 tasks" in refused.stderr
    # an online run killed between its two writes: the history's event of a task whose record is not written stays
    # out of the release, so the task's event where the run resumes can differ
    online = copy / RESULTS / ONLINE / "trajectories.jsonl"
    history = online.with_name("trajectories.jsonl.online.jsonl")
    events = history.read_bytes().splitlines(keepends=True)
    run_file.write_bytes(b"".join(lines))
    online.write_bytes(b"".join(online.read_bytes().splitlines(keepends=True)[:2]))
    shutil.rmtree(copy / RELEASE)
    amd(copy, env, "release", "sync", "--configfile", "relpilot.yaml")
    released_history = copy / RELEASE / ONLINE / "trajectories.jsonl.online.jsonl.gz"
    assert gzip.decompress(released_history.read_bytes()) == b"".join(events[:3])
    history.write_bytes(b"".join(events[:3]) + events[3].replace(b'"success": ', b'"success": 1'))
    amd(copy, env, "release", "sync", "--configfile", "relpilot.yaml")


def test_a_fresh_checkout_checks_the_release_with_no_model_and_finds_any_change(pilot, tmp_path):
    where, env = checkout(tmp_path / "fresh", pilot["server"].url)
    shutil.copytree(pilot["where"] / RELEASE, where / RELEASE)
    asked = len(pilot["server"].requests)
    checked = amd(where, env, "release", "check", RELEASE, "--recheck")
    assert "every checksum, score, table and figure matches" in checked.stdout
    assert "table2_ablation: rebuilt from" in checked.stdout and "fig3_steps: rebuilt from" in checked.stdout
    assert len(pilot["server"].requests) == asked and not (where / "results").exists()
    table = where / RELEASE / "tables/table2_ablation.csv"
    table.write_text(table.read_text().replace("wf_st_fn", "wf_st"))
    manifest = json.loads((where / RELEASE / "MANIFEST.json").read_text())
    changed = amd(where, env, "release", "check", RELEASE, check=False)
    assert changed.returncode == 1 and "table2_ablation.csv: sha256" in changed.stderr
    manifest["files"]["tables/table2_ablation.csv"]["sha256"] = release.sha256_file(table)
    (where / RELEASE / "MANIFEST.json").write_text(json.dumps(manifest))
    rebuilt = amd(where, env, "release", "check", RELEASE, check=False)
    assert rebuilt.returncode == 1 and "table2_ablation.csv: differs from the one rebuilt from its runs" in rebuilt.stderr


def test_a_fresh_checkout_resumes_from_a_partial_release_asking_only_the_unfinished_tasks(pilot, tmp_path):
    """The release stopped after two of the online run's four tasks: a fresh checkout runs the other two, over the
    online state the first two left (the last task retrieves what the first one added), and ends where A ended."""
    a, env = pilot["where"], pilot["env"]
    partial = tmp_path / "partial"
    shutil.copytree(a, partial, ignore=shutil.ignore_patterns("cache", ".snakemake", "release"))
    online = partial / RESULTS / ONLINE / "trajectories.jsonl"
    history = online.with_name("trajectories.jsonl.online.jsonl")
    online.write_bytes(b"".join(whole_lines(online)[:2]))
    history.write_bytes(b"".join(whole_lines(history)[:3]))
    for made in [*(partial / RESULTS).glob("tables/table2_ablation.*"), partial / RESULTS / "fig3_steps.pdf",
                 online.with_name("score.json")]:
        made.unlink()
    amd(partial, env, "release", "sync", "--configfile", "relpilot.yaml")

    fresh, fresh_env = checkout(tmp_path / "fresh", pilot["server"].url)
    shutil.copytree(partial / RELEASE, fresh / RELEASE)
    workflow(fresh, fresh_env)
    logs = fresh / "results/logs/relpilot"
    for run_dir, done in ((ZERO_SHOT, "0 tasks run, 4 already done"), ("bfcl/teacher-oracle_r", "0 tasks run, 3"),
                          (ONLINE, "2 tasks run, 2 already done")):
        assert done in (logs / run_dir / "trajectories.log").read_text(), run_dir
    for run_dir in (ZERO_SHOT, ONLINE, "bfcl/teacher-oracle_r"):
        assert outcome(fresh / RESULTS / run_dir / "trajectories.jsonl") == outcome(
            a / RESULTS / run_dir / "trajectories.jsonl"), run_dir
    assert (fresh / RESULTS / BANK / "manifest.json").read_bytes() == (a / RESULTS / BANK / "manifest.json").read_bytes()
    assert "the released copy of this build" in (fresh / "results/logs/relpilot" / BANK / "build.log").read_text()
    assert (fresh / RESULTS / "tables/table2_ablation.csv").read_text() == (
        a / RESULTS / "tables/table2_ablation.csv").read_text()
    amd(fresh, fresh_env, "release", "sync", "--configfile", "relpilot.yaml")
    assert "every checksum, score, table and figure matches" in amd(fresh, fresh_env, "release", "check",
                                                                    RELEASE).stdout


def test_a_bad_release_is_one_clear_line(tmp_path):
    with pytest.raises(AmdError, match="not a release"):
        release.check(tmp_path)
    (tmp_path / "MANIFEST.json").write_text('{"format": "amd.release/0"}')
    with pytest.raises(AmdError, match="expected 'amd.release/1'"):
        release.check(tmp_path)


def test_a_bank_build_puts_the_released_copy_in_place_only_where_it_is_the_same_build(tmp_path):
    import faiss
    import numpy as np

    from amd.memory.bank import copy_bank, flat_index, load_bank
    from amd.memory.build import reuse_bank

    env = os.environ | {"AMD_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(REPO)}
    amd(tmp_path, env, "run", "bfcl", "--agent", "oracle", "--tasks", ",".join(TEACHER_TASKS), "--out", "o.jsonl",
        "--no-progress")
    for name, embedder in (("built", "hash:64"), ("other", "hash:32")):
        amd(tmp_path, env, "memory", "build", "--trajectories", "o.jsonl", "--writer", "rules", "--embedder",
            embedder, "--out", name)
    built = load_bank(tmp_path / "built")

    def released_with(shift: float) -> Path:
        """The built bank as another machine's embedder would have made it: its vectors moved by `shift`."""
        folder = tmp_path / f"released{shift}"
        copy_bank(built, folder)
        manifest = json.loads((folder / "manifest.json").read_text())
        for type_name in built.entries:
            vectors = built.vectors(type_name) + np.float32(shift)
            faiss.write_index(flat_index(vectors, manifest["dim"]), str(folder / f"{type_name}.faiss"))
            manifest["files"][f"{type_name}.faiss"] = release.sha256_file(folder / f"{type_name}.faiss")
        (folder / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        return folder

    close, far = released_with(1e-6), released_with(0.1)
    assert not reuse_bank(tmp_path / "built", tmp_path / "other")  # another embedder: another build
    assert not reuse_bank(tmp_path / "built", far)
    assert load_bank(tmp_path / "built").manifest_sha256 == built.manifest_sha256
    assert reuse_bank(tmp_path / "built", close)
    assert load_bank(tmp_path / "built").manifest_sha256 == load_bank(close).manifest_sha256 != built.manifest_sha256
    assert not reuse_bank(tmp_path / "built", tmp_path / "nothing")


def test_a_damaged_gzip_copy_is_one_clear_line(tmp_path):
    cut = tmp_path / "trajectories.jsonl.gz"
    cut.write_bytes(gzip.compress(b'{"task_id": "t"}\n' * 50)[:30])
    with pytest.raises(AmdError, match="not a whole gzip file"):
        whole_lines(cut)
