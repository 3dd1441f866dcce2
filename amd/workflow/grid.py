"""The paper's grid as file targets: what the Snakemake rules (rules/*.smk) ask of the config, answered here.

`Grid(config)` checks the config (schema, then the names experiments use), expands each experiment into cells
(one student run each), maps cells to result paths (amd.analysis.layout) and gives each job's command-line
pieces from only the slice of config it uses, so changing one value reruns exactly the jobs that depend on it.
"""

import functools
import itertools
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from amd.analysis import layout
from amd.core import per_type
from amd.core.registry import AGENTS, BENCHMARKS, MEMORY_METHODS
from amd.core.vocabulary import (
    CROSS_SPLITS,
    PREFER_TEACHER,
    ZERO_SHOT,
    bank_settings,
    memory_config,
    memory_configs,
    memory_types,
    method_spec,
    output_names,
)
from amd.workflow import args
from amd.workflow.checks import SELF_TEACHER, TEACHER_WRITES, check_names
from amd.workflow.config import (
    DEFAULT_NAME,
    ConfigError,
    active_config,
    check_values,
    merge_configs,
    read_config,
    validate_config,
    with_likes,
    without_nulls,
)
from amd.workflow.named import makers, own_experiments, refusal
from amd.workflow.servers import ServerPlan, batch_resources, server_agent

# A cell (one student run) takes one value of each of these; the experiment lists them or `defaults` gives one. A
# memory cell also takes one value of each setting of its method (a build option the grid varies: bank_settings).
CELL_LISTS = {"benchmark": "benchmarks", "student": "students", "teacher": "teachers", "writer": "writers",
              "embedder": "embedders", "memcfg": "memory_configs", "protocol": "protocols", "seed": "seeds"}


def cell_lists() -> dict:
    """CELL_LISTS and each registered setting's key -> its config section."""
    return CELL_LISTS | {setting.key: setting.section for setting in bank_settings()}


@dataclass
class Batch:
    """One model server's job: its batch's outputs (and whether each is a folder), inputs and `amd serve-batch`
    arguments."""

    name: str
    rule: str
    outputs: list[tuple[str, bool]]
    inputs: list[str]
    log: str
    resources: dict
    args: str

    def arguments(self, _wildcards) -> str:
        """`args` as a rule's params function (a plain string would have its `{base_url}` read as a wildcard)."""
        return self.args


