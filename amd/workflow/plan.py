"""A config merged from its files as the workflow merges them (`amd plan`, `amd release sync`), and the tables of
`amd plan` (amd.cli.plan) as Markdown and CSV."""

import json
from pathlib import Path
from typing import Any

import pandas as pd

from amd.core.errors import AmdError
from amd.workflow.config import active_config, merge_configs, read_config


def load_config(files: list[str], config_json: str | None = None) -> dict:
    if config_json:
        return json.loads(config_json)
    overlay: dict[str, Any] = {}
    for path in files:
        if not Path(path).is_file():
            raise AmdError(f"--configfile: cannot read {path}: no such file")
        overlay = merge_configs(overlay, read_config(Path(path)))
    return active_config(overlay)


SERVERS_TITLE = "Model servers of the served jobs: one per job, as each job started its own, against one per batch"


def experiments_title(table_path: str) -> str:
    return (f"Experiments (built by `all`, or by name: snakemake {table_path}; measured: snakemake --cores 2 OUTPUT "
            "from an empty results/)")


def write(table: pd.DataFrame, summary: pd.DataFrame, experiments: pd.DataFrame, notes: list[str], csv_path,
          md_path, servers: tuple[pd.DataFrame, str] = (pd.DataFrame(), ""), title: str = "Experiments") -> None:
    table.to_csv(csv_path, index=False)
    frame, basis = servers
    lines = ["**Cost estimate of the config's grid, before launch (amd plan --estimate)**", "",
             markdown(summary, ",.2f"), "",
             *([f"**{SERVERS_TITLE}** ({basis})", "", markdown(frame, ",.1f"), ""] if len(frame) else []),
             f"**{title}**", "", markdown(experiments, ".1f"),
             "", *(f"Note: {note}" for note in notes), "",
             markdown(table, ",.2f"), ""]
    Path(md_path).write_text("\n".join(lines), encoding="utf-8")


def markdown(table: pd.DataFrame, floatfmt: str) -> str:
    return _shown(table).to_markdown(index=False, floatfmt=floatfmt, missingval="—")


def _shown(table: pd.DataFrame) -> pd.DataFrame:
    """Unknown figures as blanks that Markdown shows as a dash."""
    return table.astype(object).where(table.notna(), None)
