"""The Snakemake workflow's logic, testable without Snakemake: the config schema and its check (`config.py`), the
grid of cells and result paths (`grid.py`), and config values as `amd` command-line arguments (`args.py`). The
rules under rules/ only wire these to inputs, outputs and shell commands."""
