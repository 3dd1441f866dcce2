"""Model servers in the workflow: one vLLM server per batch of a served agent's jobs (amd.workflow.servers), each on
GPUs of its own (amd.workflow.devices). The workflow runs with a stand-in `vllm` (tests/stand_in_vllm.py, a scripted
OpenAI-compatible server that logs its life and the devices it was given) and the stand-in `amd` of the pipeline
tests, whose runs ask their server before writing."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from test_pipeline_workflow import SNAKEMAKE, make_workdir, overlay, planned_jobs, snakemake

from amd.analysis import layout
from amd.workflow.config import active_config
from amd.workflow.grid import Grid

REPO = Path(__file__).resolve().parents[1]
STUDENTS = {name: {"spec": f"vllm:org/{name}", "serve": {"gpus": 1}} for name in ("s_a", "s_b", "s_c")}


def served_grid(**serve) -> dict:
    students = {name: entry | {"serve": entry["serve"] | serve} for name, entry in STUDENTS.items()}
    return {"students": students,
            "experiments": {"served": {"benchmarks": ["bfcl"], "students": list(students),
                                       "memory_configs": ["zero_shot"], "seeds": [0, 1],
                                       "outputs": ["table2_ablation"]}}}


def stand_in_vllm(where: Path) -> Path:
    path = where / "bin" / "vllm"
    path.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{REPO / "tests/stand_in_vllm.py"}" "$@"\n')
    path.chmod(0o755)
    return path


def served_env(where: Path, tmp_path: Path, gpus: int, run_seconds: float) -> dict:
    """The environment of a workflow with stand-ins: `vllm` logging its life, `amd` runs taking `run_seconds`."""
    return {"AMD_VLLM_BIN": str(stand_in_vllm(where)), "CUDA_VISIBLE_DEVICES": ",".join(map(str, range(gpus))),
            "AMD_GPU_LOCK_DIR": str(tmp_path / "gpu-locks"), "STAND_IN_VLLM_LOG": str(tmp_path / "vllm.jsonl"),
            "FAKE_AMD_RUN_SECONDS": str(run_seconds), "FAKE_AMD_TIMES": str(tmp_path / "times.jsonl")}


def run_paths(config: dict) -> list[str]:
    grid = Grid(active_config(config, REPO / "config"))
    return sorted(grid.run_path(cell) for cell in grid.cells("served"))


def lives(log: Path) -> dict[int, dict]:
    """Each stand-in server's start and stop, by pid."""
    servers = {}
    for line in log.read_text().splitlines():
        entry = json.loads(line)
        servers.setdefault(entry["pid"], {"model": entry["model"], "devices": entry["devices"]})[entry["event"]] = \
            entry["time"]
    return servers


def test_one_server_per_student_on_its_own_gpu_never_two_on_one(tmp_path):
    where, env = make_workdir(tmp_path)
    env |= served_env(where, tmp_path, gpus=2, run_seconds=1)
    config = served_grid()
    targets = run_paths(config)
    snakemake(where, env, *targets, "--cores", "2", "--resources", "gpu=2", "--configfile",
              overlay(where, "grid.yaml", config))

    servers = lives(tmp_path / "vllm.jsonl")
    assert sorted(server["model"] for server in servers.values()) == ["org/s_a", "org/s_b", "org/s_c"]
    assert all(server["devices"] in ("0", "1") and "stop" in server for server in servers.values())
    for one, other in [(a, b) for a in servers.values() for b in servers.values() if a is not b]:
        if one["start"] < other["stop"] and other["start"] < one["stop"]:  # both alive at once
            assert one["devices"] != other["devices"], (one, other)
    assert any(a["start"] < b["stop"] and b["start"] < a["stop"]
               for a in servers.values() for b in servers.values() if a is not b)  # two GPUs, used at once

    calls = [json.loads(line) for line in (tmp_path / "amd_calls.jsonl").read_text().splitlines()]
    runs = {call["served_run"]: call for call in calls if isinstance(call, dict) and "served_run" in call}
    assert sorted(runs) == targets
    by_student = {}
    for path, call in runs.items():
        by_student.setdefault(layout.describe_run(path)["student"], set()).add(call["base_url"])
    assert all(len(urls) == 1 for urls in by_student.values()), by_student  # both seeds asked the same server
    again = snakemake(where, env, "-n", *targets, "--cores", "2", "--configfile", overlay(where, "grid.yaml", config))
    assert "Nothing to be done" in again.stdout + again.stderr
    # another batching (a server per job) runs the jobs again, in batches of one (their replies cached)
    rebatched = planned_jobs(snakemake(where, env, "-n", *targets, "--cores", "2", "--configfile",
                                       overlay(where, "per_job.yaml", served_grid(max_in_flight=1))))
    assert rebatched["total"] == len(targets) and all(count == 1 for count in rebatched.values() if count != 6)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("cores", [16, 2])
