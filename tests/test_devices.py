"""GPUs for model servers (amd.workflow.devices): which devices a server may take, and a lock per device so that two live
servers never share one."""

import subprocess
import sys
import textwrap

import pytest

from amd.core.errors import AmdError
from amd.workflow import devices


@pytest.fixture(autouse=True)
def lock_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("AMD_GPU_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    return tmp_path / "locks"


def test_devices_come_from_cuda_visible_devices_else_from_nvidia_smi(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2, 5")
    assert devices.visible_devices() == ["2", "5"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert devices.visible_devices() == []  # set but empty: no GPU for this workflow
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-a)'\n"
                   "echo 'GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-b)'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    assert devices.visible_devices() == ["0", "1"]
    monkeypatch.setenv("PATH", "/nonexistent")
    assert devices.visible_devices() == []


def test_live_claims_never_share_a_device_and_a_released_one_is_taken_again():
    with devices.claimed(1, ["0", "1"]) as first, devices.claimed(1, ["0", "1"]) as second:
        assert sorted(first + second) == ["0", "1"]
        with pytest.raises(AmdError, match="no 1 free GPU"), devices.claimed(1, ["0", "1"], timeout=0.1):
            pass
    with devices.claimed(2, ["0", "1"]) as both:
        assert both == ["0", "1"]


def test_a_two_gpu_claim_takes_none_while_only_one_is_free():
    with devices.claimed(1, ["0", "1"]) as held:
        with pytest.raises(AmdError, match="no 2 free GPU"), devices.claimed(2, ["0", "1"], timeout=0.1):
            pass
        free = [device for device in ("0", "1") if device not in held]
        with devices.claimed(1, ["0", "1"], timeout=0.1) as other:  # the free one was not left locked
            assert other == free


def test_a_killed_holder_frees_its_device(lock_dir):
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import sys, time
        from amd.workflow import devices
        with devices.claimed(1, ["0"]):
            print("held", flush=True)
            time.sleep(60)
    """)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(AmdError), devices.claimed(1, ["0"], timeout=0.1):
        pass
    holder.kill()
    holder.wait()
    with devices.claimed(1, ["0"], timeout=5) as held:
        assert held == ["0"]


def test_more_gpus_than_offered_is_a_clear_error_and_slurm_jobs_lock_apart(lock_dir, monkeypatch):
    with pytest.raises(AmdError, match=r"needs 2 GPU\(s\); this machine offers 1 \(0: CUDA_VISIBLE_DEVICES"), devices.claimed(2, ["0"]):
        pass
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    assert devices.lock_folder() == lock_dir / "slurm-4242"  # a job's devices may be numbered from 0 in each job
