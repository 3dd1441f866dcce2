"""File helpers used across amd: a streamed sha256, writing a file so that readers never see half of it, one
writer per output, and the whole lines of a file another process may be appending to (gzipped or not)."""

import contextlib
import datetime
import errno
import gzip
import hashlib
import json
import logging
import os
import socket
import stat
import tempfile
import zlib
from pathlib import Path

from filelock import FileLock, Timeout

from amd.core.errors import AmdError

CHUNK = 8 << 20
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)  # an OSError that says the disk (or the user's quota) is full
log = logging.getLogger("amd")


def sha256_file(path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def whole_lines(path) -> list[bytes]:
    """The lines of `path` that end in a newline, each with it: a last line cut off mid-write (by a writer still
    appending, or killed) is left out. A `.gz` path is read through gzip; a missing file has no lines."""
    path = Path(path)
    if not path.exists():
        return []
    data = path.read_bytes()
    if path.suffix == ".gz":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as error:
            raise AmdError(f"{path}: not a whole gzip file ({error})") from None
    return data[: data.rfind(b"\n") + 1].splitlines(keepends=True)


def write_gzip(path, data: bytes) -> None:
    """`data` gzipped into `path` (atomic_file), the same bytes for the same data: no time or name in the header."""
    with atomic_file(path, "wb") as handle, gzip.GzipFile(fileobj=handle, mode="wb", filename="", mtime=0) as packed:
        packed.write(data)


@contextlib.contextmanager
def atomic_file(path, mode: str = "w", durable: bool = True):
    """Write `path` through a temporary file in the same folder, renamed into place on success (fsynced first when
    `durable`; a cache that can be rebuilt skips that); on any error the temporary file is removed and `path` is
    left as it was. A symbolic link is written through: its target is replaced, the link kept."""
    path = Path(os.path.realpath(path))
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-", suffix=".tmp")
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else "utf-8") as handle:
            yield handle
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as error:
        error.filename = error.filename or str(path)  # a failed write names no file of its own
        raise
    finally:
        Path(tmp).unlink(missing_ok=True)


@contextlib.contextmanager
def sole_writer(path, command: str):
    """Hold the lock that makes this process the only writer of `path` for the body; a second writer is refused
    at once, naming the holder.

    The lock is an flock (filelock) on the output's lock file (lock_file), so the kernel releases it when its holder
    ends, however it ends: a stale lock of a dead process is simply free. The holder names itself (pid, host,
    command, start time) in the lock file's `.holder` twin, read only to explain a refusal. The lock is that of the
    path links resolve to, so a link to an output is the same output."""
    path = Path(path)
    lock_path = lock_file(Path(os.path.realpath(path)))
    lock = FileLock(lock_path, timeout=0)
    holder = lock_path.with_name(lock_path.name + ".holder")
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        lock.acquire()
    except Timeout:
        raise AmdError(f"{path} is being written by another process ({_describe_holder(holder)}); wait for it to "
                       "end or stop it: two writers of one output would duplicate or mix its contents") from None
    except OSError as error:  # the lock's path is a folder, or not writable
        raise AmdError(f"{path}: cannot take its one-writer lock {error.filename or lock_path}: {error.strerror}; "
                       "remove what is in the way or write elsewhere") from None
    except NotImplementedError:  # a file system without flock (some network mounts)
        log.warning("%s: its file system cannot lock files, so nothing stops a second writer of it: run one command "
                    "per output", path)
        yield
        return
    try:
        _name_holder(holder, command)
        yield
    finally:
        with contextlib.suppress(OSError):
            holder.unlink(missing_ok=True)
        lock.release()


def _name_holder(holder: Path, command: str) -> None:
    """Who holds the lock, for a refused second writer to read; a holder that cannot be named only warns."""
    try:
        with atomic_file(holder, durable=False) as handle:
            json.dump({"pid": os.getpid(), "host": socket.gethostname(), "command": command,
                       "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds")}, handle)
    except OSError as error:
        log.warning("%s: cannot name this process as the lock's holder (%s); a second writer is still refused",
                    holder, error.strerror)


@contextlib.contextmanager
def log_kept():
    """While the body runs, a second name for this process's log when its stderr is a file (a workflow job's log):
    LOG.PID. Snakemake removes a job's log when it starts the job, so a second job started on the same output (a
    second workflow with --nolock) would take this one's lines with it; under the second name they stay. The
    second name is removed at the end unless the log's path no longer holds this log (then it is the evidence)."""
    try:
        held = os.fstat(2)
        path = os.readlink("/proc/self/fd/2")  # Linux; elsewhere nothing is kept
        kept = f"{path}.{os.getpid()}"
        if not stat.S_ISREG(held.st_mode) or not _same_file(path, held):
            raise FileNotFoundError(path)
        os.link(path, kept)
    except OSError:
        yield
        return
    try:
        yield
    finally:
        if _same_file(path, held) or not _same_file(kept, held):
            with contextlib.suppress(OSError):
                os.unlink(kept)


def _same_file(path: str, held: os.stat_result) -> bool:
    try:
        found = os.stat(path)
    except OSError:
        return False
    return (found.st_dev, found.st_ino) == (held.st_dev, held.st_ino)


def lock_file(path: Path) -> Path:
    """Where the lock of output `path` lies: .locks/NAME.lock beside it, out of the way of the results. It stays
    after its holder ends (removing an flock's file while another process may be opening it would let two writers
    lock two files)."""
    return path.parent / ".locks" / f"{path.name}.lock"


def _describe_holder(holder: Path) -> str:
    try:
        who = json.loads(holder.read_text(encoding="utf-8"))
        return f"`{who['command']}`, pid {who['pid']} on {who['host']}, since {who['started']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "it has not named itself yet"