def test_eight_students_on_eight_gpus_run_every_batch_at_once_and_leave_nothing(tmp_path, cores):
    """The paper grid's shape on one node: 8 served students, 4 cells each (one batch each), 8 listed GPUs. Each
    batch's cells all run at once against their server, one server per batch on a device of its own; at --cores 16
    every batch at once; at --cores 2 Snakemake's local executor runs cores + 5 = 7 jobs at once, so the eighth batch
    starts after one ends; rc 0 either way, and no server or job is left."""
    where, env = make_workdir(tmp_path)
    env |= served_env(where, tmp_path, gpus=8, run_seconds=15)
    students = {f"s{i}": {"spec": f"vllm:org/s{i}", "serve": {"gpus": 1}} for i in range(8)}
    config = {"students": students,
              "experiments": {"served": {"benchmarks": ["bfcl"], "students": list(students),
                                         "memory_configs": ["zero_shot"], "seeds": [0, 1, 2, 3],
                                         "outputs": ["table2_ablation"]}}}
    targets = run_paths(config)
    result = snakemake(where, env, *targets, "--cores", str(cores), "--resources", "gpu=8", "--configfile",
                       overlay(where, "grid.yaml", config))
    assert result.returncode == 0 and len(targets) == 32

    servers = lives(tmp_path / "vllm.jsonl")
    assert sorted(server["model"] for server in servers.values()) == [f"org/s{i}" for i in range(8)]
    assert all("stop" in server and not alive(pid) for pid, server in servers.items())
    for one, other in [(a, b) for a in servers.values() for b in servers.values() if a is not b]:
        if one["start"] < other["stop"] and other["start"] < one["stop"]:
            assert one["devices"] != other["devices"], (one, other)
    calls = [json.loads(line) for line in (where / "amd_calls.jsonl").read_text().splitlines()]
    served = [call for call in calls if isinstance(call, dict) and "served_run" in call]
    assert sorted(call["served_run"] for call in served) == targets
    times = [json.loads(line) for line in (tmp_path / "times.jsonl").read_text().splitlines()]
    by_server: dict[str, list[dict]] = {}
    for run in times:
        by_server.setdefault(run["agent"].split("@", 1)[1], []).append(run)
    assert len(by_server) == 8 and all(len(runs) == 4 for runs in by_server.values())
    for runs in by_server.values():  # a batch's four cells were all running at one moment
        assert max(run["start"] for run in runs) < min(run["end"] for run in runs), runs
    batches = [(min(r["start"] for r in runs), max(r["end"] for r in runs)) for runs in by_server.values()]
    at_once = max(sum(start <= moment < end for start, end in batches) for moment, _ in batches)
    assert at_once == 8 if cores == 16 else at_once <= 7, batches


