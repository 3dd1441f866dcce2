"""AppWorld's own way of running and judging an agent, on a scripted model, for tests/test_appworld_agreement.py.

Run by the AppWorld virtual environment's Python (it imports `appworld`):

    APPWORLD_CACHE=... .venv-appworld/bin/python tests/appworld_own_loop.py ROOT MODEL_URL BLOCKS...

For every task of ROOT's test_normal it opens AppWorld's in-process world (`AppWorld(task_id, experiment_name)`),
asks the model at MODEL_URL for a reply, runs its code with `world.execute` and shows the output back, until
`world.task_completed()` or 40 steps, as the ACE agents of the paper's release loop (BLOCKS `first`: only a
reply's first ```python block runs, as ACE's `ignore_multiple_calls`; `all`: every block, joined; one experiment
per BLOCKS given). Then it judges each task with AppWorld's own evaluation, `world.evaluate()` (its
`evaluate_task` over the world's final state), and prints {BLOCKS: {task id: success}} as JSON. (`appworld evaluate` would rebuild the final state from the saved changes
over the release's base databases, which generated tasks do not have.) The conversation has the shape amd's
scripted students read: a system message, the task as "Task: ..." after the supervisor's details, "Output:"
messages with each block's output.
"""

import json
import os
import re
import sys
import urllib.request
import uuid

MAX_STEPS = 40
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def reply(url: str, messages: list[dict]) -> str:
    body = json.dumps({"model": "student", "messages": messages}).encode()
    request = urllib.request.Request(f"{url}/chat/completions", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as answer:
        return json.load(answer)["choices"][0]["message"]["content"] or ""


def code_of(text: str, blocks: str) -> str:
    found = [block.strip() for block in BLOCK.findall(text)]
    if not found:
        return ""
    return found[0] if blocks == "first" else "\n\n".join(found)


def solve(world, url: str, blocks: str) -> None:
    person = world.task.supervisor
    task = (f"I am your supervisor: {person.first_name} {person.last_name}, email {person.email}, phone number "
            f"{person.phone_number}.\nTask: {world.task.instruction}")
    messages = [{"role": "system", "content": "You write Python for AppWorld."}, {"role": "user", "content": task}]
    for _ in range(MAX_STEPS):
        text = reply(url, messages)
        output = world.execute(code_of(text, blocks))
        messages += [{"role": "assistant", "content": text}, {"role": "user", "content": f"Output:\n```\n{output}\n```"}]
        if world.task_completed():
            return


def main(root: str, url: str, *modes: str) -> None:
    os.environ["APPWORLD_ROOT"] = root
    from appworld import AppWorld, load_task_ids
    from appworld.common.path_store import path_store

    path_store.update_root(root)
    verdicts = {}
    for blocks in modes:
        experiment = f"own-loop-{blocks}-{uuid.uuid4().hex[:8]}"
        for task_id in load_task_ids("test_normal"):
            with AppWorld(task_id=task_id, experiment_name=experiment) as world:
                solve(world, url, blocks)
                verdicts.setdefault(blocks, {})[task_id] = world.evaluate().success
    print(json.dumps(verdicts))


if __name__ == "__main__":
    main(*sys.argv[1:])
