"""AppWorld's HTTP environment server in AppWorld's own virtual environment, one per worker, on loopback only.

AppWorld pins pydantic<2, FastAPI 0.110, SQLAlchemy 1.4 and httpx<0.28, so it cannot share amd's environment:
`make appworld-venv` builds `.venv-appworld/` (or $AMD_APPWORLD_VENV) from requirements-appworld.txt. Each server is
that environment's Python running `child.py`, which serves AppWorld's own app on a socket this module
binds to 127.0.0.1 and hands over; the server never binds one itself. It starts confined, with a minimal
environment, and ends with the run whatever ends it (`amd.benchmarks.processes`); a pool of them gives each worker
its own server (one server serves one task at a time).
"""

import os
import socket
import subprocess
from pathlib import Path

import httpx2

from amd.benchmarks.processes import ConfinedProcess, Confinement
from amd.core.errors import AmdError

VERSION = "0.1.3.post1"
LOOPBACK = "127.0.0.1"
CHILD = Path(__file__).resolve().with_name("child.py")
DEFAULT_VENV = Path(__file__).resolve().parents[3] / ".venv-appworld"
INSTALLED_STAMP = ".amd-installed"  # written by `make appworld-venv` once AppWorld is installed and unpacked
STARTUP_TIMEOUT_S = 300.0
REQUEST_TIMEOUT_S = 900.0  # AppWorld itself stops a code block after 100 s; evaluation can take longer
LOG_TAIL_CHARS = 2000
MODEL_CODE_RUNNER = "AppWorld"  # its servers run the code the agent writes (amd.benchmarks.processes)


class AppWorldVenv:
    """Where AppWorld is installed: its Python, and the cache folder it unpacked its tests into (APPWORLD_CACHE,
    kept inside the environment so nothing goes to the home folder)."""

    def __init__(self, path: Path | None = None):
        self.path = Path(path or os.environ.get("AMD_APPWORLD_VENV") or DEFAULT_VENV)
        self.python = self.path / "bin" / "python"
        self.cache = self.path / "appworld-cache"

    def check(self) -> None:
        if not (self.path / INSTALLED_STAMP).exists():
            raise AmdError(f"AppWorld's virtual environment is missing at {self.path}: run `make appworld-venv` "
                           "(or set AMD_APPWORLD_VENV to one made by it)")


class AppWorldServer:
    """One AppWorld server, confined (`amd.benchmarks.processes`): it reads AppWorld's environment and the task
    data, writes only the root's experiments/ folder, and reaches no network; model code runs inside it."""

    def __init__(self, venv: AppWorldVenv, root: Path):
        listener = socket.create_server((LOOPBACK, 0))
        self.port = listener.getsockname()[1]
        self.log_path = root / "logs" / f"server-{os.getpid()}-{self.port}.log"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        box = Confinement(readable=(venv.path, venv.python.resolve().parents[1], CHILD, root,
                                    (root / "data").resolve()),
                          writable=(root / "experiments",),
                          variables={"APPWORLD_ROOT": str(root), "APPWORLD_CACHE": str(venv.cache)},
                          model_code=MODEL_CODE_RUNNER)
        try:
            with open(self.log_path, "wb") as log:
                # -I: isolated; the child's folder (amd's own appworld.py) must not shadow the package
                self.process = ConfinedProcess([str(venv.python), "-I", str(CHILD), str(listener.fileno()), VERSION],
                                               box, pass_fds=(listener.fileno(),), stdin=subprocess.DEVNULL,
                                               stdout=log, stderr=subprocess.STDOUT, cwd=root)
        finally:
            listener.close()
        self.client = httpx2.Client(base_url=f"http://{LOOPBACK}:{self.port}", timeout=REQUEST_TIMEOUT_S,
                                    trust_env=False)  # never through a proxy
        try:
            self._wait_until_ready()
        except BaseException:
            self.stop()
            raise

    def _wait_until_ready(self) -> None:
        """The socket listens already, so the first request waits in its backlog until the app serves it."""
        try:
            self.client.get("/", timeout=STARTUP_TIMEOUT_S).raise_for_status()
        except httpx2.HTTPError as error:
            raise AmdError(f"the AppWorld server did not start ({error}); its log {self.log_path} ends:\n"
                           f"{self.log_tail()}") from None

    def post(self, path: str, **body):
        """AppWorld's reply `output` to POST path with a JSON body."""
        try:
            response = self.client.post(path, json=body)
        except httpx2.HTTPError as error:
            raise AmdError(f"the AppWorld server on port {self.port} failed on {path} ({error}); its log ends:\n"
                           f"{self.log_tail()}") from None
        if response.status_code != 200:
            raise AmdError(f"the AppWorld server answered {path} with HTTP {response.status_code}: "
                           f"{response.text[-LOG_TAIL_CHARS:]}")
        return response.json()["output"]

    @property
    def alive(self) -> bool:
        return self.process.alive

    def stop(self) -> None:
        self.process.stop()
        self.client.close()
        self.log_path.unlink(missing_ok=True)

    def log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-LOG_TAIL_CHARS:]
        except OSError:
            return "(no log)"
