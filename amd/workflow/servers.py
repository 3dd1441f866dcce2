"""Which model server each served job of a grid uses: servers shared by batches of one agent's jobs.

An agent with a `serve:` entry has its jobs (its runs as teacher or student, and the banks it writes) served by
vLLM servers that the workflow starts. Its jobs are packed into batches, each one server: in a fixed order
(benchmark, then path), a batch takes jobs while their requests in flight (each job's concurrency) add up to at most
the agent's `serve.max_in_flight`. A batch is one Snakemake job (rules/serve.smk, `amd serve-batch`: the server and
every job of it at once; one SLURM job under profiles/slurm), so a job never shares a batch with a served job it
waits for: jobs are batched per depth, the number of served jobs upstream of them (a student's own trajectories,
then the bank it writes from them, then its runs with that bank, then an online run after the frozen one).

A batch's command holds its jobs' commands, so a grid whose batches change (another `max_in_flight`, a cell added
before others of the same agent) runs the jobs of the changed batches again; their model replies come from the
response cache.
"""

import itertools
from collections.abc import Mapping
from dataclasses import dataclass

from amd.core.vocabulary import memory_config

DEFAULT_MAX_IN_FLIGHT = 64  # requests in flight per server where `serve.max_in_flight` is not given
# A batch job's cluster resources where `serve.resources` does not give them (profiles/slurm). Its CPUs and memory
# are the agent's to give: Snakemake counts cpus_per_task against a local run's --cores (measured: 4 batches at once
# at --cores 16 with cpus_per_task 4), which would cap the batches at once.
BATCH_RESOURCES = {"runtime": 720}
WRITER_CONCURRENCY = 4  # `amd memory build --writer-concurrency` (its default; the workflow does not set it)


def batch_resources(serve: Mapping) -> dict:
    """A batch job's Snakemake resources: its GPUs and `serve.resources` over BATCH_RESOURCES."""
    return BATCH_RESOURCES | serve.get("resources", {}) | {"gpu": server_gpus(serve)}


def server_gpus(serve: Mapping) -> int:
    """GPUs of one server of an agent's `serve:` entry (`serve.gpus`, 1 where not given)."""
    return int(serve.get("gpus", 1))


@dataclass(frozen=True)
class Node:
    """A job of the grid as far as servers care: what it makes, who calls a model in it, what it waits for."""

    path: str
    agent: str | None  # the acting agent or the bank's writer; None for a pooled bank (no model)
    served: bool  # the agent's model is served by a server of the workflow
    benchmark: str
    load: int  # requests in flight
    upstream: tuple[str, ...]


class ServerPlan:
    def __init__(self, grid):
        self.grid = grid
        self.nodes: dict[str, Node] = {}
        self._depths: dict[str, int] = {}
        for experiment in grid.config["experiments"]:
            for cell in grid.cells(experiment):
                self._add_cell(cell)
        self.server_of: dict[str, str] = {}  # served job's path -> server name
        self.jobs_of: dict[str, list[str]] = {}  # server name -> its jobs' paths
        self._batch()

    def max_in_flight(self, agent: str) -> int:
        return self.grid.agent(agent)["serve"].get("max_in_flight", DEFAULT_MAX_IN_FLIGHT)

    # ---- the grid's jobs -----------------------------------------------------------------------------------

    def _add(self, path: str, agent: str | None, entry: dict, benchmark: str, load: int, upstream=()) -> None:
        self.nodes.setdefault(path, Node(path, agent, "serve" in entry, benchmark, load, tuple(upstream)))

    def _add_cell(self, cell: dict) -> None:
        grid, benchmark = self.grid, cell["benchmark"]
        upstream = []
        if cell["method"]:
            members = []
            for member in grid.distilled_teachers(cell["teacher"]):
                own = cell | {"teacher": member,
                              "writer": member if cell["writer"] == cell["teacher"] else cell["writer"]}
                teacher_run = grid.runs.teacher_run.format(**own)
                self._add(teacher_run, member, grid.agent(member), benchmark, grid.concurrency(member, benchmark))
                members.append(grid.bank_path(own))
                self._add(members[-1], own["writer"], grid.writer(own["writer"]), benchmark, WRITER_CONCURRENCY,
                          [teacher_run])
            bank = grid.bank_path(cell)
            self._add(bank, None, {}, benchmark, 0, members)
            upstream.append(bank)
        run, student = grid.run_path(cell), grid.agent(cell["student"])
        load = grid.concurrency(cell["student"], benchmark)
        after = memory_config(cell["memcfg"]).after if cell["method"] and not cell["probe"] else None
        if after:
            first = grid.runs_first(cell | {"k": run.split("/k_")[1].split("/")[0]})[0]
            self._add(first, cell["student"], student, benchmark, load, upstream)
            upstream.append(first)
        self._add(run, cell["student"], student, benchmark, load, upstream)

    def depth(self, path: str) -> int:
        """Served jobs on the longest chain of jobs this one waits for."""
        if path not in self._depths:
            upstream = self.nodes[path].upstream
            self._depths[path] = max((self.depth(up) + self.nodes[up].served for up in upstream), default=0)
        return self._depths[path]

    # ---- batches -------------------------------------------------------------------------------------------

    def _batch(self) -> None:
        def key(node: Node):
            return node.agent, self.depth(node.path)

        served = sorted((node for node in self.nodes.values() if node.served),
                        key=lambda node: (*key(node), node.benchmark, node.path))
        for (agent, depth), nodes in itertools.groupby(served, key=key):
            index, in_flight = 0, 0
            for node in nodes:
                if in_flight and in_flight + node.load > self.max_in_flight(agent):
                    index, in_flight = index + 1, 0
                in_flight += node.load
                name = f"{agent}-d{depth}-b{index}"
                self.server_of[node.path] = name
                self.jobs_of.setdefault(name, []).append(node.path)


def server_agent(server: str) -> str:
    """The agent a server serves: its name up to the first dash (agent names have none)."""
    return server.split("-", 1)[0]
