"""Checks that run inside `amd serve-run`, against the real vLLM server; tests/test_vllm_cpu.py reads what they write.

    python tests/vllm_cpu/client_checks.py BASE_URL MODEL OUT.json

- Native tool calls. The 0.5B student never writes Qwen's <tool_call> tags by itself (it writes the call as bare
  JSON, which amd's text parser reads), so for this check its first reply is held to that format by vLLM's
  structured outputs (a regex); larger Qwen students write it unprompted. vLLM's hermes parser must turn it into
  `tool_calls`, amd's ModelAgent must read them as its proposals, the real AgentDojo episode runs them, and the next
  request, carrying amd's assistant message with `tool_calls` and the `tool` message with the result, must be
  accepted (that reply is free).
- Guided decoding. vLLM must accept the `--prompting json` schema of every AgentDojo suite and BFCL class (one it
  cannot compile is an HTTP 400). The banking suite's first replies are returned for the test to validate, and one
  reply held to the schema's call choices alone (the student answers these tasks at once in json mode), with what
  the benchmark's own check of that call says.
- The server's own prefix-cache counters (/metrics), read last.
"""

import copy
import json
import re
import sys
import urllib.request

from amd.agent.agents import ModelAgent
from amd.agent.json_steps import read_step, step_format
from amd.benchmarks.agentdojo import AgentDojo
from amd.benchmarks.bfcl import benchmark as bfcl
from amd.llm import ChatModel, open_model
from amd.llm.client import resolve_params, sdk_client

NATIVE_TASK = "banking/user_task_0"  # "pay the bill 'bill-december-2023.txt'": reading the file comes first
HERMES_CALL = r'<tool_call>\n\{"name": "read_file", "arguments": \{"file_path": "[a-z0-9.-]{1,40}"\}\}\n</tool_call>'
JSON_TASKS = ("banking/user_task_0", "banking/user_task_1")
PARAMS = {"cache": False, "max_tokens": 128}


def native_round_trip(base_url: str, model_name: str) -> dict:
    spec = f"vllm:{model_name}@{base_url}"
    params = resolve_params(PARAMS)
    held = ChatModel(spec=spec, model=model_name, identity=f"vllm:{model_name}", params=params, native_tools=True,
                     client=sdk_client(params, api_key="EMPTY", base_url=base_url),
                     extra_body={"structured_outputs": {"regex": HERMES_CALL}})
    episode = AgentDojo(suite="banking").start(NATIVE_TASK)
    with held, open_model(spec, PARAMS) as free:
        agent = ModelAgent(held)
        agent.begin(episode.tools, "")
        agent.add_user(episode.next_user_message(None))
        first = agent.act()
        outcome = episode.execute(first.proposals)
        agent.observe(first.proposals, outcome)
        agent.model = free
        second = agent.act()
    return {"first": {"error": first.error, "finish_reason": first.finish_reason, "text": first.text,
                      "proposals": [{"name": p.name, "arguments": p.arguments} for p in first.proposals]},
            "observations": outcome.observations,
            "sent_back": [m for m in agent.messages if m["role"] in ("assistant", "tool")][:2],
            "second": {"error": second.error, "finish_reason": second.finish_reason, "text": second.text,
                       "prompt_tokens": second.prompt_tokens}}


def json_schemas_accepted(base_url: str, model_name: str) -> dict:
    tool_sets = {f"agentdojo/{suite}": AgentDojo(suite=suite).start(AgentDojo(suite=suite).task_ids()[0]).tools
                 for suite in ("banking", "slack", "travel", "workspace")}
    tool_sets |= {f"bfcl/{name}": [bfcl.openai_tool(doc) for doc in docs]
                  for name, docs in bfcl._dataset().class_docs.items()}
    results = {}
    with open_model(f"vllm:{model_name}@{base_url}", PARAMS) as model:
        for name, tools in tool_sets.items():
            reply = model.chat([{"role": "user", "content": "Begin."}], response_format=step_format(tools),
                               sampling={"max_tokens": 2})
            results[name] = reply.error
    return results


def json_first_replies(base_url: str, model_name: str) -> list[dict]:
    replies = []
    with open_model(f"vllm:{model_name}@{base_url}", PARAMS | {"prompting": "json"}) as model:
        for task_id in JSON_TASKS:
            episode = AgentDojo(suite="banking").start(task_id)
            agent = ModelAgent(model)
            agent.begin(episode.tools, "")
            agent.add_user(episode.next_user_message(None))
            full = step_format(episode.tools)
            calls_only = copy.deepcopy(full)
            calls_only["json_schema"]["schema"]["anyOf"].pop()  # the answer choice is the last
            for label, fmt in (("first", full), ("call", calls_only)):
                reply = model.chat(agent.messages, response_format=fmt)
                replies.append({"task_id": task_id, "kind": label, "text": reply.text,
                                "finish_reason": reply.finish_reason, "error": reply.error,
                                "schema": full["json_schema"]["schema"],
                                "rejected": episode.execute(read_step(reply.text)[0]).rejected if label == "call"
                                else []})
    return replies


def prefix_cache_counters(base_url: str) -> dict:
    with urllib.request.urlopen(base_url.removesuffix("/v1") + "/metrics", timeout=30) as response:
        text = response.read().decode()
    counters = {}
    for name in ("prefix_cache_queries_total", "prefix_cache_hits_total"):
        found = re.search(rf"^vllm:{name}\{{[^}}]*\}} ([0-9.e+]+)$", text, re.MULTILINE)
        counters[name] = float(found.group(1)) if found else None
    return counters


def main(base_url: str, model_name: str, out: str) -> None:
    results = {"native": native_round_trip(base_url, model_name),
               "json_schemas": json_schemas_accepted(base_url, model_name),
               "json_replies": json_first_replies(base_url, model_name),
               "metrics": prefix_cache_counters(base_url)}
    with open(out, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:4])
