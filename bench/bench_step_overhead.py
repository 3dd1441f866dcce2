"""CPU per model request through the openai SDK, on real BFCL requests (tool docs included), against an instant
server in its own process; and what it would cost to give up either of amd's two deviations from the SDK's usual
path. Measured as the CPU time of the calling thread, so neither the server nor machine load is counted. The three
ways, interleaved request by request so that drifts in machine speed hit all of them alike:

  amd        ChatModel's way: the request JSON built by amd and POSTed through the SDK's own `post` (`content=`),
             without the SDK's nine telemetry headers (X-Stainless-*, dropped with `openai.Omit`), the reply read
             as plain JSON;
  +headers   the same POST with the telemetry headers;
  typed      the SDK's usual `chat.completions.create(...)`: typed transform of messages and tools, pydantic reply.

Then one `chat` call end to end (request building, SDK, reply parsing, cache): cache off, miss, hit.

    .venv/bin/python bench/bench_step_overhead.py [--tasks 10] [--rounds 5]
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import openai
from bench_pipeline_step import server_process
from replay_model import ground_truth_answers, replay_model
from scripted_server import ScriptedServer

from amd.agent.agents import ModelAgent
from amd.agent.hooks import TaskContext
from amd.agent.loop import Limits, run_episode
from amd.benchmarks.base import create_benchmark
from amd.llm import open_model
from amd.llm.client import PER_REQUEST_HEADERS, resolve_params, sdk_client


def recorded_requests(task_ids, cache: bool = False) -> list[dict]:
    """The request bodies of real BFCL episodes run through the agent loop against a replay server (model
    `vllm:bench`). Equal tool lists are one object again, as within an episode, where amd encodes them once."""
    return recorded(task_ids, cache)[0]


def recorded(task_ids, cache: bool = False) -> tuple[list[dict], str]:
    """`recorded_requests`, and the model identity their replies are cached under (the response cache's key)."""
    benchmark, tool_lists = create_benchmark("bfcl"), {}
    with ScriptedServer(replay_model(ground_truth_answers(task_ids))) as server, \
            open_model(f"vllm:bench@{server.url}", {"cache": cache}) as model:
        for task_id in task_ids:
            episode = benchmark.start(task_id)
            run_episode(ModelAgent(model), episode, Limits(), TaskContext(task_id, task_id, episode.instruction))
        bodies = [received.body for received in server.chat_requests()]
        identity = model.identity
    for body in bodies:
        body["tools"] = tool_lists.setdefault(json.dumps(body["tools"]), body["tools"])
    return bodies, identity


def cpu_ms(call, *args) -> float:
    started = time.thread_time()
    call(*args)
    return 1000 * (time.thread_time() - started)


def sdk_ways(url: str) -> dict:
    """The three ways of sending one request body, each a function of the body."""
    client = sdk_client(resolve_params({}), api_key="EMPTY", base_url=url)
    plain = openai.OpenAI(api_key="EMPTY", base_url=url, max_retries=client.max_retries, timeout=client.timeout)

    def encoded(body):
        return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()

    return {
        "amd": lambda body: client.post("/chat/completions", cast_to=object, content=encoded(body),
                                        options={"headers": PER_REQUEST_HEADERS}),
        "+headers": lambda body: plain.post("/chat/completions", cast_to=object, content=encoded(body)),
        "typed": lambda body: plain.chat.completions.create(**body),
    }


def chat_ms(models: dict, bodies) -> dict:
    """Median CPU ms of one `chat` per model, the models called in turn on each body."""
    times = {name: [] for name in models}
    for body in bodies:
        for name, model in models.items():
            times[name].append(cpu_ms(model.chat, body["messages"], body["tools"]))
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5, help="passes over the recorded requests")
    args = parser.parse_args()
    task_ids = [f"multi_turn_base_{i}" for i in range(args.tasks)]
    os.environ["AMD_CACHE_DIR"] = tempfile.mkdtemp(prefix="amd-bench-")
    bodies = recorded_requests(task_ids)
    times = {}
    with server_process(task_ids) as url:
        ways = sdk_ways(url)
        for body in bodies[:10]:  # warm-up: connections, imports, lazy tables
            for send in ways.values():
                send(body)
        for body in bodies * args.rounds:
            for name, send in ways.items():
                times.setdefault(name, []).append(cpu_ms(send, body))
        spec = f"vllm:bench@{url}"
        with open_model(spec, {"cache": False}) as off, open_model(spec) as on:
            chat_ms({"off": off}, bodies[:10])
            chats = chat_ms({"off": off, "miss": on}, bodies)
            chats.update(chat_ms({"hit": on}, bodies))
    size = statistics.mean(len(json.dumps(body)) for body in bodies) / 1000
    print(f"CPU per request, median of {len(bodies) * args.rounds} real BFCL requests (mean {size:.1f} KB) "
          "to an instant server in its own process, calling thread only:")
    for name, values in times.items():
        paired = statistics.median(value - base for value, base in zip(values, times["amd"]))
        print(f"  {name:9s} {statistics.median(values):6.3f} ms   {paired:+.3f} ms per request beside amd's "
              f"(median of paired differences)   p90 {statistics.quantiles(values, n=10)[-1]:.3f} ms")
    print(f"one `chat` call, median over {len(bodies)} requests, CPU of the calling thread:")
    print(f"  cache off        {chats['off']:6.3f} ms  (request)")
    print(f"  cache on, miss   {chats['miss']:6.3f} ms  (key + lookup + request + atomic write)")
    print(f"  cache on, hit    {chats['hit']:6.3f} ms  (key + lookup, no request)")


if __name__ == "__main__":
    main()
