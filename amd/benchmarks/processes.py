"""Benchmark processes (AppWorld's servers, ToolSandbox's workers): started confined, with a minimal environment,
tied to the run that started them, and pooled.

Model-written code runs inside these processes (AppWorld executes the agent's Python there), so none of them
inherits amd's environment. Each gets an explicit one: PATH, LANG, HOME and TMPDIR in a private folder, the
lifeline below, and only the variables its benchmark names. No API key, no OPENAI_*, no cloud credential reaches it.

It runs under the strongest confinement the machine allows, or the one AMD_CONFINEMENT names (`auto`, the default;
`bwrap`, `namespaces` or `none`, which fail if the machine cannot give them):
- `bwrap` (bubblewrap, Debian's `bubblewrap`): a filesystem view that holds only the system's programs and
  libraries, the benchmark's Python and the paths its benchmark names, all read-only except the benchmark's own
  work folders and a private /tmp; no network but a loopback of its own; its own process, IPC and host-name
  namespaces and a fresh /proc, so no other process of the machine can be seen. Run as root, amd drops the process
  to the unprivileged user `nobody` inside (no capabilities, no new privileges).
- `namespaces` (util-linux `unshare`): network, process, IPC and mount namespaces with a fresh /proc; files are
  NOT confined (the process reads and writes what amd's user can).
- `none`: the minimal environment and the limits only.
A socket amd has bound to 127.0.0.1 can be handed over and keeps serving from inside the network namespace.

A process that runs code a model wrote (AppWorld's servers: `Confinement.model_code`) starts only with its files
confined (`bwrap`). Where bubblewrap cannot run, `auto` refuses it, naming why; the user who accepts that such code
reads what their account can names a weaker mode in AMD_CONFINEMENT, and amd then runs it with a warning.

Resource limits (util-linux `prlimit`) apply in every mode: CPU seconds per process, address space, processes.
The lifeline: the process reads the pipe whose descriptor AMD_LIFELINE_FD names and exits at its end of file;
amd holds the only write end, so the process ends with the run, whatever ends the run (SIGKILL included).
"""

import functools
import logging
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from amd.core.errors import AmdError

MODES = ("bwrap", "namespaces", "none")  # strongest first
MODE_VARIABLE = "AMD_CONFINEMENT"
LIFELINE_VARIABLE = "AMD_LIFELINE_FD"
# Per process: CPU seconds (a pooled server lives through many tasks), bytes of address space, and processes
# (threads count) of the user it runs as.
LIMITS = {"cpu": 3600, "as": 16 * 2**30, "nproc": 1024}
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/passwd",
                "/etc/group", "/etc/nsswitch.conf", "/etc/ssl", "/etc/ca-certificates", "/etc/mime.types")
NETWORK_FILES = ("/etc/resolv.conf", "/etc/hosts", "/etc/host.conf", "/etc/gai.conf")
PRIVATE_TMP, PRIVATE_HOME = "/tmp", "/tmp/home"
STOP_GRACE_S = 10.0
# bwrap --die-with-parent ends the sandbox when the *thread* that started it ends: processes are started from this
# one thread, which lives as long as amd does, never from a task's worker thread.
_SPAWNER = ThreadPoolExecutor(1, thread_name_prefix="amd-spawner")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Confinement:
    """What one benchmark process may see: paths it reads, folders it writes, the variables it needs, and whether
    it may reach the network (only a benchmark whose tools call a live service)."""

    readable: tuple[Path, ...] = ()
    writable: tuple[Path, ...] = ()
    variables: Mapping[str, str] = field(default_factory=dict)
    network: bool = False
    model_code: str = ""  # what runs code a model wrote in it (e.g. "AppWorld"): its files must be confined


def confinement_mode() -> str:
    """The mode processes start under here: AMD_CONFINEMENT's, or the strongest that works (`auto`)."""
    wanted = os.environ.get(MODE_VARIABLE, "auto")
    if wanted not in ("auto", *MODES):
        raise AmdError(f"{MODE_VARIABLE}={wanted!r} is not a confinement mode; modes: auto, {', '.join(MODES)}")
    return _available_mode(wanted)


