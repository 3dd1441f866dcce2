"""Benchmark processes are confined (amd.benchmarks.processes): a hostile program started the way AppWorld's servers
and ToolSandbox's workers are started (tests/confinement_probe.py) tries to reach what a model step must not.

Each mode is checked against what the security model (docs/findings/security.md) says it confines; a mode the machine cannot give
is skipped with the reason (CI installs bubblewrap, so there all three run).
"""

import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil
import pytest

from amd.benchmarks import processes
from amd.benchmarks.processes import LIMITS, MODES, ConfinedProcess, Confinement
from amd.core.errors import AmdError

REPO = Path(__file__).resolve().parents[1]
PROBE = Path(__file__).with_name("confinement_probe.py")
CANARY = "sk-canary-7f3a9c1e5b2d4086"
MINIMAL = {"PATH", "LANG", "HOME", "TMPDIR", "PWD", processes.LIFELINE_VARIABLE}  # bwrap sets PWD
# What each mode confines, as the security model (docs/findings/security.md) states it.
CONFINES = {
    "bwrap": {"files": True, "network": True, "processes": True},
    "namespaces": {"files": False, "network": True, "processes": True},
    "none": {"files": False, "network": False, "processes": False},
}


@pytest.fixture
def mode(request, monkeypatch):
    why = processes._unavailable(request.param)
    if why is not None:
        pytest.skip(f"confinement {request.param} cannot run here: {why}")
    monkeypatch.setenv(processes.MODE_VARIABLE, request.param)
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", CANARY)
    return request.param


@pytest.fixture
def listener():
    """A socket of this machine that accepts connections on every address: what a step must not reach."""
    server = socket.create_server(("0.0.0.0", 0))
    yield server.getsockname()[1]
    server.close()


def other_addresses() -> list[str]:
    return [a.address for addrs in psutil.net_if_addrs().values() for a in addrs
            if a.family == socket.AF_INET and not a.address.startswith("127.")]


def probe_request(folder: Path, port: int) -> dict:
    """A secret file and a work folder in `folder`, and what the probe is to try with them."""
    (folder / "secret.txt").write_text(CANARY)
    (folder / "work").mkdir()
    return {"secret": str(folder / "secret.txt"), "outside": str(folder / "outside.txt"),
            "inside": str(folder / "work" / "inside.txt"), "amd_pid": os.getpid(), "allocate": LIMITS["as"],
            "threads": LIMITS["nproc"] + 8, "connect": [[ip, port] for ip in ["127.0.0.1", *other_addresses()]]}


