"""`amd plan [--estimate]`: the jobs a config's grid makes (amd.workflow.jobs) and, with --estimate, what they
would cost (amd.workflow.estimate), before anything runs."""

import sys

import pandas as pd

from amd.analysis import layout
from amd.core.errors import AmdError
from amd.workflow.config import BASE_FILE, CONFIG_DIR, DEFAULT_FILE, ConfigError
from amd.workflow.estimate import estimate, summarize
from amd.workflow.jobs import TaskPools, grid_jobs, job_counts, job_table
from amd.workflow.named import experiment_table
from amd.workflow.plan import SERVERS_TITLE, experiments_title, load_config, markdown, write
from amd.workflow.serving import plans


def register(subparsers) -> None:
    plan = subparsers.add_parser("plan", help="the grid's jobs for a config and, with --estimate, their cost "
                                 "(requests, tokens, dollars, GPU-hours) before anything runs")
    plan.add_argument("--configfile", nargs="+", default=[],
                      help=f"config files merged in order, as the workflow merges them: over {CONFIG_DIR / BASE_FILE}, "
                      f"and over {CONFIG_DIR / DEFAULT_FILE} (the embedded default) unless they give a `name` of "
                      "their own")
    plan.add_argument("--config-json", help="the whole config as JSON instead (the workflow's estimate_cost rule)")
    plan.add_argument("--estimate", action="store_true", help="estimate requests, tokens, dollars and GPU-hours")
    plan.add_argument("--node-gpus", type=int, help="with --estimate: the wall time of the served jobs on a node of "
                      "this many GPUs (default: estimate.node_gpus, else 8)")
    plan.add_argument("--runs", nargs="+", default=[],
                      help="more run files to take per-task figures from (e.g. a pilot run outside results/)")
    plan.add_argument("--out", nargs=2, metavar=("CSV", "MD"), help="also write every job's row here")
    plan.set_defaults(handler=plan_from_args)


def plan_from_args(args) -> int:
    from amd.workflow.grid import Grid

    try:
        grid = Grid(load_config(args.configfile, args.config_json))
    except ConfigError as error:
        raise AmdError(str(error)) from None
    servers, basis = pd.DataFrame(), ""
    if args.estimate:
        table, notes = estimate(grid, args.runs)
        summary = summarize(table)
        node_gpus = args.node_gpus or grid.config.get("estimate", {}).get("node_gpus", 8)
        servers, basis, server_notes = plans(grid, table, node_gpus)
        notes += server_notes
    else:
        pools = TaskPools(grid)
        table = job_table(grid_jobs(grid, pools))
        summary, notes = job_counts(table), pools.notes
    experiments = pd.DataFrame(experiment_table(grid.config["experiments"]))
    print(markdown(summary, ",.2f"))
    if len(servers):
        print(f"\n{SERVERS_TITLE} ({basis})\n\n{markdown(servers, ',.1f')}")
    title = experiments_title(grid.own_path(layout.TABLE).format(table="NAME", ext="md"))
    print(f"\n{title}\n\n{markdown(experiments, '.1f')}")
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    if args.out:
        csv_path, md_path = args.out
        write(table, summary, experiments, notes, csv_path, md_path, servers=(servers, basis), title=title)
    return 0
