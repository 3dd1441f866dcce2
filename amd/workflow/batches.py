"""The model servers' jobs (rules/serve.smk): one batch per server (amd.workflow.servers) of the jobs it serves, run
at once against it by `amd serve-batch`."""

import functools
from dataclasses import dataclass

from amd.analysis import layout
from amd.workflow import args
from amd.workflow.cells import log_path
from amd.workflow.commands import Commands, Wildcards
from amd.workflow.servers import ServerPlan, batch_resources, server_agent


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


class Batches(Commands):
    @functools.cached_property
    def servers(self) -> ServerPlan:
        return ServerPlan(self)

    def batches(self) -> list[Batch]:
        """One job per server: its batch's jobs, run at once against it by `amd serve-batch` (rules/serve.smk)."""
        return [self._batch(server, paths) for server, paths in self.servers.jobs_of.items()]

    def _batch(self, server: str, paths: list[str]) -> Batch:
        agent = self.typed_agent(server_agent(server))
        assert agent.serve is not None  # a server is a served agent's
        inputs: list[str] = []
        for path in paths:
            inputs += [needed for needed in self._job_inputs(path) if needed not in paths and needed not in inputs]
        cells = " ".join(f"--job {args.quoted(self._job_log(path))} {args.quoted(self.command(path))}"
                         for path in paths)
        return Batch(name=server, rule=f"serve_batch_{server.replace('-', '_')}",
                     outputs=[(path, layout.job_wildcards(path)[0] == "bank") for path in paths],  # type: ignore[index]
                     inputs=inputs, log=self.own_path(f"results/logs/servers/{server}.log"),
                     resources=batch_resources(agent.serve),
                     args=f"{args.serve_flags(agent.spec, agent.serve)} {cells}")

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