@functools.cache
def _available_mode(wanted: str) -> str:
    reasons: list[Any] = []
    for mode in MODES if wanted == "auto" else (wanted,):
        why = _unavailable(mode)
        if why is None:
            if reasons:
                log.warning("benchmark processes run with confinement %r (%s): %s", mode, "; ".join(reasons),
                            "see docs/findings/security.md for what that leaves open")
            return mode
        if wanted != "auto":
            raise AmdError(f"{MODE_VARIABLE}={mode} cannot be given here: {why}")
        reasons.append(f"{mode}: {why}")
    raise AssertionError("mode none is always available")


def require_confined_files(runner: str) -> None:
    """Refuse, in one line, to run code a model wrote where its files cannot be confined, unless the user named a
    weaker mode in AMD_CONFINEMENT (then warn). `runner` names what runs the code."""
    mode = confinement_mode()
    if mode == "bwrap":
        return
    if os.environ.get(MODE_VARIABLE, "auto") != "auto":
        _warn_unconfined(runner, mode)
        return
    raise AmdError(f"{runner} runs the code its model writes, and its files cannot be confined here "
                   f"({_unavailable('bwrap')}): that code could read any file you can (keys, tokens) into the "
                   f"trajectory. Install bubblewrap, or run it unconfined knowingly with {MODE_VARIABLE}={mode}")


@functools.cache
def _warn_unconfined(runner: str, mode: str) -> None:
    log.warning("%s runs the code its model writes under confinement %r, as %s names: that code can read and "
                "write what amd's user can", runner, mode, MODE_VARIABLE)


def _unavailable(mode: str) -> str | None:
    """Why `mode` cannot run here (a trial run of `true` under it failed), or None."""
    if mode == "none":
        return None
    tool = "bwrap" if mode == "bwrap" else "unshare"
    if shutil.which(tool) is None:
        return f"{tool} is not installed (Debian: apt-get install {'bubblewrap' if tool == 'bwrap' else 'util-linux'})"
    trial = [*_wrapper(mode, Confinement()), "true"]
    done = subprocess.run(trial, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return f"{tool} cannot make namespaces here: {done.stderr.strip()[-300:]}"
    return None


class ConfinedProcess:
    """One benchmark process, started under `confinement_mode()`; `stop()` ends it (once)."""

    _lifeline: int | None  # the write end of the pipe whose closing tells the process to exit

    def __init__(self, argv: list[str], box: Confinement, *, pass_fds: tuple[int, ...] = (), **popen):
        if box.model_code:
            require_confined_files(box.model_code)
        self.mode = confinement_mode()
        self._host_home = None if self.mode == "bwrap" else Path(tempfile.mkdtemp(prefix="amd-home-"))
        home = Path(PRIVATE_HOME) if self._host_home is None else self._host_home
        if _drops_to_nobody(self.mode):
            for folder in box.writable:
                _give_to(folder, _nobody())
        read_end, self._lifeline = os.pipe()
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(home),
               "TMPDIR": PRIVATE_TMP if self._host_home is None else str(home),
               LIFELINE_VARIABLE: str(read_end), **box.variables}
        command = [*_wrapper(self.mode, box), *_limits(), *argv]
        try:
            self.process = _SPAWNER.submit(lambda: subprocess.Popen(command, env=env, pass_fds=(*pass_fds, read_end),
                                                                    start_new_session=True, **popen)).result()
        except BaseException:
            self._remove_home()
            os.close(self._lifeline)
            raise
        finally:
            os.close(read_end)

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """Close the lifeline (the process exits); kill its whole session if it lingers."""
        if self._lifeline is not None:
            os.close(self._lifeline)
            self._lifeline = None
        try:
            self.process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.process.wait()
        self._remove_home()

    def _remove_home(self) -> None:
        if self._host_home is not None:
            shutil.rmtree(self._host_home, ignore_errors=True)


