"""GPU time of a grid's served jobs under a stated throughput model of a vLLM server, for two plans: one server per
job (each job starting its own, as `amd serve-run --model` does) and one server per batch of jobs (the workflow's,
amd.workflow.servers). `amd plan --estimate` prints both.

The model (docs/paper-grid.md): a server on `g` GPUs streams its weights once per
engine step and each decoding sequence's KV cache once per token it writes (memory-bound), and spends 2 x params
FLOPs on each uncached prompt token and each written token (compute-bound); the two add up:

    busy = (completion / B x weight_bytes + completion x context x kv_bytes) / (eta_bw x bandwidth x g)
           + 2 x params x (uncached prompt + completion) / (eta_c x flops x g)

B, the sequences decoded per step, is the requests in flight (the concurrency of the server's jobs, summed), at most
what its KV cache holds at that context. A server is busy from its start-up to its last request (its batch's tail,
and time a task spends outside the model, are not modelled); GPU-hours = (startup + busy) x g. A node's wall time
places servers on its GPUs, longest first, a depth (amd.workflow.servers) after the one before it.
"""

from collections import defaultdict
from dataclasses import dataclass

import pandas as pd

from amd.workflow.servers import server_gpus

KV_MEMORY_SHARE = 0.9  # of GPU memory vLLM may use (its --gpu-memory-utilization default), weights first
MODEL_KEYS = ("params_b", "kv_kib_per_token")
GPU_KEYS = ("memory_gb", "hbm_tb_per_s", "bf16_tflops", "bandwidth_efficiency", "compute_efficiency", "startup_s")


@dataclass
class Work:
    requests: float = 0.0
    prompt: float = 0.0
    cached: float = 0.0
    completion: float = 0.0
    in_flight: int = 0

    def add(self, row, in_flight: int) -> None:
        self.requests += row["requests"]
        self.prompt += row["prompt_tokens"]
        self.cached += row["cached_prompt_tokens"]
        self.completion += row["completion_tokens"]
        self.in_flight += in_flight


class ServingModel:
    """The throughput model with the config's `estimate.gpu` and `estimate.models` (per model spec)."""

    def __init__(self, config: dict):
        estimate = config.get("estimate", {})
        self.gpu, self.models = estimate.get("gpu", {}), estimate.get("models", {})

    def missing(self, spec: str) -> list[str]:
        """The keys this model still needs for `spec`, as the config names them."""
        model = self.models.get(spec, {})
        return ([f"estimate.gpu.{key}" for key in GPU_KEYS if self.gpu.get(key) is None]
                + [f'estimate.models["{spec}"].{key}' for key in MODEL_KEYS if model.get(key) is None])

    def busy_s(self, spec: str, gpus: int, work: Work) -> float:
        if not work.requests:
            return 0.0
        model, gpu = self.models[spec], self.gpu
        weights = 2 * model["params_b"] * 1e9  # bf16
        kv_per_token = model["kv_kib_per_token"] * 1024
        flops = gpu["compute_efficiency"] * gpu["bf16_tflops"] * 1e12 * gpus
        per_request = (work.prompt + work.completion) / work.requests
        context = work.prompt / work.requests + work.completion / work.requests / 2
        kv_room = KV_MEMORY_SHARE * gpu["memory_gb"] * 1e9 * gpus - weights
        batch = max(1.0, min(work.in_flight, kv_room / (per_request * kv_per_token)))
        memory_s = work.completion / batch * self.decode_step_s(spec, gpus, batch, context)
        compute_s = 2 * model["params_b"] * 1e9 * (work.prompt - work.cached + work.completion) / flops
        return memory_s + compute_s

    def decode_step_s(self, spec: str, gpus: int, batch: float, context: float) -> float:
        """One decoding step of `batch` sequences at `context` tokens: the weights read once and each sequence's KV
        cache read once, at the GPU's bandwidth times its efficiency (memory-bound)."""
        model, gpu = self.models[spec], self.gpu
        read = 2 * model["params_b"] * 1e9 + batch * context * model["kv_kib_per_token"] * 1024
        return read / (gpu["bandwidth_efficiency"] * gpu["hbm_tb_per_s"] * 1e12 * gpus)

    def hours(self, spec: str, gpus: int, work: Work) -> float:
        return (self.gpu["startup_s"] + self.busy_s(spec, gpus, work)) * gpus / 3600


