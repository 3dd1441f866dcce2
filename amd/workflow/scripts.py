"""Where the workflow's jobs find `amd`: beside the Python that runs Snakemake, however Snakemake was started."""

import os
import sysconfig


def find_amd_beside_python(environ=os.environ) -> None:
    """Put the scripts folder of the running Python (where `amd` is installed, beside `snakemake`) at the end of
    PATH, so every job finds `amd` when Snakemake was started as `.venv/bin/snakemake` without activating the
    environment; an `amd` earlier on PATH still comes first."""
    scripts = sysconfig.get_path("scripts")
    folders = [folder for folder in environ.get("PATH", "").split(os.pathsep) if folder]
    if scripts not in folders:
        environ["PATH"] = os.pathsep.join([*folders, scripts])