def _wrapper(mode: str, box: Confinement) -> list[str]:
    """The command line that runs a program under `mode` (it ends with `--`, or is empty for `none`)."""
    if mode == "none":
        return []
    if mode == "namespaces":
        user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
        return ["unshare", *user, *([] if box.network else ["--net"]), "--pid", "--fork", "--kill-child",
                "--mount", "--mount-proc", "--ipc", "--"]
    return [*_bwrap(box), *(_as_nobody() if _drops_to_nobody(mode) else [])]


def _bwrap(box: Confinement) -> list[str]:
    args = ["bwrap", "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", *([] if box.network else ["--unshare-net"])]
    if os.geteuid() != 0:
        args.append("--unshare-user")
    args += ["--dev", "/dev", "--proc", "/proc", "--perms", "1777", "--tmpfs", PRIVATE_TMP,
             "--perms", "0777", "--dir", PRIVATE_HOME]
    for system_path in SYSTEM_PATHS:  # merged-/usr systems link /bin, /lib, ... into /usr
        if os.path.islink(system_path):
            args += ["--symlink", os.readlink(system_path), system_path]
        elif os.path.isdir(system_path):
            args += ["--ro-bind", system_path, system_path]
    readable = [Path(p) for p in (*SYSTEM_FILES, *(NETWORK_FILES if box.network else ())) if os.path.exists(p)]
    readable += [Path(p).absolute() for p in box.readable]
    writable = [Path(p).absolute() for p in box.writable]
    for folder in _folders_to_make([*readable, *writable]):
        args += ["--perms", "0755", "--dir", str(folder)]
    for path in sorted(readable, key=lambda p: len(p.parts)):
        args += ["--ro-bind", str(path), str(path)]
    for path in sorted(writable, key=lambda p: len(p.parts)):  # after the read-only views they may lie inside
        args += ["--bind", str(path), str(path)]
    return [*args, "--"]


def _folders_to_make(mounts: list[Path]) -> list[Path]:
    """The folders above the mount points that no other mount provides (those under the private /tmp included):
    bwrap would make them mode 0700, where an unprivileged user could not reach what lies below."""
    provided = [*(Path(p) for p in SYSTEM_PATHS), *mounts]
    above = {parent for path in mounts for parent in path.parents} - {Path("/"), Path(PRIVATE_TMP)}
    return sorted((folder for folder in above
                   if not any(folder == p or p in folder.parents for p in provided)), key=lambda f: len(f.parts))


def _drops_to_nobody(mode: str) -> bool:
    return mode == "bwrap" and os.geteuid() == 0


@functools.cache
def _nobody() -> int:
    try:
        return pwd.getpwnam("nobody").pw_uid
    except KeyError:
        return 65534


def _as_nobody() -> list[str]:
    uid = _nobody()
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all",
            "--bounding-set=-all", "--"]


def _give_to(folder: Path, uid: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for path in (folder, *folder.rglob("*")):
        os.lchown(path, uid, uid)


def _limits() -> list[str]:
    if shutil.which("prlimit") is None:
        log.warning("prlimit (util-linux) is not installed: benchmark processes run without resource limits")
        return []
    return ["prlimit", *(f"--{name}={value}" for name, value in LIMITS.items()), "--"]


class Stoppable(Protocol):
    """What a pool holds: a process that says whether it is alive and can be stopped."""

    @property
    def alive(self) -> bool: ...

    def stop(self) -> None: ...


Process = TypeVar("Process", bound=Stoppable)


class ProcessPool(Generic[Process]):
    """Benchmark processes for the tasks in flight: `take` reuses an idle one or starts one, `give_back` keeps a
    live one for the next task (a dead one is stopped and forgotten), `close` stops them all. A process serves one
    task at a time. Processes have `alive` and `stop()`."""

    def __init__(self, start: Callable[[], Process]):
        self._start = start
        self._lock = threading.Lock()
        self._idle: list[Process] = []
        self._all: list[Process] = []

    def take(self) -> Process:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        process = self._start()
        with self._lock:
            self._all.append(process)
        return process

    def give_back(self, process: Process) -> None:
        with self._lock:
            if process.alive:
                self._idle.append(process)
                return
            self._all.remove(process)
        process.stop()

    def close(self) -> None:
        with self._lock:
            processes, self._all, self._idle = self._all, [], []
        for process in processes:
            process.stop()
