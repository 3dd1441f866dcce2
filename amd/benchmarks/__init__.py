"""Benchmarks behind one protocol (`base.py`); each is a module here plus a line in `amd.core.registry` (BENCHMARKS)."""
