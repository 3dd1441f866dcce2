"""Model servers in the workflow: one vLLM server per batch of a served agent's jobs (amd.workflow.servers), each on
GPUs of its own (amd.workflow.devices). The workflow runs with a stand-in `vllm` (tests/stand_in_vllm.py, a scripted
OpenAI-compatible server that logs its life and the devices it was given) and the stand-in `amd` of the pipeline
tests, whose runs ask their server before writing."""

import json
import sys
from pathlib import Path

import yaml
from test_pipeline_workflow import make_workdir, overlay, snakemake

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
    env |= {"AMD_VLLM_BIN": str(stand_in_vllm(where)), "CUDA_VISIBLE_DEVICES": "0,1",
            "AMD_GPU_LOCK_DIR": str(tmp_path / "gpu-locks"), "STAND_IN_VLLM_LOG": str(tmp_path / "vllm.jsonl"),
            "FAKE_AMD_RUN_SECONDS": "1", "FAKE_AMD_TIMES": str(tmp_path / "times.jsonl")}
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
    assert not list((where / "results/servers").glob("*.url"))  # service files are gone with their servers
    # finished jobs never rerun for another batching (here: a server per job)
    again = snakemake(where, env, "-n", *targets, "--cores", "2", "--configfile",
                      overlay(where, "per_job.yaml", served_grid(max_in_flight=1)))
    assert "Nothing to be done" in again.stdout + again.stderr


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