@dataclass
class Server:
    name: str
    spec: str
    gpus: int
    depth: int
    work: Work


def plans(grid, table: pd.DataFrame, node_gpus: int) -> tuple[pd.DataFrame, str, list[str]]:
    """Servers, GPU-hours and a node's wall time of the grid's served jobs, one server per job against one per
    batch; what their figures rest on; notes on what is unknown. Jobs whose figures are unknown are left out."""
    model, plan, notes = ServingModel(grid.config), grid.servers, []
    rows = table.set_index("job")
    served = [path for path in plan.server_of if path in rows.index]
    unknown = [path for path in served if pd.isna(rows.loc[path, "requests"])]
    specs = {grid.agent(plan.nodes[path].agent)["spec"] for path in served}
    lacking = sorted({key for spec in specs for key in model.missing(spec)})
    if lacking:
        return pd.DataFrame(), "", [f"no GPU-hours for served jobs: fill in {', '.join(lacking)} (and their source)"]
    if unknown:
        notes.append(f"{len(unknown)} of {len(served)} served jobs have no per-task figures yet and are left out of "
                     "the GPU-hours and wall times")
    known = [path for path in served if path not in unknown]
    priors = sum(rows.loc[path, "source"] == "config" for path in known)
    basis = (f"{len(known)} served jobs, {len(known) - priors} with figures from runs (pilots included), {priors} "
             f"from the config's per-task priors{' (before any pilot)' if priors == len(known) else ''}; "
             f"{model.gpu.get('name', 'GPU')}, the throughput model of amd.workflow.serving")
    per_job = [_server(grid, plan, rows, path, [path], shared=False) for path in known]
    batches = defaultdict(list)
    for path in known:
        batches[plan.server_of[path]].append(path)
    per_batch = [_server(grid, plan, rows, name, paths, shared=True) for name, paths in batches.items()]
    summary = [_summary("one server per job (amd serve-run)", per_job, model, node_gpus),
               _summary("one server per batch (the workflow)", per_batch, model, node_gpus)]
    return pd.DataFrame(summary), basis, notes


def _server(grid, plan, rows, name: str, paths: list[str], shared: bool) -> Server:
    """A server for `paths`; `shared`: a batch's, its requests in flight capped by the agent's max_in_flight."""
    agent = plan.nodes[paths[0]].agent
    entry = grid.agent(agent)
    work = Work()
    for path in paths:
        work.add(rows.loc[path], plan.nodes[path].load)
    if shared:
        work.in_flight = min(work.in_flight, plan.max_in_flight(agent))
    return Server(name, entry["spec"], server_gpus(entry["serve"]), plan.depth(paths[0]), work)


def _summary(label: str, servers: list[Server], model: ServingModel, node_gpus: int) -> dict:
    hours = {server.name: model.hours(server.spec, server.gpus, server.work) for server in servers}
    return {"plan": label, "servers": len(servers), "gpu_hours": sum(hours.values()),
            "startup_gpu_hours": sum(model.gpu["startup_s"] * server.gpus / 3600 for server in servers),
            f"wall_hours_on_{node_gpus}_gpus": node_wall_hours(servers, hours, node_gpus)}


def node_wall_hours(servers: list[Server], gpu_hours: dict[str, float], node_gpus: int) -> float:
    """Servers placed on a node's GPUs: a depth after the one before it, within it longest first, each on the GPUs
    free earliest."""
    free = [0.0] * node_gpus
    ready = 0.0
    for depth in sorted({server.depth for server in servers}):
        level = [server for server in servers if server.depth == depth]
        ends = []
        for server in sorted(level, key=lambda s: -gpu_hours[s.name] / s.gpus):
            gpus = min(server.gpus, node_gpus)
            chosen = sorted(range(node_gpus), key=lambda i: free[i])[:gpus]
            start = max(ready, *(free[i] for i in chosen))
            end = start + gpu_hours[server.name] / server.gpus
            for i in chosen:
                free[i] = end
            ends.append(end)
        ready = max(ends, default=ready)
    return ready
