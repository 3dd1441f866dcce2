"""The grid's cells (one student run each: amd.workflow.grid) and the paths of the runs, banks, outputs and pages they
make (amd.analysis.layout); the targets of `all` and of each output."""

import functools
import itertools
import os

from amd.analysis import layout
from amd.core import per_type
from amd.core.vocabulary import (
    ZERO_SHOT,
    bank_settings,
    memory_config,
    memory_types,
    method_spec,
    output_names,
)
from amd.workflow.agents import Agents
from amd.workflow.checks import SELF_TEACHER, TEACHER_WRITES
from amd.workflow.config import DEFAULT_NAME, ConfigError
from amd.workflow.named import makers, refusal

# A cell (one student run) takes one value of each of these; the experiment lists them or `defaults` gives one. A
# memory cell also takes one value of each setting of its method (a build option the grid varies: bank_settings).
CELL_LISTS = {"benchmark": "benchmarks", "student": "students", "teacher": "teachers", "writer": "writers",
              "embedder": "embedders", "memcfg": "memory_configs", "protocol": "protocols", "seed": "seeds"}


def cell_lists() -> dict:
    """CELL_LISTS and each registered setting's key -> its config section."""
    return CELL_LISTS | {setting.key: setting.section for setting in bank_settings()}


def log_path(path: str) -> str:
    return path.replace("results/", "results/logs/", 1).rsplit(".", 1)[0] + ".log"


def benchmark_path(path: str) -> str:
    """Where Snakemake writes a job's wall time, CPU time and peak memory (bench/bench_embedded_default.py)."""
    return path.replace("results/", "results/benchmarks/", 1).rsplit(".", 1)[0] + ".tsv"


