"""The paper's grid as file targets: what the Snakemake rules (rules/*.smk) ask of the config, answered here.

`Grid(config)` checks the config (schema, then the names experiments use), expands each experiment into cells
(one student run each), maps cells to result paths (amd.analysis.layout) and gives each job's command-line
pieces from only the slice of config it uses, so changing one value reruns exactly the jobs that depend on it.
It is one class built by concern, each layer on the one before:
- amd.workflow.agents: agents and benchmarks by name, their tasks, options and settings, wildcard regexes;
- amd.workflow.cells: cells, and the paths of runs, banks, outputs and pages;
- amd.workflow.commands: each job's `amd` command and the model slots it takes;
- amd.workflow.batches: the model servers' batches (rules/serve.smk).
"""

import sys
from pathlib import Path

from amd.analysis import layout
from amd.workflow.batches import Batches
from amd.workflow.checks import check_names
from amd.workflow.config import (
    DEFAULT_NAME,
    ConfigError,
    active_config,
    check_values,
    read_config,
    validate_config,
    with_likes,
    without_nulls,
)
from amd.workflow.named import own_experiments
from amd.workflow.sections import sections


class Grid(Batches):
    def __init__(self, config: dict):
        check_values(config)
        config = with_likes(without_nulls(config))
        validate_config(config)
        self.config = config | {"experiments": own_experiments(config)}
        self.sections = sections(self.config)
        self.name = self.sections.name or DEFAULT_NAME
        self.runs = layout.run_paths(None if self.name == DEFAULT_NAME else self.name)
        check_names(self)


def workflow_grid(overlay: dict, configfiles=()) -> Grid:
    """The Snakefile's grid, from the --configfile files over the config files they build on (active_config); a
    config it cannot use stops Snakemake before any job with the one line that says why. The files Snakemake read
    (`configfiles`) are read again as amd reads a config, for what Snakemake's loader lets through (a key given
    twice, an alias bomb)."""
    try:
        for path in configfiles:
            read_config(Path(path))
        return Grid(active_config(overlay))
    except ConfigError as error:
        sys.exit(f"amd: {error}")
