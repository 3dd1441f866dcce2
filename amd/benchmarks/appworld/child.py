"""AppWorld's environment server on a socket that amd hands over. Run by the AppWorld virtual environment's Python
(`server.py` starts it); amd never imports this file.

    python -I child.py FD VERSION

FD is a TCP socket that amd has bound to 127.0.0.1 and listens on: this process binds no socket of its own, so the
server cannot be reached from another machine (`appworld serve environment` binds 0.0.0.0 and has no host option).
It checks that the installed AppWorld is VERSION, then serves AppWorld's own FastAPI app
(appworld.serve.environment:app) with uvicorn on FD. It exits at once when the pipe AMD_LIFELINE_FD names reaches
end of file: amd holds the write end, and the kernel closes it when amd exits in any way, SIGKILL included, so the
server never outlives the run that started it.
"""

import os
import socket
import sys
import threading

KEEP_ALIVE_S = 3600  # amd keeps one connection per server; a step can wait minutes for the model


def exit_with_parent() -> None:
    os.read(int(os.environ["AMD_LIFELINE_FD"]), 1)  # blocks until amd closes its end
    os._exit(0)


def main(fd: int, version: str) -> None:
    threading.Thread(target=exit_with_parent, daemon=True).start()
    listener = socket.socket(fileno=fd)
    import appworld
    import uvicorn
    from appworld.serve.environment import app

    if appworld.__version__ != version:
        sys.exit(f"AppWorld {appworld.__version__} is installed; amd needs {version} (make appworld-venv)")
    config = uvicorn.Config(app, log_level="warning", timeout_keep_alive=KEEP_ALIVE_S)
    uvicorn.Server(config).run(sockets=[listener])


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