class Cells(Agents):
    def setting(self, experiment: str, key: str) -> list:
        """An experiment's list for `key` (e.g. "teachers"), else the default as a one-item list."""
        lists, defaults = self.sections.experiments[experiment].lists, self.sections.defaults
        if key in lists:
            return lists[key]
        if key == "seeds":
            return defaults.seeds
        singular = next(name for name, plural in cell_lists().items() if plural == key)
        if singular not in defaults.cell:
            raise ConfigError(f"config: experiments.{experiment}: a memory config whose method has the setting "
                              f"{singular!r} needs `{key}` here or `defaults.{singular}`")
        return [defaults.cell[singular]]

    def base_k(self, benchmark: str, variant: str | None = None) -> dict:
        """k per type code: the variant's over the benchmark's over the config's defaults over the types' own."""
        return ({code: t.default_k for code, t in memory_types().items()} | dict(self.sections.defaults.k)
                | dict(self.sections.benchmarks[benchmark].k) | dict(self.variant(variant, benchmark).k))

    def k_values(self, experiment: str, memcfg: str, benchmark: str) -> list[dict]:
        """The k settings of one memory config: the default, or the default with one type varied (`vary_k`)."""
        spec = self.sections.experiments[experiment]
        base = self.base_k(benchmark, spec.variant)
        varied = [base]
        for code in self.codes(memcfg):
            varied += [base | {code: value} for value in spec.vary_k]
        unique = {per_type.segment(k, self.codes(memcfg)): k for k in varied}
        return list(unique.values())

    @staticmethod
    def codes(memcfg: str) -> tuple[str, ...]:
        return tuple(t.code for t in memory_config(memcfg).types)

    def cells(self, experiment: str):
        """Every student run of one experiment, as dicts of path names (plus k as a dict)."""
        spec = self.sections.experiments[experiment]
        names = list(CELL_LISTS)
        lists = [self.setting(experiment, CELL_LISTS[name]) for name in names]
        for combo in itertools.product(*lists):
            cell = dict(zip(names, combo))
            if cell["teacher"] == SELF_TEACHER:
                cell["teacher"] = cell["student"]
            if cell["writer"] == TEACHER_WRITES:
                cell["writer"] = cell["teacher"]
            cell["method"] = memory_config(cell["memcfg"]).method
            cell["probe"] = spec.probe
            # a harness variant applies to memory runs; zero-shot runs are the release's, shared
            cell["variant"] = layout.variant_part(spec.variant if cell["method"] else None)
            for built in self.build_values(experiment, cell["method"]):
                for k in self.k_values(experiment, cell["memcfg"], cell["benchmark"]) if cell["method"] else [{}]:
                    yield cell | built | {"k": k}

    def build_values(self, experiment: str, method: str | None) -> list[dict]:
        """A memory cell's value of each setting of its method, with the `build` part of its paths."""
        if method is None:
            return [{}]
        keys = [setting.key for setting in method_spec(method).settings]
        lists = [self.setting(experiment, cell_lists()[key]) for key in keys]
        return [dict(zip(keys, combo)) | {"build": layout.build_part(method, dict(zip(keys, combo)))}
                for combo in itertools.product(*lists)]

    def run_path(self, cell: dict) -> str:
        if cell["memcfg"] == ZERO_SHOT:
            return self.runs.zero_shot_run.format(**cell)
        template = self.runs.probe_run if cell.get("probe") else self.runs.memory_run
        return template.format(**(cell | {"k": per_type.segment(cell["k"], self.codes(cell["memcfg"]))}))

    def bank_path(self, wildcards) -> str:
        """The bank a memory run reads: its config's method, built from its teacher with its settings."""
        return self.runs.bank_dir.format(**(dict(wildcards) | {"method": memory_config(wildcards["memcfg"]).method}))

    def runs_first(self, wildcards) -> list[str]:
        """What a memory run waits for: the run of the same cell (bank, protocol, k and seed) of the config its
        method's spec names as `after` (e.g. AMD's online memory after the frozen run, whose model replies it then
        finds in the response cache); other runs wait for nothing."""
        after = memory_config(wildcards["memcfg"]).after
        return [self.runs.memory_run.format(**(dict(wildcards) | {"memcfg": after}))] if after else []

    def pool_member_banks(self, wildcards) -> list[str]:
        """The banks a pooled bank joins: each member's, with the pool's settings; a pool whose writer is the
        teacher (`writer: teacher`) joins the banks each member wrote itself."""
        cell = dict(wildcards)
        return [self.runs.bank_dir.format(**(cell | {"teacher": member, "writer": (
            member if wildcards.writer == wildcards.teacher else wildcards.writer)}))
            for member in self.distilled_teachers(wildcards.teacher)]

    def pool_member_names(self, wildcards) -> str:
        return " ".join(self.distilled_teachers(wildcards.teacher))

    def experiment_runs(self, experiment: str) -> list[str]:
        """Student runs plus the runs of the teachers they learn from (tables show the teacher beside them); for a
        probe experiment, also the grid's runs of its cells that have run already."""
        cells = list(self.cells(experiment))
        teachers = {self.runs.teacher_run.format(**(cell | {"teacher": teacher})) for cell in cells if cell["method"]
                    for teacher in self.distilled_teachers(cell["teacher"])}
        grid_runs = self.finished_grid_runs(cells) if self.sections.experiments[experiment].probe else []
        return sorted({self.run_path(cell) for cell in cells}) + sorted(teachers) + grid_runs

    def finished_grid_runs(self, probe_cells: list[dict]) -> list[str]:
        """The grid's runs of the probe cells in full (another experiment's cell that is the same but for the seed)
        whose file is on disk: the probe is checked against the grid only where the grid has run."""
        wanted = {self.run_path(cell | {"probe": False, "seed": 0}) for cell in probe_cells}
        found = set()
        for experiment, spec in self.sections.experiments.items():
            for cell in self.cells(experiment) if not spec.probe else ():
                path = self.run_path(cell)
                if self.run_path(cell | {"seed": 0}) in wanted and os.path.exists(path):
                    found.add(path)
        return sorted(found)

    def output_runs(self, name: str) -> list[str]:
        """Every run of every experiment that makes this table or figure (amd.workflow.named.makers); an output
        that no experiment of this config lists is refused, naming the configs whose experiments do."""
        chosen = makers(name, self.config["experiments"])
        if not chosen:
            raise ConfigError(refusal(name, self.sections.name))
        runs = []
        for experiment in chosen:
            runs += [run for run in self.experiment_runs(experiment) if run not in runs]
        return runs

    def own_path(self, template: str) -> str:
        """A path (template) of this config's own outputs (tables, figures, the estimate, their logs): the embedded
        default's under results/, any other config's under results/NAME/, so two configs never overwrite each
        other's."""
        return layout.under(template, None if self.name == DEFAULT_NAME else self.name)

    def released(self, path: str) -> str | None:
        """Where the config's release folder (`release`) keeps a file of its results tree; None without one."""
        if self.sections.release is None:
            return None
        root = self.own_path("results/")
        if not path.startswith(root):
            raise ConfigError(f"config: {path} is outside this config's results tree {root}")
        return f"{self.sections.release.rstrip('/')}/{layout.released_name(path[len(root):])}"

    def output_paths(self, name: str) -> list[str]:
        if name in output_names("figure"):
            return [self.own_path(layout.FIGURE).format(figure=name)]
        return [self.own_path(layout.TABLE).format(table=name, ext=ext) for ext in ("csv", "md")]

    def all_targets(self) -> list[str]:
        """Every output of every experiment not `on_demand`, a score per run and a page (amd view) per student
        run."""
        names = sorted({name for spec in self.sections.experiments.values() if not spec.on_demand
                        for name in spec.outputs})
        runs = {run for name in names for run in self.output_runs(name)}
        scores = [run.replace("trajectories.jsonl", "score.json") for run in sorted(runs)]
        views = [layout.view_path(run) for run in sorted(runs & self.student_runs)]
        return [path for name in names for path in self.output_paths(name)] + scores + views

    def on_demand(self) -> dict[str, list[str]]:
        """Each output made on demand (not by `all`) -> the experiments that make it."""
        outputs = {name for spec in self.sections.experiments.values() for name in spec.outputs}
        chosen = {name: makers(name, self.config["experiments"]) for name in sorted(outputs)}
        return {name: experiments for name, experiments in chosen.items()
                if self.sections.experiments[experiments[0]].on_demand}

    @functools.cached_property
    def student_runs(self) -> set[str]:
        """The grid's student runs, zero-shot and with memory (not probe runs)."""
        return {self.run_path(cell) for experiment, spec in self.sections.experiments.items()
                if not spec.probe for cell in self.cells(experiment)}

    def view_against(self, wildcards) -> list[str]:
        """What a memory run's page shows beside it: the zero-shot run of the same student, benchmark and seed,
        where the grid has one."""
        cell = layout.describe_run(layout.run_of_view(wildcards.run))
        if cell["role"] != "memory":
            return []
        zero_shot = self.runs.zero_shot_run.format(**cell)
        return [zero_shot] if zero_shot in self.student_runs else []

    def view_bank(self, wildcards) -> list[str]:
        """The bank a memory run read, whose entries its page shows."""
        cell = layout.describe_run(layout.run_of_view(wildcards.run))
        return [self.bank_path(cell)] if cell["role"] == "memory" else []
