"""amd's AppWorld verdicts against AppWorld's own: the same scripted student, run once through `amd run`'s path (the
AppWorld server amd starts, amd's agent and loop) and once through AppWorld's in-process world in its own
environment with a plain loop of its own (tests/appworld_own_loop.py), each task judged by AppWorld's evaluation, on
the four generated tasks (tests/appworld_synthetic.py).

Under amd's default harness a reply's code blocks all run (joined); under `harness=paper` only the first runs, as
in the ACE agents of the paper's release. The own loop runs both ways, so each of amd's harnesses is compared with
the loop it stands for; one task tells the two apart (a reply that pays, then pays again in a second block).
"""

import json
import os
import re
import subprocess

from scripted_server import ScriptedServer
from test_appworld import (  # noqa: F401 - the fixtures: their session's generated tasks
    BALANCE,
    LOGIN,
    TRANSFER,
    code,
    coder,
    err_then_recover,
    named_confinement,
    root,
    run,
    send_the_wrong_amount,
    venv,
)

from amd.benchmarks.appworld.benchmark import AppWorld

REPO_TESTS = os.path.dirname(os.path.abspath(__file__))


def pay_then_pay_again(step: int, last: str) -> str:
    """The right transfer in a first block, and the same transfer again in a second block of the same reply."""
    if step == 0:
        friend = re.search(r"\((\S+@\S+)\)", last).group(1)
        right = LOGIN + f'apis.venmo.create_transaction(receiver_email="{friend}", amount=42.0, access_token=token)'
        again = right.splitlines()[-1]
        return f"{code(right)}\nAnd once more:\n```python\n{again}\n```"
    return code("apis.supervisor.complete_task()")


# instruction prefix -> plan: both balance tasks (a name error and a wrong login first), the $42.00 transfer, the $17.25
# transfer
PLANS = {BALANCE: err_then_recover, f"{TRANSFER}42.00": pay_then_pay_again, f"{TRANSFER}17.25": send_the_wrong_amount}


def own_verdicts(venv, root) -> dict:  # noqa: F811 - venv, root: the fixtures' values
    """{blocks: {task id: success}} of AppWorld's own loop and evaluation, for both block rules."""
    with ScriptedServer(coder(PLANS)) as server:
        done = subprocess.run([str(venv.python), os.path.join(REPO_TESTS, "appworld_own_loop.py"), str(root),
                               server.url, "all", "first"], check=False,
                              env=os.environ | {"APPWORLD_CACHE": str(venv.cache)}, capture_output=True, text=True,
                              timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def amd_records(root, tmp_path, **options) -> dict:  # noqa: F811
    benchmark = AppWorld(root=str(root), **options)
    try:
        records = run(benchmark, coder(PLANS), benchmark.task_ids(), tmp_path / f"{len(options)}.jsonl")
    finally:
        benchmark.close()
    return {record["task_id"]: record for record in records}


def test_amds_verdicts_equal_appworlds_own_evaluation_under_each_harness(venv, root, tmp_path):  # noqa: F811
    default = amd_records(root, tmp_path)
    paper = amd_records(root, tmp_path, harness="paper", output_chars="60")  # short enough to cut a traceback
    ours = {blocks: {task: record["success"] for task, record in records.items()}
            for blocks, records in (("all", default), ("first", paper))}
    theirs = own_verdicts(venv, root)
    assert ours == theirs
    assert theirs["first"] == {"b41a9ce_1": True, "b41a9ce_2": True, "5e9d0f1_1": True, "5e9d0f1_2": False}
    assert theirs["all"]["5e9d0f1_1"] is False  # the second transfer ran too: the two rules give other verdicts
    paid = [turn["steps"][0]["code"] for turn in (default["5e9d0f1_1"]["turns"][0], paper["5e9d0f1_1"]["turns"][0])]
    assert paid[0].count("create_transaction") == 2 and paid[1].count("create_transaction") == 1
    name_error = paper["b41a9ce_1"]["turns"][0]["steps"][0]["observations"][0]
    assert len(name_error.split("\n[")[0]) == 60 and name_error.endswith("more characters not shown]")
    assert paper["b41a9ce_1"]["data_version"]["harness"] == {
        "guide": "paper", "code_blocks": "first", "output_chars": 60, "history_chars": 50_000, "step_cap": "scored"}
    assert "harness" not in default["b41a9ce_1"]["data_version"]
