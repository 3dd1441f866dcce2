"""Benchmarks behind one protocol (`base.py`) and what they share (`parsing.py`, `processes.py`, `duplicates.py`); each
is a module here (`agentdojo.py`), or a folder of its own when it has more than one, plus a line in
amd/plugins.toml ([benchmarks])."""
