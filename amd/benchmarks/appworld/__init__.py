"""AppWorld (`benchmark.py`), run in its own environment: `server.py` starts `child.py` there and talks to it;
`harness.py` holds the paper's harness settings. This file imports nothing."""