class Wildcards(dict):
    """A job's names with attribute access, as a rule's wildcards have them."""

    def __getattr__(self, name: str):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class Grid:
    def __init__(self, config: dict):
        check_values(config)
        config = with_likes(without_nulls(config))
        validate_config(config)
        self.config = config | {"experiments": own_experiments(config)}
        self.name = config.get("name", DEFAULT_NAME)
        self.runs = layout.run_paths(None if self.name == DEFAULT_NAME else self.name)
        check_names(self)

    # ---- names and entries ---------------------------------------------------------------------------------

    def agents(self) -> dict:
        return self.config["teachers"] | self.config["students"]

    def agent(self, name: str) -> dict:
        """Teachers and students share one name space: a student can teach (Student Memory, `teachers: [self]`)."""
        if name not in self.agents():
            raise ConfigError(f"config: agent {name!r} is in neither `teachers` nor `students`")
        return self.agents()[name]

    def pools(self) -> dict:
        """`teacher_pools`: a name usable as a teacher, for one bank pooled from its teachers' banks."""
        return self.config.get("teacher_pools", {})

    def distilled_teachers(self, teacher: str) -> list[str]:
        """The teachers whose runs a cell's memory comes from: a pool's members, else the teacher itself."""
        return self.pools()[teacher]["teachers"] if teacher in self.pools() else [teacher]

    def agent_names(self) -> str:
        """Teachers and students (banks distilled from one run), as a wildcard regex."""
        return "|".join(self.agents())

    def pool_names(self) -> str:
        return "|".join(self.pools()) or "(?!)"

    def served_agents(self) -> str:
        """Agents whose jobs (their runs, and memory builds they write) serve their model themselves with vLLM (a
        `serve:` block), as a wildcard regex."""
        return "|".join(name for name, entry in self.agents().items() if "serve" in entry) or "(?!)"

    def other_agents(self) -> str:
        return "|".join(name for name, entry in self.agents().items() if "serve" not in entry) or "(?!)"

    def other_writers(self) -> str:
        """Writers that need no server of their own: `writers` entries and agents that are not served."""
        return "|".join([*self.config["writers"], self.other_agents()])

    @staticmethod
    def memory_config_names() -> str:
        """The memory configs of registered methods, as a wildcard regex."""
        return "|".join(name for name in memory_configs() if name != ZERO_SHOT)

    @staticmethod
    def method_names() -> str:
        return "|".join(MEMORY_METHODS.names())

    @staticmethod
    def output_names(kind: str) -> str:
        return "|".join(output_names(kind))

    # ---- cells and paths -----------------------------------------------------------------------------------

    def setting(self, experiment: str, key: str) -> list:
        """An experiment's list for `key` (e.g. "teachers"), else the default as a one-item list."""
        spec = self.config["experiments"][experiment]
        if key in spec:
            return spec[key]
        if key == "seeds":
            return self.config["defaults"]["seeds"]
        singular = next(name for name, plural in cell_lists().items() if plural == key)
        if singular not in self.config["defaults"]:
            raise ConfigError(f"config: experiments.{experiment}: a memory config whose method has the setting "
                              f"{singular!r} needs `{key}` here or `defaults.{singular}`")
        return [self.config["defaults"][singular]]

    def harness(self, benchmark: str, key: str) -> dict:
        """A benchmark's own values of `key` (run, memory_options, build_options, k, delta): its harness."""
        return self.config["benchmarks"][benchmark].get(key, {})

    def variant(self, name: str | None, benchmark: str, key: str) -> dict:
        """A harness variant's values of `key` (k, delta, memory_options) for a benchmark: its own for all
        benchmarks, the benchmark's entry over them ({} for the release's harness, `name` None)."""
        if not name:
            return {}
        entry = self.config["variants"][name]
        return merge_configs(entry.get(key, {}), entry.get("benchmarks", {}).get(benchmark, {}).get(key, {}))

    def base_k(self, benchmark: str, variant: str | None = None) -> dict:
        """k per type code: the variant's over the benchmark's over the config's defaults over the types' own."""
        return ({code: t.default_k for code, t in memory_types().items()} | self.config["defaults"]["k"]
                | self.harness(benchmark, "k") | self.variant(variant, benchmark, "k"))

    def k_values(self, experiment: str, memcfg: str, benchmark: str) -> list[dict]:
        """The k settings of one memory config: the default, or the default with one type varied (`vary_k`)."""
        base = self.base_k(benchmark, self.config["experiments"][experiment].get("variant"))
        varied = [base]
        for code in self.codes(memcfg):
            varied += [base | {code: value} for value in self.config["experiments"][experiment].get("vary_k", [])]
        unique = {per_type.segment(k, self.codes(memcfg)): k for k in varied}
        return list(unique.values())

    @staticmethod
    def codes(memcfg: str) -> tuple[str, ...]:
        return tuple(t.code for t in memory_config(memcfg).types)

    def cells(self, experiment: str):
        """Every student run of one experiment, as dicts of path names (plus k as a dict)."""
        names = list(CELL_LISTS)
        lists = [self.setting(experiment, CELL_LISTS[name]) for name in names]
        for combo in itertools.product(*lists):
            cell = dict(zip(names, combo))
            if cell["teacher"] == SELF_TEACHER:
                cell["teacher"] = cell["student"]
            if cell["writer"] == TEACHER_WRITES:
                cell["writer"] = cell["teacher"]
            cell["method"] = memory_config(cell["memcfg"]).method
            cell["probe"] = self.config["experiments"][experiment].get("probe", False)
            # a harness variant applies to memory runs; zero-shot runs are the release's, shared
            cell["variant"] = layout.variant_part(self.config["experiments"][experiment].get("variant")
                                                  if cell["method"] else None)
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

    def experiment_runs(self, experiment: str) -> list[str]:
        """Student runs plus the runs of the teachers they learn from (tables show the teacher beside them); for a
        probe experiment, also the grid's runs of its cells that have run already."""
        cells = list(self.cells(experiment))
        teachers = {self.runs.teacher_run.format(**(cell | {"teacher": teacher})) for cell in cells if cell["method"]
                    for teacher in self.distilled_teachers(cell["teacher"])}
        grid_runs = self.finished_grid_runs(cells) if self.config["experiments"][experiment].get("probe") else []
        return sorted({self.run_path(cell) for cell in cells}) + sorted(teachers) + grid_runs

    def finished_grid_runs(self, probe_cells: list[dict]) -> list[str]:
        """The grid's runs of the probe cells in full (another experiment's cell that is the same but for the seed)
        whose file is on disk: the probe is checked against the grid only where the grid has run."""
        wanted = {self.run_path(cell | {"probe": False, "seed": 0}) for cell in probe_cells}
        found = set()
        for experiment, spec in self.config["experiments"].items():
            for cell in self.cells(experiment) if not spec.get("probe") else ():
                path = self.run_path(cell)
                if self.run_path(cell | {"seed": 0}) in wanted and os.path.exists(path):
                    found.add(path)
        return sorted(found)

    def output_runs(self, name: str) -> list[str]:
        """Every run of every experiment that makes this table or figure (amd.workflow.named.makers); an output
        that no experiment of this config lists is refused, naming the configs whose experiments do."""
        chosen = makers(name, self.config["experiments"])
        if not chosen:
            raise ConfigError(refusal(name, self.config.get("name")))
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
        if "release" not in self.config:
            return None
        root = self.own_path("results/")
        if not path.startswith(root):
            raise ConfigError(f"config: {path} is outside this config's results tree {root}")
        return f"{self.config['release'].rstrip('/')}/{layout.released_name(path[len(root):])}"

    def output_paths(self, name: str) -> list[str]:
        if name in output_names("figure"):
            return [self.own_path(layout.FIGURE).format(figure=name)]
        return [self.own_path(layout.TABLE).format(table=name, ext=ext) for ext in ("csv", "md")]

    def all_targets(self) -> list[str]:
        """Every output of every experiment not `on_demand`, a score per run and a page (amd view) per student
        run."""
        names = sorted({name for spec in self.config["experiments"].values() if not spec.get("on_demand")
                        for name in spec["outputs"]})
        runs = {run for name in names for run in self.output_runs(name)}
        scores = [run.replace("trajectories.jsonl", "score.json") for run in sorted(runs)]
        views = [layout.view_path(run) for run in sorted(runs & self.student_runs)]
        return [path for name in names for path in self.output_paths(name)] + scores + views

    def on_demand(self) -> dict[str, list[str]]:
        """Each output made on demand (not by `all`) -> the experiments that make it."""
        outputs = {name for spec in self.config["experiments"].values() for name in spec["outputs"]}
        chosen = {name: makers(name, self.config["experiments"]) for name in sorted(outputs)}
        return {name: experiments for name, experiments in chosen.items()
                if self.config["experiments"][experiments[0]].get("on_demand")}

    # ---- run pages (amd view) ------------------------------------------------------------------------------

    @functools.cached_property
    def student_runs(self) -> set[str]:
        """The grid's student runs, zero-shot and with memory (not probe runs)."""
        return {self.run_path(cell) for experiment, spec in self.config["experiments"].items()
                if not spec.get("probe") for cell in self.cells(experiment)}

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

    def view_args(self, wildcards) -> str:
        return args.view_flags(self.view_against(wildcards), self.view_bank(wildcards))

    # ---- command-line pieces (each from its own slice of config) -----------------------------------------------

    def note(self) -> str:
        return args.quoted(self.config.get("note", ""))

    def config_json(self) -> str:
        """The whole config, for the one job that reads all of it (the cost estimate of the grid)."""
        return args.quoted(json.dumps(self.config, sort_keys=True))

    def agent_args(self, name: str) -> str:
        entry = self.agent(name)
        return args.agent_flag(entry["spec"], "serve" in entry)

    def run_args(self, name: str, benchmark: str) -> str:
        """`amd run` settings, the benchmark's over the config's and the agent's own over both; the oracle samples
        nothing."""
        return args.run_flags(self.run_settings(name, benchmark), samples=self.samples(self.agent(name)))

    def run_settings(self, name: str, benchmark: str) -> dict:
        entry = self.agent(name)
        return (self.config["run"] | self.harness(benchmark, "run")
                | {key: value for key, value in entry.items() if key in args.RUN_FLAGS})

    @staticmethod
    def samples(entry: dict) -> bool:
        return not (entry["spec"] in AGENTS.names() and not AGENTS.load(entry["spec"]).needs_model)

    def concurrency(self, name: str, benchmark: str) -> int:
        """Tasks an agent's run of the benchmark keeps in flight."""
        return self.run_settings(name, benchmark).get("concurrency", 1)

    def agent_benchmark(self, agent: str | None, benchmark: str) -> dict:
        """An agent's own tasks and options for a benchmark (its `benchmarks` entry), if any."""
        return self.agent(agent).get("benchmarks", {}).get(benchmark, {}) if agent else {}

    def tasks(self, benchmark: str, role: str, agent: str) -> list[str] | None:
        """The tasks an agent runs in a role (teacher, student): its own for the benchmark, else the benchmark's
        for the role (None: every task)."""
        own = self.agent_benchmark(agent, benchmark)
        return own["tasks"] if "tasks" in own else self.config["benchmarks"][benchmark].get(f"{role}_tasks")

    def options(self, benchmark: str, agent: str | None = None) -> dict:
        """The benchmark's own options, with the agent's for it over them."""
        return (self.config["benchmarks"][benchmark].get("options", {})
                | self.agent_benchmark(agent, benchmark).get("options", {}))

    def benchmark_args(self, benchmark: str, role: str, agent: str) -> str:
        """The tasks of a teacher or student run and the benchmark's options for the agent."""
        return args.benchmark_flags(self.tasks(benchmark, role, agent), self.options(benchmark, agent))

    @staticmethod
    def setup_targets() -> str:
        """The make targets that set benchmarks up (registry meta `setup`), as a wildcard regex."""
        return "|".join(entry.meta["setup"] for entry in BENCHMARKS.entries() if "setup" in entry.meta) or "(?!)"

    @staticmethod
    def setup_done(wildcards) -> list[str]:
        """What a run of the benchmark waits for: its setup, where it has one."""
        target = BENCHMARKS.entry(wildcards.benchmark).meta.get("setup")
        return [layout.SETUP_DONE.format(target=target)] if target else []

    def probe_args(self, wildcards) -> str:
        """The probe set of a probe run: the config's fixed list for the benchmark, else a draw from its student
        tasks (`amd probe --probe-size N --probe-seed S`)."""
        probe = self.config["probe"]
        benchmark, student = wildcards["benchmark"], wildcards["student"]
        fixed = probe.get("tasks", {}).get(benchmark)
        if fixed:
            return args.benchmark_flags(fixed, self.options(benchmark, student))
        return (f"{self.benchmark_args(benchmark, 'student', student)} --probe-size {probe['size']}"
                f" --probe-seed {probe['seed']}")

    def benchmark_options(self, wildcards) -> str:
        """The benchmark's own options alone (memory builds read its function docs)."""
        return args.benchmark_flags(None, self.options(wildcards.benchmark))

    def writer(self, name: str) -> dict:
        """A writer by name: an entry of `writers`, or an agent writing with its own model."""
        return self.config["writers"].get(name) or self.agent(name)

    def writer_args(self, wildcards) -> str:
        entry = self.writer(wildcards.writer)
        return args.writer_flags(entry, served="serve" in entry)

    def embedder_args(self, wildcards) -> str:
        return f"--embedder {args.quoted(self.config['embedders'][wildcards.embedder]['spec'])}"

    def build_args(self, wildcards) -> str:
        """--method and the build option of each setting of the method, from the value the bank's path names. No
        --delta: the bank records its embedder's calibration, and the config's δ goes to each run, so a δ sweep
        never rebuilds a bank."""
        names = layout.build_names(wildcards.method, wildcards.build)
        spec = method_spec(wildcards.method)
        options = {setting.option: setting.text(self.config[setting.section][names[setting.key]])
                   for setting in spec.settings}
        options |= {key: args.option_text(value) for key, value in
                    self.harness(wildcards.benchmark, "build_options").get(wildcards.method, {}).items()}
        return args.build_option_flags(wildcards.method, options)

    def pool_member_banks(self, wildcards) -> list[str]:
        """The banks a pooled bank joins: each member's, with the pool's settings; a pool whose writer is the
        teacher (`writer: teacher`) joins the banks each member wrote itself."""
        cell = dict(wildcards)
        return [self.runs.bank_dir.format(**(cell | {"teacher": member, "writer": (
            member if wildcards.writer == wildcards.teacher else wildcards.writer)}))
            for member in self.distilled_teachers(wildcards.teacher)]

    def pool_member_names(self, wildcards) -> str:
        return " ".join(self.distilled_teachers(wildcards.teacher))

    def memory_args(self, wildcards) -> str:
        defaults = self.config["defaults"]
        config = memory_config(wildcards.memcfg)
        split_seed = defaults["split_seed"] if wildcards.protocol in CROSS_SPLITS else None
        variant = layout.variant_name(wildcards.get("variant", ""))
        options = (defaults.get("memory_options", {}).get(config.method, {})
                   | self.harness(wildcards.benchmark, "memory_options").get(config.method, {})
                   | self.variant(variant, wildcards.benchmark, "memory_options").get(config.method, {}))
        if "prefer" in self.pools().get(wildcards.teacher, {}):
            options = options | {PREFER_TEACHER: self.pools()[wildcards.teacher]["prefer"]}
        delta = (defaults["delta"] | self.config["embedders"][wildcards.embedder].get("delta", {})
                 | self.harness(wildcards.benchmark, "delta") | self.variant(variant, wildcards.benchmark, "delta"))
        return args.memory_flags(wildcards.memcfg, self.codes(wildcards.memcfg), wildcards.protocol,
                                 per_type.from_segment(wildcards.k), delta, split_seed, options)

    # ---- resources -----------------------------------------------------------------------------------------

    def acting_agent(self, wildcards) -> dict:
        """The acting agent of a run job: the student where there is one, else the teacher."""
        return self.agent(wildcards.get("student") or wildcards.teacher)

    def local_llm_slots(self, wildcards) -> int:
        """Global cap `local_llm`: embedded llama.cpp servers at once (one thread each; profiles/default)."""
        return _uses(self.acting_agent(wildcards)["spec"], "local:")

    def api_slots(self, wildcards) -> int:
        """Global cap `llm_api`: requests to hosted or already-running model servers."""
        return _uses(self.acting_agent(wildcards)["spec"], "openai:", "vllm:")

    def bank_api_slots(self, wildcards) -> int:
        """A memory build calls the API once per model-backed writer or embedder."""
        specs = (self.writer(wildcards.writer)["spec"], self.config["embedders"][wildcards.embedder]["spec"])
        return sum(_uses(spec, "openai:", "vllm:") for spec in specs)

    def bank_local_slots(self, wildcards) -> int:
        """A model writer on the embedded llama.cpp server takes a `local_llm` slot."""
        return _uses(self.writer(wildcards.writer)["spec"], "local:")

    # ---- jobs' commands ------------------------------------------------------------------------------------

    def command_of(self, template: str):
        """A rule's params function: the command of its job (`command`), from the rule's output template."""
        return lambda wildcards: self.command(template.format(**dict(wildcards)))

    def command(self, path: str) -> str:
        """The `amd` command that makes a job's output (a run or a bank built by a writer), as its rule runs it. A
        served model is reached at `{base_url}`, which `amd serve-batch` fills in (rules/serve.smk)."""
        found = layout.job_wildcards(path)
        if found is None:
            raise ConfigError(f"{path}: not a run or bank path of the layout")
        role, names = found
        wildcards = Wildcards(names)
        released = self.released(path)  # a run resumes from its released copy, a build reuses it (docs/guides/releases.md)
        if role == "bank":
            return " ".join(part for part in (
                "amd memory build --trajectories", self.runs.teacher_run.format(**names), self.build_args(wildcards),
                self.writer_args(wildcards), self.embedder_args(wildcards), self.benchmark_options(wildcards),
                "--out", path, f"--reuse {args.quoted(released)}" if released else "") if part)
        agent = names.get("student") or names["teacher"]
        benchmark = names["benchmark"]
        tasks = (self.probe_args(wildcards) if role == "probe"
                 else self.benchmark_args(benchmark, "teacher" if role == "teacher" else "student", agent))
        parts = ["amd probe" if role == "probe" else "amd run", benchmark, self.agent_args(agent), "--out", path, tasks,
                 self.run_args(agent, benchmark)]
        if role != "teacher":
            parts.append(f"--seed {names['seed']}")
        if role in ("memory", "probe"):
            parts += ["--memory", self.bank_path(wildcards), self.memory_args(wildcards)]
        if released and role != "probe":
            parts.append(f"--resume-from {args.quoted(released)}")
        return " ".join(part for part in parts if part)

    # ---- model servers (amd.workflow.servers) -------------------------------------------------------------

    @functools.cached_property
    def servers(self) -> ServerPlan:
        return ServerPlan(self)

    def batches(self) -> list[Batch]:
        """One job per server: its batch's jobs, run at once against it by `amd serve-batch` (rules/serve.smk)."""
        return [self._batch(server, paths) for server, paths in self.servers.jobs_of.items()]

    def _batch(self, server: str, paths: list[str]) -> Batch:
        entry = self.agent(server_agent(server))
        inputs: list[str] = []
        for path in paths:
            inputs += [needed for needed in self._job_inputs(path) if needed not in paths and needed not in inputs]
        cells = " ".join(f"--job {args.quoted(self._job_log(path))} {args.quoted(self.command(path))}"
                         for path in paths)
        return Batch(name=server, rule=f"serve_batch_{server.replace('-', '_')}",
                     outputs=[(path, layout.job_wildcards(path)[0] == "bank") for path in paths],  # type: ignore[index]
                     inputs=inputs, log=self.own_path(f"results/logs/servers/{server}.log"),
                     resources=batch_resources(entry["serve"]),
                     args=f"{args.serve_flags(entry['spec'], entry['serve'])} {cells}")

    def _job_inputs(self, path: str) -> list[str]:
        """What a job waits for, as its rule's inputs: the benchmark's setup, a bank and the run before it, or the
        trajectories a bank is built from."""
        role, names = layout.job_wildcards(path)  # type: ignore[misc]
        wildcards = Wildcards(names)
        if role == "bank":
            return [self.runs.teacher_run.format(**names)]
        needed = self.setup_done(wildcards)
        if role in ("memory", "probe"):
            needed += [self.bank_path(wildcards)]
        if role == "memory":
            needed += self.runs_first(wildcards)
        return needed

    @staticmethod
    def _job_log(path: str) -> str:
        return log_path(f"{path}/build.log" if layout.job_wildcards(path)[0] == "bank" else path)  # type: ignore[index]


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


def _uses(spec, *prefixes) -> int:
    return 1 if str(spec).startswith(prefixes) else 0


def log_path(path: str) -> str:
    return path.replace("results/", "results/logs/", 1).rsplit(".", 1)[0] + ".log"


def benchmark_path(path: str) -> str:
    """Where Snakemake writes a job's wall time, CPU time and peak memory (bench/bench_embedded_default.py)."""
    return path.replace("results/", "results/benchmarks/", 1).rsplit(".", 1)[0] + ".tsv"