def test_one_interrupt_stops_every_batch_its_servers_and_jobs(tmp_path):
    """Ctrl-C as a terminal sends it (SIGINT to the foreground process group) while three batches serve: Snakemake
    exits, every server has stopped and no job of a batch is left."""
    where, env = make_workdir(tmp_path)
    env |= served_env(where, tmp_path, gpus=3, run_seconds=600)
    config = served_grid()
    targets = run_paths(config)
    workflow = subprocess.Popen([str(SNAKEMAKE), *targets, "--cores", "2", "--configfile",
                                 overlay(where, "grid.yaml", config)], cwd=where, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
    calls = where / "amd_calls.jsonl"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and (not calls.exists() or calls.read_text().count("served_run") < 6):
        time.sleep(0.2)
    assert calls.read_text().count("served_run") == 6  # every job of the three batches is running
    os.killpg(workflow.pid, signal.SIGINT)
    assert workflow.wait(timeout=120) != 0
    servers = lives(tmp_path / "vllm.jsonl")
    assert len(servers) == 3 and all("stop" in server and not alive(pid) for pid, server in servers.items())
    left = subprocess.run(["pgrep", "-f", str(where)], capture_output=True, text=True, check=False).stdout.split()
    assert not left, subprocess.run(["ps", "-o", "pid,cmd", "-p", ",".join(left)], capture_output=True,
                                    text=True, check=False).stdout


def paper_grid() -> Grid:
    return Grid(active_config(yaml.safe_load((REPO / "config/paper.yaml").read_text()), REPO / "config"))


def test_the_paper_grid_shares_tens_of_servers_each_under_its_cap_never_with_a_job_it_waits_for():
    grid = paper_grid()
    plan = grid.servers
    served = [node for node in plan.nodes.values() if node.served]
    assert len(served) == 685 and set(plan.server_of) == {node.path for node in served}
    assert 10 <= len(plan.jobs_of) <= 100, len(plan.jobs_of)
    for server, paths in plan.jobs_of.items():
        agent = server.split("-")[0]
        assert {plan.nodes[path].agent for path in paths} == {agent}
        assert sum(plan.nodes[path].load for path in paths) <= plan.max_in_flight(agent)

    def upstream(path):
        for up in plan.nodes[path].upstream:
            yield up
            yield from upstream(up)

    for path, server in plan.server_of.items():  # a batch runs at once: nothing in it waits for another of it
        assert all(plan.server_of.get(up) != server for up in upstream(path)), path


def verdicts(where: Path, targets: list[str]) -> dict:
    return {(path, record["task_id"]): record["success"] for path in targets
            for record in map(json.loads, (where / path).read_text().splitlines())}


def test_a_jobs_verdicts_do_not_depend_on_which_jobs_shared_its_server(tmp_path):
    """Real `amd run`s of BFCL against the stand-in's scripted replies (right for one task, nothing done for the
    other): two jobs of one student on one shared server, then each on a server of its own."""
    where, env = make_workdir(tmp_path)
    (where / "bin" / "amd").unlink()  # the real amd
    env |= {"AMD_VLLM_BIN": str(stand_in_vllm(where)), "CUDA_VISIBLE_DEVICES": "0,1",
            "AMD_GPU_LOCK_DIR": str(tmp_path / "gpu-locks"), "STAND_IN_VLLM_BFCL_TASKS": "multi_turn_base_104"}
    tasks = {"benchmarks": {"bfcl": {"tasks": ["multi_turn_base_104", "multi_turn_base_105"]}}}
    seen = {}
    for name, serve in (("shared", {}), ("own", {"max_in_flight": 1})):
        config = served_grid(**serve)
        config["students"] = {"s_a": config["students"]["s_a"] | tasks}
        config["experiments"]["served"]["students"] = ["s_a"]
        targets = run_paths(config)
        for path in targets:
            (where / path).unlink(missing_ok=True)
        log = tmp_path / f"vllm-{name}.jsonl"
        snakemake(where, env | {"STAND_IN_VLLM_LOG": str(log), "AMD_CACHE_DIR": str(tmp_path / f"cache-{name}")},
                  *targets, "--cores", "2", "--resources", "gpu=2", "--configfile",
                  overlay(where, f"{name}.yaml", config))
        seen[name] = (len(lives(log)), verdicts(where, targets))
    assert seen["shared"][0] == 1 and seen["own"][0] == 2
    assert seen["shared"][1] == seen["own"][1]
    assert sorted(seen["own"][1].values()) == [False, False, True, True]


def test_a_server_killed_mid_batch_fails_the_workflow_and_a_rerun_gets_every_verdict_from_a_live_model(tmp_path):
    """Real `amd run`s of BFCL against the stand-in's scripted replies: its server is killed once the first task is
    written. The batch stops and Snakemake fails (no table over it); the rerun, with a live server, ends with every
    task's verdict, none of them a model error, the same as a run that never lost its server."""
    where, env = make_workdir(tmp_path)
    (where / "bin" / "amd").unlink()  # the real amd
    tasks = ["multi_turn_base_104", "multi_turn_base_105", "multi_turn_base_106"]
    env |= {"AMD_VLLM_BIN": str(stand_in_vllm(where)), "CUDA_VISIBLE_DEVICES": "0",
            "AMD_GPU_LOCK_DIR": str(tmp_path / "gpu-locks"), "STAND_IN_VLLM_BFCL_TASKS": ",".join(tasks),
            "STAND_IN_VLLM_LOG": str(tmp_path / "vllm.jsonl")}
    config = served_grid()
    config["students"] = {"s_a": config["students"]["s_a"] | {"benchmarks": {"bfcl": {"tasks": tasks}}}}
    config["experiments"]["served"]["students"] = ["s_a"]
    targets, grid_file = run_paths(config), overlay(where, "grid.yaml", config)
    argv = [str(SNAKEMAKE), *targets, "--cores", "2", "--configfile", grid_file]
    killed = subprocess.Popen(argv, cwd=where, env=env | {"STAND_IN_VLLM_LATENCY_S": "0.3"},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and not any(
            (where / path).exists() and (where / path).read_text().count("\n") for path in targets):
        time.sleep(0.05)
    [server] = lives(tmp_path / "vllm.jsonl")
    os.kill(server, signal.SIGKILL)
    output, _ = killed.communicate(timeout=240)
    assert killed.returncode != 0, output[-3000:]
    batch_log = next((where / "results/logs/servers").glob("*.log")).read_text()
    assert "the server for org/s_a exited with code -9 while serving" in batch_log
    assert not any((where / path).exists() for path in targets)  # Snakemake removes the failed batch's outputs

    snakemake(where, env | {"AMD_CACHE_DIR": str(tmp_path / "cache")}, *targets, "--cores", "2",
              "--configfile", grid_file)
    records = [json.loads(line) for path in targets for line in (where / path).read_text().splitlines()]
    assert len(records) == len(tasks) * len(targets) and all(r["status"] != "model_error" for r in records)
    reference = tmp_path / "reference"
    reference.mkdir()
    ref_where, ref_env = make_workdir(reference)
    (ref_where / "bin" / "amd").unlink()
    snakemake(ref_where, ref_env | {key: env[key] for key in ("AMD_VLLM_BIN", "CUDA_VISIBLE_DEVICES",
                                                            "AMD_GPU_LOCK_DIR", "STAND_IN_VLLM_BFCL_TASKS")}
              | {"AMD_CACHE_DIR": str(reference / "cache")}, *targets, "--cores", "2", "--configfile",
              overlay(ref_where, "grid.yaml", config))
    assert verdicts(where, targets) == verdicts(ref_where, targets)
