"""What the workflow says when its jobs start: the config files in use and what --cores means here."""

import os
import sys
from collections.abc import Mapping
from typing import Any

from amd.workflow.config import CONFIG_DIR, DEFAULT_FILE, config_files


def start_lines(config_files: list[str], resources: Mapping[str, Any]) -> list[str]:
    """Lines for the start of a run: which config files are layered (Snakemake's own header lists only the
    --configfile files), and that --cores caps jobs, not threads, beside this machine's cores and the model caps.
    `resources` are Snakemake's global resources (`_cores` is --cores), plain numbers or objects with a `value`."""
    values = {name: getattr(value, "value", value) for name, value in resources.items()}
    default = str(CONFIG_DIR / DEFAULT_FILE)
    named = [f"{path} (the embedded default)" if path == default else path for path in config_files]
    lines = ["amd: config files in use, in order: " + ", ".join(named)]
    if values.get("_cores") is not None:
        caps = ", ".join(f"{name}={value}" for name, value in sorted(values.items())
                         if not name.startswith("_") and name and value is not None)
        lines.append(f"amd: --cores {values['_cores']} is how many jobs may run at once, not threads: most jobs wait "
                     f"on a model (this machine has {os.cpu_count()} CPU cores); the models' caps bound them"
                     + (f" ({caps}: profiles/default/config.yaml or --resources)" if caps else ""))
    return lines


def announce_start(overlay: dict, overlay_files: list[str], resources: Mapping[str, Any]) -> None:
    """The Snakefile's onstart: the start lines on stderr, the --configfile files as paths from here."""
    files = config_files(overlay, [os.path.relpath(path) for path in overlay_files])
    print(*start_lines(files, resources), sep="\n", file=sys.stderr)
