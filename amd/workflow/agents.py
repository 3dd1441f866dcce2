"""The grid's agents and benchmarks (amd.workflow.grid): entries by name, their tasks, options and `run` settings, and
the names the rules' wildcards take, as regexes."""

from amd.analysis import layout
from amd.core.registry import AGENTS, BENCHMARKS, MEMORY_METHODS
from amd.core.vocabulary import ZERO_SHOT, memory_configs, output_names
from amd.workflow.config import ConfigError
from amd.workflow.sections import RELEASE_HARNESS, Agent, Harness, Sections


class Agents:
    """Reads the checked config, typed (`sections`; `config`, the dict, for what takes an entry as it is); `name`
    and `runs` (where its runs go) are set by amd.workflow.grid.Grid."""

    config: dict
    sections: Sections
    name: str
    runs: layout.RunPaths

    def agents(self) -> dict:
        return self.config["teachers"] | self.config["students"]

    def agent(self, name: str) -> dict:
        """Teachers and students share one name space: a student can teach (Student Memory, `teachers: [self]`)."""
        self.typed_agent(name)
        return self.agents()[name]

    def typed_agent(self, name: str) -> Agent:
        if name not in self.sections.agents:
            raise ConfigError(f"config: agent {name!r} is in neither `teachers` nor `students`")
        return self.sections.agents[name]

    def pools(self) -> dict:
        """`teacher_pools`: a name usable as a teacher, for one bank pooled from its teachers' banks."""
        return self.config.get("teacher_pools", {})

    def distilled_teachers(self, teacher: str) -> list[str]:
        """The teachers whose runs a cell's memory comes from: a pool's members, else the teacher itself."""
        pool = self.sections.pools.get(teacher)
        return pool.teachers if pool else [teacher]

    def writer(self, name: str) -> dict:
        """A writer by name: an entry of `writers`, or an agent writing with its own model."""
        return self.config["writers"].get(name) or self.agent(name)

    def writer_spec(self, name: str) -> str:
        return self.sections.writers.get(name) or self.typed_agent(name).spec

    def tasks(self, benchmark: str, role: str, agent: str) -> list[str] | None:
        """The tasks an agent runs in a role (teacher, student): its own for the benchmark, else the benchmark's
        for the role (None: every task)."""
        own = self.typed_agent(agent).benchmarks.get(benchmark)
        if own and own.tasks is not None:
            return own.tasks
        entry = self.sections.benchmarks[benchmark]
        return entry.teacher_tasks if role == "teacher" else entry.student_tasks

    def options(self, benchmark: str, agent: str | None = None) -> dict:
        """The benchmark's own options, with the agent's for it over them."""
        own = self.typed_agent(agent).benchmarks.get(benchmark) if agent else None
        return dict(self.sections.benchmarks[benchmark].options) | dict(own.options if own else {})

    def variant(self, name: str | None, benchmark: str) -> Harness:
        """A harness variant's k, δ and run options for a benchmark (none for the release's harness, `name` None)."""
        return self.sections.variants[name].harness(benchmark) if name else RELEASE_HARNESS

    def run_settings(self, name: str, benchmark: str) -> dict:
        return (dict(self.sections.run) | dict(self.sections.benchmarks[benchmark].run)
                | dict(self.typed_agent(name).run))

    @staticmethod
    def samples(entry: dict) -> bool:
        return not (entry["spec"] in AGENTS.names() and not AGENTS.load(entry["spec"]).needs_model)

    def concurrency(self, name: str, benchmark: str) -> int:
        """Tasks an agent's run of the benchmark keeps in flight."""
        return self.run_settings(name, benchmark).get("concurrency", 1)

    def acting_agent(self, wildcards) -> Agent:
        """The acting agent of a run job: the student where there is one, else the teacher."""
        return self.typed_agent(wildcards.get("student") or wildcards.teacher)

    def agent_names(self) -> str:
        """Teachers and students (banks distilled from one run), as a wildcard regex."""
        return "|".join(self.agents())

    def pool_names(self) -> str:
        return "|".join(self.pools()) or "(?!)"

    def served_agents(self) -> str:
        """Agents whose jobs (their runs, and memory builds they write) serve their model themselves with vLLM (a
        `serve:` block), as a wildcard regex."""
        return "|".join(name for name, agent in self.sections.agents.items() if agent.serve is not None) or "(?!)"

    def other_agents(self) -> str:
        return "|".join(name for name, agent in self.sections.agents.items() if agent.serve is None) or "(?!)"

    def other_writers(self) -> str:
        """Writers that need no server of their own: `writers` entries and agents that are not served."""
        return "|".join([*self.sections.writers, self.other_agents()])

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
