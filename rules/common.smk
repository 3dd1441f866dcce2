# The grid and every job's command-line pieces come from amd.workflow (amd/workflow/grid.py), which checks the
# config first; paths come from amd/analysis/layout.py. Each job gets as params only the slice of config it uses.
# The config: config/base.yaml, then config/config.yaml (the embedded default) unless the --configfile files (here
# `config`, merged by Snakemake) give a `name` of their own, then those files (amd.workflow.config.active_config).

from amd.analysis import layout
from amd.workflow.banner import announce_start
from amd.workflow.cells import benchmark_path, log_path
from amd.workflow.grid import workflow_grid
from amd.workflow.scripts import find_amd_beside_python

grid = workflow_grid(config, workflow.configfiles)
find_amd_beside_python()


onstart:
    announce_start(config, workflow.overwrite_configfiles, workflow.global_resources)


wildcard_constraints:
    benchmark=layout.NAME,
    teacher=layout.NAME,
    writer=layout.NAME,
    embedder=layout.NAME,
    build=layout.BUILD,
    student=layout.NAME,
    method=grid.method_names(),
    memcfg=layout.NAME,
    protocol=layout.NAME,
    k=layout.NAME,
    variant=layout.VARIANT,
    seed=r"[0-9]+",
    table=grid.output_names("table"),
    figure=grid.output_names("figure"),
    target=grid.setup_targets(),


def batch_outputs(batch):
    """A model server's batch's outputs (rules/serve.smk), banks as folders."""
    return [directory(path) if folder else path for path, folder in batch.outputs]