def probe(tmp_path: Path, port: int, network: bool = False) -> dict:
    """Run the probe confined as a benchmark process is, with one work folder; its report."""
    request = probe_request(tmp_path, port)
    box = Confinement(readable=(Path(sys.prefix), Path(sys.base_prefix), PROBE), writable=(tmp_path / "work",),
                      network=network)
    confined = ConfinedProcess([sys.executable, "-I", str(PROBE), json.dumps(request)], box, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        out, err = confined.process.communicate(timeout=120)
    finally:
        confined.stop()
    assert confined.process.returncode == 0, err[-3000:]
    return json.loads(out)


def bounds_processes(mode: str) -> bool:
    """The kernel holds every user but root to the process limit; under bwrap, root is dropped to nobody."""
    return mode == "bwrap" or os.geteuid() != 0


@pytest.mark.parametrize("mode", MODES, indirect=True)
def test_a_confined_step_gets_no_secret_and_reaches_only_what_its_mode_allows(mode, tmp_path, listener):
    report = probe(tmp_path, listener)
    confines = CONFINES[mode]
    assert set(report["env"]) <= MINIMAL and set(report["spawned"]["env"]) <= MINIMAL  # every mode
    assert CANARY not in json.dumps([report["env"], report["spawned"]])
    assert report["allocate"].startswith("refused: MemoryError")
    limits = {line[:26].strip(): line[26:].split()[0] for line in report["limits"].splitlines()[1:]}
    assert limits["Max cpu time"] == str(LIMITS["cpu"]) and limits["Max processes"] == str(LIMITS["nproc"])
    assert limits["Max address space"] == str(LIMITS["as"])
    assert report["write_inside"] == "written" and (tmp_path / "work" / "inside.txt").exists()
    if bounds_processes(mode):
        assert report["threads"] < LIMITS["nproc"]  # a fork bomb stops at the limit
    if confines["files"]:
        assert report["read_secret"].startswith("refused") and report["write_outside"].startswith("refused")
        assert not (tmp_path / "outside.txt").exists()
        assert os.geteuid() != 0 or report["uid"] != 0 and report["spawned"]["uid"] != 0  # root drops to nobody
    else:
        assert report["read_secret"] == CANARY and (tmp_path / "outside.txt").exists()
    if confines["network"]:
        assert all(result.startswith("refused") for result in report["connect"])
    else:
        assert report["connect"][0] == "connected"
    if confines["processes"]:  # a fresh /proc: amd and its environment cannot be seen
        assert report["amd_environ"].startswith("refused") and report["processes_seen"] < 10
    else:
        # what mode none leaves open, as the security model says: amd's environment as it started (its keys) can be read
        assert not report["amd_environ"].startswith("refused") and "PATH=" in report["amd_environ"]


@pytest.mark.parametrize("mode", ["bwrap"], indirect=True)
def test_a_benchmark_that_needs_the_network_gets_it_and_nothing_more(mode, tmp_path, listener):
    report = probe(tmp_path, listener, network=True)
    assert report["connect"][0] == "connected"
    assert report["read_secret"].startswith("refused") and set(report["env"]) <= MINIMAL


def test_an_unknown_or_unavailable_mode_is_named(monkeypatch):
    monkeypatch.setenv(processes.MODE_VARIABLE, "chroot")
    with pytest.raises(AmdError, match="AMD_CONFINEMENT='chroot' is not a confinement mode; modes: auto, bwrap"):
        processes.confinement_mode()
    monkeypatch.setenv(processes.MODE_VARIABLE, "bwrap")
    monkeypatch.setenv("PATH", "/nonexistent")
    processes._available_mode.cache_clear()
    try:
        with pytest.raises(AmdError, match="AMD_CONFINEMENT=bwrap cannot be given here: bwrap is not installed"):
            processes.confinement_mode()
    finally:
        processes._available_mode.cache_clear()


@pytest.fixture
def without_bubblewrap(monkeypatch, tmp_path):
    """This machine as one without bubblewrap: a PATH holding only links to the other tools a mode needs."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for tool in ("unshare", "prlimit", "setpriv", "true"):
        if shutil.which(tool):
            (folder / tool).symlink_to(shutil.which(tool))
    monkeypatch.setenv("PATH", str(folder))
    monkeypatch.delenv(processes.MODE_VARIABLE, raising=False)
    processes._available_mode.cache_clear()
    processes._warn_unconfined.cache_clear()
    yield
    processes._available_mode.cache_clear()


def test_without_bubblewrap_model_code_runs_only_where_the_user_names_a_weaker_mode(without_bubblewrap, monkeypatch,
                                                                                    caplog):
    weaker = processes.confinement_mode()
    assert weaker in ("namespaces", "none")
    with pytest.raises(AmdError, match=rf"^AppWorld runs the code its model writes, and its files cannot be confined "
                                       rf"here \(bwrap is not installed .*\): that code could read any file you can "
                                       rf".* {processes.MODE_VARIABLE}={weaker}$"):
        ConfinedProcess([sys.executable, "-c", "print('never started')"], Confinement(model_code="AppWorld"))
    monkeypatch.setenv(processes.MODE_VARIABLE, weaker)  # the user says so
    processes.require_confined_files("AppWorld")
    assert f"AppWorld runs the code its model writes under confinement {weaker!r}" in caplog.text


def test_with_bubblewrap_model_code_runs_confined_without_being_asked(monkeypatch, caplog):
    if processes._unavailable("bwrap") is not None:
        pytest.skip(f"confinement bwrap cannot run here: {processes._unavailable('bwrap')}")
    monkeypatch.delenv(processes.MODE_VARIABLE, raising=False)
    processes.require_confined_files("AppWorld")
    assert "runs the code its model writes" not in caplog.text


def test_auto_takes_the_strongest_mode_the_machine_gives(monkeypatch):
    monkeypatch.setenv(processes.MODE_VARIABLE, "auto")
    strongest = next(mode for mode in MODES if processes._unavailable(mode) is None)
    assert processes.confinement_mode() == strongest


UNPRIVILEGED_RUN = """
import json, sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from amd.benchmarks.processes import ConfinedProcess, Confinement, confinement_mode
import subprocess
probe, request, work = sys.argv[2], sys.argv[3], sys.argv[4]
confined = ConfinedProcess([sys.executable, "-I", probe, request], Confinement(readable=(Path(probe),),
                           writable=(Path(work),)), stdout=subprocess.PIPE, text=True)
out, _ = confined.process.communicate(timeout=120)
confined.stop()
print(json.dumps({"mode": confinement_mode(), "report": json.loads(out)}))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="the test plays an unprivileged user with setpriv, which needs root")
def test_an_unprivileged_user_gets_the_same_confinement_in_a_user_namespace(listener):
    """What a researcher's own account gets: bwrap in a user namespace, no root anywhere (the system Python runs a
    copy of amd's process module as nobody)."""
    system_python = Path("/usr/bin/python3")
    if processes._unavailable("bwrap") is not None or not system_python.exists():
        pytest.skip("needs bwrap and /usr/bin/python3")
    folder = Path(tempfile.mkdtemp(prefix="amd-unprivileged-"))  # pytest's own folders are private to root
    try:
        folder.chmod(0o755)
        for package in ("benchmarks", "core"):
            (folder / "amd" / package).mkdir(parents=True)
        for module in ("__init__.py", "core/__init__.py", "core/errors.py", "benchmarks/__init__.py",
                       "benchmarks/processes.py"):
            shutil.copy(REPO / "amd" / module, folder / "amd" / module)
        shutil.copy(PROBE, folder / PROBE.name)
        request = probe_request(folder, listener)
        (folder / "secret.txt").chmod(0o644)  # nobody could read it, were it not confined
        nobody = pwd.getpwnam("nobody").pw_uid
        os.chown(folder / "work", nobody, nobody)
        done = subprocess.run(["setpriv", f"--reuid={nobody}", f"--regid={nobody}", "--clear-groups",
                               str(system_python), "-I", "-c", UNPRIVILEGED_RUN, str(folder),
                               str(folder / PROBE.name), json.dumps(request), str(folder / "work")],
                              env={"PATH": os.environ["PATH"], "OPENAI_API_KEY": CANARY}, capture_output=True,
                              text=True, timeout=180, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        result = json.loads(done.stdout)
        report = result["report"]
        assert result["mode"] == "bwrap" and report["uid"] == nobody
        assert CANARY not in json.dumps([report["env"], report["spawned"], report["read_secret"]])
        assert report["read_secret"].startswith("refused") and not (folder / "outside.txt").exists()
        assert report["write_inside"] == "written" and all(r.startswith("refused") for r in report["connect"])
        assert report["amd_environ"].startswith("refused") and report["threads"] < LIMITS["nproc"]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
