"""BFCL V3 multi-turn (`benchmark.py`) and the validation of model calls before they run (`calls.py`). This file
imports nothing."""
