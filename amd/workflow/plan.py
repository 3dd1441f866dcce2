"""`amd plan [--estimate]`: the jobs a config's grid makes (amd.workflow.jobs) and, with --estimate, what they
would cost (amd.workflow.estimate), before anything runs."""

import json
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from amd.analysis import layout
from amd.core.errors import AmdError
from amd.workflow.config import (
    BASE_FILE,
    CONFIG_DIR,
    DEFAULT_FILE,
    ConfigError,
    active_config,
    merge_configs,
    read_config,
)
from amd.workflow.estimate import estimate, summarize
from amd.workflow.jobs import TaskPools, grid_jobs, job_counts, job_table
from amd.workflow.named import experiment_table
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


def load_config(files: list[str], config_json: str | None = None) -> dict:
    if config_json:
        return json.loads(config_json)
    overlay: dict[str, Any] = {}
    for path in files:
        if not Path(path).is_file():
            raise AmdError(f"--configfile: cannot read {path}: no such file")
        overlay = merge_configs(overlay, read_config(Path(path)))
    return active_config(overlay)


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
    print(_markdown(summary, ",.2f"))
    if len(servers):
        print(f"\n{SERVERS_TITLE} ({basis})\n\n{_markdown(servers, ',.1f')}")
    title = experiments_title(grid.own_path(layout.TABLE).format(table="NAME", ext="md"))
    print(f"\n{title}\n\n{_markdown(experiments, '.1f')}")
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    if args.out:
        csv_path, md_path = args.out
        write(table, summary, experiments, notes, csv_path, md_path, servers=(servers, basis), title=title)
    return 0


SERVERS_TITLE = "Model servers of the served jobs: one per job, as each job started its own, against one per batch"


def experiments_title(table_path: str) -> str:
    return (f"Experiments (built by `all`, or by name: snakemake {table_path}; measured: snakemake --cores 2 OUTPUT "
            "from an empty results/)")


def write(table: pd.DataFrame, summary: pd.DataFrame, experiments: pd.DataFrame, notes: list[str], csv_path,
          md_path, servers: tuple[pd.DataFrame, str] = (pd.DataFrame(), ""), title: str = "Experiments") -> None:
    table.to_csv(csv_path, index=False)
    frame, basis = servers
    lines = ["**Cost estimate of the config's grid, before launch (amd plan --estimate)**", "",
             _markdown(summary, ",.2f"), "",
             *([f"**{SERVERS_TITLE}** ({basis})", "", _markdown(frame, ",.1f"), ""] if len(frame) else []),
             f"**{title}**", "", _markdown(experiments, ".1f"),
             "", *(f"Note: {note}" for note in notes), "",
             _markdown(table, ",.2f"), ""]
    Path(md_path).write_text("\n".join(lines), encoding="utf-8")


def _markdown(table: pd.DataFrame, floatfmt: str) -> str:
    return _shown(table).to_markdown(index=False, floatfmt=floatfmt, missingval="—")


def _shown(table: pd.DataFrame) -> pd.DataFrame:
    """Unknown figures as blanks that Markdown shows as a dash."""
    return table.astype(object).where(table.notna(), None)
