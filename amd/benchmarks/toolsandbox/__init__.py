"""ToolSandbox (`benchmark.py`), run in its own environment by worker processes (`worker.py`). This file imports
nothing."""
