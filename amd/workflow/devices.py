"""GPUs for model servers: which devices this machine (or this SLURM job) offers, and a lock per device so that two
live servers never share one.

The devices are those in CUDA_VISIBLE_DEVICES (as the workflow was started with, or as SLURM grants a job), else
every GPU `nvidia-smi -L` lists. A server takes `count` of them by locking one file per device (filelock: an OS lock,
released when the holder exits, however it exits) in one folder per machine, `$AMD_GPU_LOCK_DIR` or
`$TMPDIR/amd-gpu-locks-UID`, with a subfolder per SLURM job (the scheduler keeps jobs apart; a job's devices may be
numbered from 0 in each job).
"""

import contextlib
import logging
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from filelock import FileLock, Timeout

from amd.core.errors import AmdError

log = logging.getLogger("amd.workflow.devices")
POLL_S = 2.0


def visible_devices() -> list[str]:
    """CUDA_VISIBLE_DEVICES's entries where it is set (empty: no GPU), else the indices `nvidia-smi -L` lists."""
    if "CUDA_VISIBLE_DEVICES" in os.environ:
        return [part.strip() for part in os.environ["CUDA_VISIBLE_DEVICES"].split(",") if part.strip()]
    if not shutil.which("nvidia-smi"):
        return []
    try:
        listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return re.findall(r"^GPU (\d+):", listing.stdout, flags=re.MULTILINE)


def lock_folder() -> Path:
    base = Path(os.environ.get("AMD_GPU_LOCK_DIR") or Path(tempfile.gettempdir()) / f"amd-gpu-locks-{os.getuid()}")
    job = os.environ.get("SLURM_JOB_ID")
    return base / f"slurm-{job}" if job else base


@contextlib.contextmanager
def claimed(count: int, devices: list[str] | None = None, timeout: float | None = None):
    """Hold `count` of the devices (default: visible_devices()) until the block ends; yields their ids. Waits while
    other servers hold them (logging once), up to `timeout` seconds (None: as long as it takes)."""
    devices = visible_devices() if devices is None else devices
    if count > len(devices):
        found = ", ".join(devices) or "none"
        raise AmdError(f"a server needs {count} GPU(s); this machine offers {len(devices)} ({found}: "
                       "CUDA_VISIBLE_DEVICES, else nvidia-smi -L)")
    folder = lock_folder()
    folder.mkdir(parents=True, exist_ok=True)
    locks = {device: FileLock(folder / f"{_safe(device)}.lock") for device in devices}
    deadline = None if timeout is None else time.monotonic() + timeout
    held = _try_claim(locks, count)
    if held is None:
        log.info("waiting for %d free GPU(s) of %s (held by other servers: give snakemake --resources gpu=%d)",
                 count, ", ".join(devices), len(devices))
    while held is None:
        if deadline is not None and time.monotonic() > deadline:
            raise AmdError(f"no {count} free GPU(s) of {', '.join(devices)} within {timeout:.0f} s")
        time.sleep(POLL_S)
        held = _try_claim(locks, count)
    try:
        yield held
    finally:
        for device in held:
            locks[device].release()


def _try_claim(locks: dict[str, FileLock], count: int) -> list[str] | None:
    """Lock `count` free devices at once, or none (so that two servers waiting for two never hold one each)."""
    held = []
    for device, lock in locks.items():
        try:
            lock.acquire(timeout=0)
        except Timeout:
            continue
        held.append(device)
        if len(held) == count:
            return held
    for device in held:
        locks[device].release()
    return None if count else []


def _safe(device: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", device)
