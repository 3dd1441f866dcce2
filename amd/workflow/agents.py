"""The grid's agents and benchmarks (amd.workflow.grid): entries by name, their tasks, options and `run` settings, and
the names the rules' wildcards take, as regexes."""

from amd.analysis import layout
from amd.core.registry import AGENTS, BENCHMARKS, MEMORY_METHODS
from amd.core.vocabulary import ZERO_SHOT, memory_configs, output_names
from amd.workflow import args
from amd.workflow.config import ConfigError, merge_configs


class Agents:
    """Reads the checked config (`config`); `name` and `runs` (where its runs go) are set by amd.workflow.grid.Grid."""

    config: dict
    name: str
    runs: layout.RunPaths

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

    def writer(self, name: str) -> dict:
        """A writer by name: an entry of `writers`, or an agent writing with its own model."""
        return self.config["writers"].get(name) or self.agent(name)

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

    def acting_agent(self, wildcards) -> dict:
        """The acting agent of a run job: the student where there is one, else the teacher."""
        return self.agent(wildcards.get("student") or wildcards.teacher)

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

    @staticmethod
    def setup_targets() -> str:
        """The make targets that set benchmarks up (registry meta `setup`), as a wildcard regex."""
        return "|".join(entry.meta["setup"] for entry in BENCHMARKS.entries() if "setup" in entry.meta) or "(?!)"

    @staticmethod
    def setup_done(wildcards) -> list[str]:
        """What a run of the benchmark waits for: its setup, where it has one."""
        target = BENCHMARKS.entry(wildcards.benchmark).meta.get("setup")
        return [layout.SETUP_DONE.format(target=target)] if target else []
