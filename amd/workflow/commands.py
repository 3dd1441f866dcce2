"""Each job's `amd` command (amd.workflow.grid), its pieces each from only the slice of config the job uses (so
changing one value reruns exactly the jobs that depend on it; amd.workflow.args writes the flags), and the model
slots a job takes."""

import json

from amd.analysis import layout
from amd.core import per_type
from amd.core.vocabulary import CROSS_SPLITS, PREFER_TEACHER, memory_config, method_spec
from amd.workflow import args
from amd.workflow.cells import Cells
from amd.workflow.config import ConfigError


class Wildcards(dict):
    """A job's names with attribute access, as a rule's wildcards have them."""

    def __getattr__(self, name: str):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def _uses(spec, *prefixes) -> int:
    return 1 if str(spec).startswith(prefixes) else 0


class Commands(Cells):
    def note(self) -> str:
        return args.quoted(self.sections.note)

    def config_json(self) -> str:
        """The whole config, for the one job that reads all of it (the cost estimate of the grid)."""
        return args.quoted(json.dumps(self.config, sort_keys=True))

    def agent_args(self, name: str) -> str:
        agent = self.typed_agent(name)
        return args.agent_flag(agent.spec, agent.serve is not None)

    def run_args(self, name: str, benchmark: str) -> str:
        """`amd run` settings, the benchmark's over the config's and the agent's own over both; the oracle samples
        nothing."""
        return args.run_flags(self.run_settings(name, benchmark), samples=self.samples(self.agent(name)))

    def benchmark_args(self, benchmark: str, role: str, agent: str) -> str:
        """The tasks of a teacher or student run and the benchmark's options for the agent."""
        return args.benchmark_flags(self.tasks(benchmark, role, agent), self.options(benchmark, agent))

    def probe_args(self, wildcards) -> str:
        """The probe set of a probe run: the config's fixed list for the benchmark, else a draw from its student
        tasks (`amd probe --probe-size N --probe-seed S`)."""
        probe = self.sections.probe
        assert probe is not None  # a probe experiment needs `probe` (amd.workflow.checks)
        benchmark, student = wildcards["benchmark"], wildcards["student"]
        fixed = probe.tasks.get(benchmark)
        if fixed:
            return args.benchmark_flags(fixed, self.options(benchmark, student))
        return (f"{self.benchmark_args(benchmark, 'student', student)} --probe-size {probe.size}"
                f" --probe-seed {probe.seed}")

    def benchmark_options(self, wildcards) -> str:
        """The benchmark's own options alone (memory builds read its function docs)."""
        return args.benchmark_flags(None, self.options(wildcards.benchmark))

    def writer_args(self, wildcards) -> str:
        entry = self.writer(wildcards.writer)
        return args.writer_flags(entry, served="serve" in entry)

    def embedder_args(self, wildcards) -> str:
        return f"--embedder {args.quoted(self.sections.embedders[wildcards.embedder])}"

    def build_args(self, wildcards) -> str:
        """--method and the build option of each setting of the method, from the value the bank's path names. No
        --delta: the bank records its embedder's calibration, and the config's δ goes to each run, so a δ sweep
        never rebuilds a bank."""
        names = layout.build_names(wildcards.method, wildcards.build)
        spec = method_spec(wildcards.method)
        # a setting's values are entries of a section its method's spec names (amd.core.spec.Setting.section)
        options = {setting.option: setting.text(self.config[setting.section][names[setting.key]])
                   for setting in spec.settings}
        options |= {key: args.option_text(value) for key, value in
                    self.sections.benchmarks[wildcards.benchmark].build_options.get(wildcards.method, {}).items()}
        return args.build_option_flags(wildcards.method, options)

    def memory_args(self, wildcards) -> str:
        defaults, benchmark = self.sections.defaults, self.sections.benchmarks[wildcards.benchmark]
        method = memory_config(wildcards.memcfg).method
        assert method is not None  # a memory run's config has a method
        split_seed = defaults.split_seed if wildcards.protocol in CROSS_SPLITS else None
        variant = self.variant(layout.variant_name(wildcards.get("variant", "")), wildcards.benchmark)
        options = (dict(defaults.memory_options.get(method, {})) | dict(benchmark.memory_options.get(method, {}))
                   | dict(variant.memory_options.get(method, {})))
        pool = self.sections.pools.get(wildcards.teacher)
        if pool and pool.prefer is not None:
            options = options | {PREFER_TEACHER: pool.prefer}
        delta = (dict(defaults.delta) | dict(self.sections.embedder_delta[wildcards.embedder]) | dict(benchmark.delta)
                 | dict(variant.delta))
        return args.memory_flags(wildcards.memcfg, self.codes(wildcards.memcfg), wildcards.protocol,
                                 per_type.from_segment(wildcards.k), delta, split_seed, options)

    def view_args(self, wildcards) -> str:
        return args.view_flags(self.view_against(wildcards), self.view_bank(wildcards))

    def local_llm_slots(self, wildcards) -> int:
        """Global cap `local_llm`: embedded llama.cpp servers at once (one thread each; profiles/default)."""
        return _uses(self.acting_agent(wildcards).spec, "local:")

    def api_slots(self, wildcards) -> int:
        """Global cap `llm_api`: requests to hosted or already-running model servers."""
        return _uses(self.acting_agent(wildcards).spec, "openai:", "vllm:")

    def bank_api_slots(self, wildcards) -> int:
        """A memory build calls the API once per model-backed writer or embedder."""
        specs = (self.writer_spec(wildcards.writer), self.sections.embedders[wildcards.embedder])
        return sum(_uses(spec, "openai:", "vllm:") for spec in specs)

    def bank_local_slots(self, wildcards) -> int:
        """A model writer on the embedded llama.cpp server takes a `local_llm` slot."""
        return _uses(self.writer_spec(wildcards.writer), "local:")

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
