"""Outputs asked for by name: experiments `on_demand` (not part of `all`), experiments that belong to one config
(`config: NAME`), which experiments an output is made from, and the refusal of an output that no experiment of
the active config makes, naming the configs whose experiments do (checked when Snakemake plans, before any job
runs)."""

from pathlib import Path

import yaml

from amd.workflow.config import CONFIG_DIR


def own_experiments(config: dict) -> dict:
    """The experiments of the active config: those without `config`, and those whose `config` is its `name`."""
    return {name: spec for name, spec in config["experiments"].items()
            if spec.get("config", config.get("name")) == config.get("name")}


def makers(output: str, experiments: dict) -> list[str]:
    """The experiments an output is made from: those in `all` that list it, else the on-demand ones that do (an
    experiment of your own for an output replaces the default's CPU-scale one, and `all` never runs on-demand
    cells)."""
    listing = [name for name, spec in experiments.items() if output in spec["outputs"]]
    in_all = [name for name in listing if not experiments[name].get("on_demand")]
    return in_all or listing


def refusal(output: str, config_name: str | None) -> str:
    """Why an output cannot be made here, and which experiments of which config files can make it."""
    found = [f"`{experiment}` in {path}" + (f" (config `{owner}`)" if owner else "")
             for path, experiment, owner in makers_of(output)]
    where = f"; experiments that make it: {', '.join(found)}" if found else ""
    return (f"output {output!r}: no experiment of the active config (name {config_name!r}) lists it under "
            f"`outputs`{where}. Run with that config, or add an experiment with outputs: [{output}]")


def makers_of(output: str, folder: Path = CONFIG_DIR) -> list[tuple[str, str, str | None]]:
    """(config file, experiment, the config it belongs to) for each experiment of folder/*.yaml listing output."""
    found = []
    for path in sorted(folder.glob("*.yaml")):
        config = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        for experiment, spec in (config.get("experiments") or {}).items():
            if output in (spec or {}).get("outputs", []):
                found.append((str(path), experiment, spec.get("config")))
    return found


def experiment_table(experiments: dict) -> list[dict]:
    """One row per experiment: how it is built (by `all`, or by name), its outputs, and its measured time."""
    return [{"experiment": name, "built by": "name" if spec.get("on_demand") else "all",
             "outputs": ", ".join(spec["outputs"]),
             "measured_minutes": spec.get("measured", {}).get("minutes"),
             "measured_where": spec.get("measured", {}).get("where")} for name, spec in experiments.items()]
