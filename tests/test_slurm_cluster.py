"""A tiny grid through profiles/slurm on a real single-node SLURM cluster (slow; root with slurm-wlm + munge).

The cluster is started on loopback by tests/slurm/cluster.sh; jobs call the stand-in `amd`
(tests/slurm/fake_amd.py) and a stand-in `vllm` (tests/stand_in_vllm.py), so what is tested is the executor path:
submission, resources (a fake h100 GPU for the served student's batch: its server and jobs in one SLURM job),
status polling and the finished outputs.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
CLUSTER = REPO / "tests/slurm/cluster.sh"
WORKFLOW_FILES = ("Snakefile", "rules", "config", "report", "profiles", "environment.yml")


def _why_not() -> str | None:
    if os.geteuid() != 0:
        return "needs root to start slurmctld/slurmd"
    missing = [tool for tool in ("slurmctld", "slurmd", "munged", "sbatch", "squeue") if not shutil.which(tool)
               and not Path(f"/usr/sbin/{tool}").exists()]
    if missing:
        return f"SLURM not installed (missing {', '.join(missing)}; apt-get install slurm-wlm munge)"
    return None


pytestmark = [pytest.mark.slow, pytest.mark.skipif(_why_not() is not None, reason=_why_not() or "")]


@pytest.fixture(scope="module")
def cluster():
    subprocess.run(["sh", str(CLUSTER), "start"], check=True, timeout=120)
    yield
    subprocess.run(["sh", str(CLUSTER), "stop"], check=False, timeout=60)


def _small_copy_of_slurm_profile(where: Path) -> Path:
    """profiles/slurm as shipped, with requests shrunk to this one node and its squeue-only, account-less setup."""
    profile = yaml.safe_load((REPO / "profiles/slurm/config.yaml").read_text())
    for resources in [profile["default-resources"], *profile["set-resources"].values()]:
        resources.update({"mem_mb": 200, "runtime": 5, "cpus_per_task": 1})
    profile |= {"slurm-no-account": True, "slurm-status-command": "squeue",
                "slurm-init-seconds-before-status-checks": 1, "jobs": 4}
    path = where / "profiles/slurm_small"
    path.mkdir(parents=True)
    (path / "config.yaml").write_text(yaml.safe_dump(profile))
    return path


def test_tiny_grid_runs_through_the_slurm_profile(cluster, tmp_path):
    for name in WORKFLOW_FILES:
        source = REPO / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, tmp_path / name)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "amd").write_text(f'#!/bin/sh\nexec "{sys.executable}" "{REPO / "tests/slurm/fake_amd.py"}" "$@"\n')
    (bin_dir / "amd").chmod(0o755)
    (bin_dir / "vllm").write_text(f'#!/bin/sh\nexec "{sys.executable}" "{REPO / "tests/stand_in_vllm.py"}" "$@"\n')
    (bin_dir / "vllm").chmod(0o755)
    small = {"mem_mb": 200, "runtime": 5, "cpus_per_task": 1}  # the batch job's, from the config (serve.resources)
    grid = {"students": {"gpu_student": {"spec": "vllm:fake/model", "serve": {"gpus": 1, "resources": small}}},
            "experiments": {"ablation": {"students": ["qwen05", "gpu_student"],
                                         "memory_configs": ["zero_shot", "wf_st_fn"]}}}
    (tmp_path / "grid.yaml").write_text(yaml.safe_dump(grid))
    calls = tmp_path / "amd_calls.jsonl"
    servers = tmp_path / "vllm.jsonl"
    env = os.environ | {"PATH": f"{bin_dir}:{Path(sys.executable).parent}:{os.environ['PATH']}",
                        "FAKE_AMD_LOG": str(calls), "PYTHONPATH": str(REPO), "STAND_IN_VLLM_LOG": str(servers),
                        "AMD_GPU_LOCK_DIR": str(tmp_path / "gpu-locks")}
    result = subprocess.run(
        [str(Path(sys.executable).parent / "snakemake"), "all", "--configfile", "grid.yaml",
         "--profile", str(_small_copy_of_slurm_profile(tmp_path))],
        check=False, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "slurm" in result.stdout + result.stderr
    assert (tmp_path / "results/tables/table2_ablation.md").exists()
    assert (tmp_path / "results/fig3_steps.pdf").read_bytes().startswith(b"%PDF")
    # the served student's two runs shared one server, in one SLURM job, on the GPU SLURM granted that job
    started = [json.loads(line) for line in servers.read_text().splitlines() if '"start"' in line]
    assert [(server["model"], server["devices"]) for server in started] == [("fake/model", "0")], started
    served = [json.loads(line) for line in calls.read_text().splitlines() if '"served_run"' in line]
    assert len(served) == 2 and len({call["base_url"] for call in served}) == 1, served
    # one cluster job: the server and both runs ran under the same SLURM job id
    assert {call["slurm_job"] for call in served} == {started[0]["slurm_job"]} and started[0]["slurm_job"], served
