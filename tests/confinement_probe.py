"""What a hostile model step would try, run as a confined program by tests/test_confinement.py (standard library
only, any Python): read the environment, spawn a process and read its environment, read and write files outside
its work folder, connect to addresses outside, look at the processes of the machine, allocate memory and start
threads past its limits.

    python confinement_probe.py '{"secret": PATH, "outside": PATH, "inside": PATH, "connect": [[IP, PORT], ...],
                                  "amd_pid": PID, "allocate": BYTES, "threads": N}'

It prints one JSON object: what each attempt gave (a value, or the name of the error that stopped it).
"""

import json
import os
import socket
import subprocess
import sys
import threading

SPAWNED = "import json, os; print(json.dumps({'uid': os.getuid(), 'env': dict(os.environ)}))"


def attempt(action):
    try:
        return action()
    except Exception as error:  # noqa: BLE001 -- the point is to see every refusal
        return f"refused: {type(error).__name__}: {error}"


def write(path: str) -> str:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("written by a confined program")
    return "written"


def connect(ip: str, port: int) -> str:
    socket.create_connection((ip, port), timeout=3).close()
    return "connected"


def spawn() -> dict:
    done = subprocess.run([sys.executable, "-I", "-c", SPAWNED], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read()


def start_threads(most: int) -> int:
    """How many threads start (at most `most`) before the process limit stops one."""
    release, started = threading.Event(), []
    try:
        for _ in range(most):
            thread = threading.Thread(target=release.wait, daemon=True)
            thread.start()
            started.append(thread)
    except RuntimeError:  # can't start new thread
        pass
    release.set()
    return len(started)


def main(request: dict) -> dict:
    return {
        "env": dict(os.environ),
        "uid": os.getuid(),
        "spawned": attempt(spawn),
        "read_secret": attempt(lambda: read(request["secret"])),
        "write_outside": attempt(lambda: write(request["outside"])),
        "write_inside": attempt(lambda: write(request["inside"])),
        "connect": [attempt(lambda ip=ip, port=port: connect(ip, port)) for ip, port in request["connect"]],
        "amd_environ": attempt(lambda: read(f"/proc/{request['amd_pid']}/environ")),
        "processes_seen": len([name for name in os.listdir("/proc") if name.isdigit()]),
        "allocate": attempt(lambda: len(bytearray(request["allocate"])) and "allocated"),
        "threads": start_threads(request["threads"]),
        "limits": read("/proc/self/limits"),
    }


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
