# Agent Memory Distillation (arXiv 2608.07169): teacher trajectories -> memory banks -> student runs -> scores
# -> the paper's tables and figures. Every job is one `amd ...` call; config/config.yaml is the embedded
# default, config/paper.yaml the paper's grid. The config is checked, and the grid laid out, by amd.workflow;
# the results layout is amd/analysis/layout.py.

from snakemake.utils import min_version

min_version("9.0")


report: "report/workflow.rst"


include: "rules/common.smk"
include: "rules/setup.smk"
include: "rules/serve.smk"
include: "rules/teacher.smk"
include: "rules/memory.smk"
include: "rules/student.smk"
include: "rules/probe.smk"
include: "rules/score.smk"
include: "rules/analysis.smk"
include: "rules/view.smk"
include: "rules/plan.smk"


rule all:
    default_target: True
    input:
        grid.all_targets(),
