"""AppWorld for real, offline: synthetic tasks generated at test time with AppWorld's own classes
(tests/appworld_synthetic.py), its real engine behind its HTTP server in its own environment, its real evaluation.

The student is a scripted model server (a test double) that writes code blocks; AppWorld runs them and judges the
final database state. Needs `.venv-appworld` (`make appworld-venv`; `make test` makes it and skips these tests
only where PyPI cannot be reached).
"""

import ast
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from scripted_server import ScriptedServer

from amd.agent.agents import ModelAgent, OracleAgent
from amd.agent.loop import Limits
from amd.agent.runner import RunSpec, run_tasks
from amd.benchmarks import processes
from amd.benchmarks.appworld.benchmark import AppWorld, failing_calls
from amd.benchmarks.appworld.server import AppWorldVenv
from amd.core.schema import read_trajectories
from amd.llm import open_model
from amd.memory.build import build_bank
from amd.memory.method import open_memory

REPO = Path(__file__).resolve().parents[1]
BALANCE, TRANSFER = "What is my Venmo balance?", "Send $"
CHILD = "appworld/child.py"
LOGIN = ('passwords = {p["account_name"]: p["password"] for p in apis.supervisor.show_account_passwords()}\n'
         'email = apis.supervisor.show_profile()["email"]\n'
         'token = apis.venmo.login(username=email, password=passwords["venmo"])["access_token"]\n')


@pytest.fixture(scope="module", autouse=True)
def named_confinement():
    """Without bubblewrap, AppWorld runs only under a confinement mode the user names (amd.benchmarks.processes):
    these tests name the strongest there is, as such a user would (the code AppWorld runs is their own script).
    The secrets test runs as a user who names none."""
    with pytest.MonkeyPatch.context() as patch:
        if processes._unavailable("bwrap") is not None:
            patch.setenv(processes.MODE_VARIABLE, processes.confinement_mode())
        yield


@pytest.fixture(scope="session")
def venv():
    venv = AppWorldVenv()
    if not (venv.path / ".amd-installed").exists():
        pytest.skip(f"no AppWorld environment at {venv.path}: `make appworld-venv` (make test builds it and goes "
                    "on without it only where PyPI is unreachable)")
    return venv


@pytest.fixture(scope="session")
def root(venv, tmp_path_factory):
    """Four synthetic tasks (two scenarios, two variants each) in a fresh AppWorld root."""
    root = tmp_path_factory.mktemp("appworld-root")
    subprocess.run([str(venv.python), str(REPO / "tests" / "appworld_synthetic.py"), str(root)], check=True,
                   env=os.environ | {"APPWORLD_CACHE": str(venv.cache)}, capture_output=True, timeout=600)
    return root


@pytest.fixture(scope="module")
def appworld(root):
    benchmark = AppWorld(root=str(root))
    yield benchmark
    benchmark.close()


def code(text: str) -> str:
    return f"I will run this.\n```python\n{text}\n```"


def task_of(request: dict) -> str:
    first_user = next(m["content"] for m in request["messages"] if m["role"] == "user")
    return first_user.split("Task: ", 1)[1]


def coder(plans: dict):
    """A scripted student: plans[instruction prefix](step, last message) -> its reply."""

    def respond(request):
        messages = request["messages"]
        if "JSON array of strings" in messages[-1]["content"]:  # the student decomposes the instruction
            return '["log in to venmo", "read venmo balance"]'
        plan = next(plan for prefix, plan in plans.items() if task_of(request).startswith(prefix))
        return plan(sum(m["role"] == "assistant" for m in messages), messages[-1]["content"])

    return respond


def read_balance_and_answer(step: int, last: str) -> str:
    if step == 0:
        return code(LOGIN + "print(apis.venmo.show_venmo_balance(access_token=token))")
    balance = re.search(r'"venmo_balance": ([0-9.]+)', last).group(1)
    return code(f"apis.supervisor.complete_task(answer={balance})")


def send_the_wrong_amount(step: int, last: str) -> str:
    if step == 0:
        return code(LOGIN + 'friend = "' + re.search(r"\((\S+@\S+)\)", last).group(1) + '"\n'
                    "apis.venmo.create_transaction(receiver_email=friend, amount=1.0, access_token=token)")
    return code("apis.supervisor.complete_task()")


def err_then_recover(step: int, last: str) -> str:
    """A name error, then a wrong password (the API raises), then a wrong key read from a response on the line after
    its call (paper Fig. 9), then the right way."""
    if step == 0:
        return code("print(balance)")
    if step == 1:
        return code('token = apis.venmo.login(username="nobody@example.com", password="wrong")')
    if step == 2:
        return code(LOGIN + "balance = apis.venmo.show_venmo_balance(access_token=token)\nprint(balance['amount'])")
    return read_balance_and_answer(step - 3, last)


def never_finish(step: int, last: str) -> str:
    return "Let me think about it." if step == 0 else code("print('still looking')")


def run(appworld, agent, tasks, out, memory=None, max_steps=40, concurrency=1) -> list[dict]:
    """Tasks through amd's runner with `agent`: "oracle" or a respond function for a scripted model server."""
    limits = Limits(max_steps_per_turn=20, max_steps=max_steps)
    if agent == "oracle":
        spec = RunSpec(appworld, {"spec": "oracle", "kind": "oracle"}, lambda e: OracleAgent.create(e), memory,
                       memory.describe() if memory else {"config": "zero_shot", "bank": None}, limits)
        run_tasks(spec, tasks, out, progress=False)
        return read_trajectories(out)
    with ScriptedServer(agent) as server, open_model(f"vllm:student@{server.url}", {"max_retries": 0}) as model:
        info = {"spec": model.spec, "kind": "model", "model": model.model, "params": {}}
        spec = RunSpec(appworld, info, lambda e: ModelAgent.create(e, model), memory,
                       memory.describe() if memory else {"config": "zero_shot", "bank": None}, limits)
        summary = run_tasks(spec, tasks, out, concurrency=concurrency, progress=False)
    assert not summary.crashed
    return read_trajectories(out)


def steps(record: dict) -> list[dict]:
    return [step for turn in record["turns"] for step in turn["steps"]]


def test_a_scripted_student_solves_one_task_and_fails_another_by_appworlds_verdict(appworld, tmp_path):
    solved, failed = run(appworld, coder({BALANCE: read_balance_and_answer, TRANSFER: send_the_wrong_amount}),
                         ["b41a9ce_1", "5e9d0f1_1"], tmp_path / "s.jsonl")
    assert solved["success"] and solved["status"] == "finished" and solved["n_steps"] == 2
    assert solved["checker"]["num_tests"] == 2 and not solved["checker"]["failures"]
    assert '"venmo_balance": 123.0' in steps(solved)[0]["observations"][0]
    assert [c["name"] for c in steps(solved)[0]["calls"]] == ["supervisor.show_account_passwords",
                                                           "supervisor.show_profile", "venmo.login",
                                                           "venmo.show_venmo_balance"]
    assert not failed["success"] and failed["status"] == "finished"  # completed, but the database is wrong
    assert [f["requirement"] for f in failed["checker"]["failures"]] == [
        "exactly one new transaction of the amount goes to the friend"]
    assert solved["task_group"] == "b41a9ce" and failed["task_group"] == "5e9d0f1"


def test_errors_in_the_students_code_are_observations_and_it_recovers(appworld, tmp_path):
    (record,) = run(appworld, coder({BALANCE: err_then_recover}), ["b41a9ce_2"], tmp_path / "s.jsonl")
    name_error, bad_login, misread, *_ = steps(record)
    assert name_error["error"] and "NameError" in name_error["observations"][0]
    assert bad_login["error"] and "401" in bad_login["observations"][0]
    assert failing_calls(bad_login["code"], bad_login["observations"][0]) == ["venmo.login"]
    assert misread["error"] and "KeyError" in misread["observations"][0]
    # the traceback ends on a line with no API call: the call whose response it read, unless the rule is `line`
    assert failing_calls(misread["code"], misread["observations"][0]) == ["venmo.show_venmo_balance"]
    assert failing_calls(misread["code"], misread["observations"][0], "line") == []
    assert record["success"] and record["n_steps"] == 5  # 57.5 read from the output and answered


def test_a_student_that_never_completes_stops_at_the_step_cap(appworld, tmp_path):
    (record,) = run(appworld, coder({TRANSFER: never_finish}), ["5e9d0f1_2"], tmp_path / "s.jsonl", max_steps=3)
    assert record["status"] == "step_limit" and record["n_steps"] == 3 and not record["success"]
    no_code = steps(record)[0]
    assert no_code["rejected"][0]["reason"].startswith("the reply has no ```python code block")
    assert "code" not in no_code and no_code["error"]
    assert len(record["checker"]["failures"]) == 2  # AppWorld's verdict: nothing sent, task not complete


def test_servers_listen_on_loopback_only_and_one_serves_each_worker(appworld, tmp_path):
    listening = []

    def slow(step, last):  # while both tasks wait on the model, look at the servers
        if step == 0:
            time.sleep(1.5)
            listening.extend(listening_sockets())
        return read_balance_and_answer(step, last)

    run(appworld, coder({BALANCE: slow}), ["b41a9ce_1", "b41a9ce_2"], tmp_path / "s.jsonl", concurrency=2)
    addresses = {address for address, _ in listening}
    assert len(addresses) == 2  # two workers, two servers, a port each
    assert addresses and all(ip == "127.0.0.1" for ip, _ in addresses)
    for ip, port in addresses:
        for other in other_addresses():
            with pytest.raises(OSError):
                socket.create_connection((other, port), timeout=2).close()


def listening_sockets() -> list[tuple[tuple[str, int], int]]:
    """((ip, port), pid) of every socket a server of this process (or the confinement wrapper around it, which
    holds the socket in this machine's network namespace) listens on."""
    servers = [child for child in psutil.Process().children(recursive=True) if CHILD in " ".join(child.cmdline())]
    return [((c.laddr.ip, c.laddr.port), server.pid) for server in servers
            for c in server.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN]


def programs(processes: list[psutil.Process]) -> list[psutil.Process]:
    """The servers themselves among processes, not the confinement wrappers (bwrap, unshare) around them."""
    return [p for p in processes if Path(p.cmdline()[0]).name not in ("bwrap", "unshare")]


def other_addresses() -> list[str]:
    """This machine's non-loopback IPv4 addresses."""
    return [a.address for addrs in psutil.net_if_addrs().values() for a in addrs
            if a.family == socket.AF_INET and not a.address.startswith("127.")]


@pytest.fixture(scope="module")
def oracle(appworld, root, tmp_path_factory):
    """The oracle teacher's trajectories on every task, and the bank distilled from them (rules writer)."""
    tmp = tmp_path_factory.mktemp("oracle")
    records = run(appworld, "oracle", appworld.task_ids(), tmp / "oracle.jsonl")
    build_bank([tmp / "oracle.jsonl"], "amd", "rules", "hash:64", tmp / "bank", benchmark_options={"root": str(root)})
    return records, tmp / "bank"


def test_the_oracle_replays_each_ground_truth_statement_and_appworld_says_success(oracle):
    records, _ = oracle
    assert [r["task_id"] for r in records] == ["b41a9ce_1", "b41a9ce_2", "5e9d0f1_1", "5e9d0f1_2"]
    assert all(r["success"] and r["agent"]["kind"] == "oracle" and r["n_steps"] == 5 for r in records)
    assert steps(records[2])[3]["code"].startswith("apis.venmo.create_transaction(receiver_email=")


def bank_entries(bank: Path, type_name: str) -> list[dict]:
    return [json.loads(line) for line in (bank / f"{type_name}.jsonl").read_text().splitlines()]


def test_memory_from_appworld_trajectories_has_three_types_and_api_calls_as_function_entries(oracle):
    _, bank = oracle
    workflow, subtask, function = (bank_entries(bank, t) for t in ("workflow", "subtask", "function"))
    assert len(workflow) == 4 and len(subtask) >= 8 and len(function) == 20
    assert all(entry["call"].startswith(f"apis.{entry['name']}(") for entry in function)
    login = next(entry for entry in function if entry["name"] == "venmo.login")
    assert login["app"] == "venmo" and {p["name"] for p in login["doc"]["parameters"]} >= {"username", "password"}
    assert all("venmo.login" in entry["insight"] for entry in workflow)  # insights name app.function
    assert any("apis.venmo.login(" in e["code"] and "# -> Execution successful." in e["code"] for e in subtask)


@pytest.mark.parametrize("protocol", ["self_excluded", "shared"])
def test_a_task_never_retrieves_memory_from_a_variant_of_its_own_scenario(appworld, oracle, tmp_path, protocol):
    _, bank = oracle
    memory = open_memory(bank, "wf_st_fn", protocol=protocol, delta={"wf": -1.0, "st": -1.0})
    records = run(appworld, coder({BALANCE: err_then_recover, TRANSFER: send_the_wrong_amount}),
                  ["b41a9ce_1", "5e9d0f1_1"], tmp_path / "s.jsonl", memory=memory)
    injected = {r["task_group"]: r["system_memory"] + [i for s in steps(r) for i in s["injected_memory"]]
                for r in records}
    assert {i["type"] for i in injected["b41a9ce"]} == {"workflow", "subtask", "function"}
    balance_task = next(r for r in records if r["task_group"] == "b41a9ce")
    hints = [{i["query"] for i in step["injected_memory"]} for step in steps(balance_task)]
    assert hints[1] == {"venmo.login"}  # the login error
    if protocol == "shared":  # the misread response: only the balance scenario's own memory calls its function
        assert hints[2] == {"venmo.show_venmo_balance"}
    own = [i for group, items in injected.items() for i in items if i["source_task_id"].startswith(group)]
    if protocol == "self_excluded":
        assert own == []
    else:
        assert own  # the leaky protocol does retrieve its own scenario here: the check above can fail


@pytest.mark.parametrize("kill", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_killing_a_run_mid_task_leaves_no_server_and_the_rerun_loses_nothing(root, venv, tmp_path, kill):
    waiting, go_on = threading.Event(), threading.Event()

    def blocked_transfer(step, last):  # the second task: its server is up, the model never answers
        waiting.set()
        go_on.wait(120)
        return send_the_wrong_amount(step, last)

    out = tmp_path / "run.jsonl"
    env = os.environ | {"AMD_CACHE_DIR": str(tmp_path / "cache")}
    with ScriptedServer(coder({BALANCE: read_balance_and_answer, TRANSFER: blocked_transfer})) as server:
        command = [sys.executable, "-m", "amd.cli", "run", "appworld", "--agent", f"vllm:student@{server.url}",
                   "--benchmark-option", f"root={root}", "--tasks", "b41a9ce_1,5e9d0f1_1", "--out", str(out),
                   "--max-retries", "0", "--no-progress"]
        with open(tmp_path / "first.log", "wb") as log:
            process = subprocess.Popen(command, env=env, stdout=log, stderr=log)
        assert waiting.wait(180), (tmp_path / "first.log").read_text()[-3000:]
        servers = [c for c in psutil.Process(process.pid).children(recursive=True) if CHILD in " ".join(c.cmdline())]
        assert len(programs(servers)) == 1 and len(out.read_text().splitlines()) == 1
        first = json.loads(out.read_text())
        process.send_signal(kill)
        process.wait(30)
        _, alive = psutil.wait_procs(servers, timeout=20)
        assert [s for s in alive if s.status() != psutil.STATUS_ZOMBIE] == []  # gone (or dead, awaiting a reaper)
        go_on.set()
        rerun = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "1 of 2 tasks already finished" in rerun.stderr
    records = read_trajectories(out)
    assert [r["task_id"] for r in records] == ["b41a9ce_1", "5e9d0f1_1"]
    assert records[0] == first and records[0]["success"] and not records[1]["success"]


SPAWNED = ("import json, os, socket\n"
           "def attempt(action):\n"
           "    try:\n"
           "        return action()\n"
           "    except OSError as error:\n"
           "        return f'refused: {error}'\n"
           "def connect(address):\n"
           "    socket.create_connection(address, timeout=3).close()\n"
           "    return 'connected'\n"
           "report = {'env': sorted(os.environ), 'connect': [attempt(lambda: connect(a)) for a in ADDRESSES],\n"
           "          'read': attempt(lambda: open(SECRET).read()),\n"
           "          'write': attempt(lambda: open(OUTSIDE, 'w').write('written'))}\n"
           "open('/tmp/spawned.json', 'w').write(json.dumps(report))\n")


def snoop_then_solve(secret: Path, outside: Path, addresses: list, python: Path):
    """A hostile student: it dumps the environment, reads and writes outside the task's root, spawns a process
    that tries the same and the network past AppWorld's own deny-list and file shims, then solves the task."""
    spawned = f"ADDRESSES, SECRET, OUTSIDE = {addresses!r}, {str(secret)!r}, {str(outside)!r}\n{SPAWNED}"
    attacks = [
        "import os\nprint(dict(os.environ))",
        f"import pathlib\nprint(pathlib.Path({str(secret)!r}).read_text())",
        f"import pathlib\npathlib.Path({str(outside)!r}).write_text('written')\nprint('written')",
        (f"import os\npid = os.posix_spawn({str(python)!r}, ['python', '-c', {spawned!r}], {{}})\n"
         "os.waitpid(pid, 0)\nimport pathlib\nprint(pathlib.Path('/tmp/spawned.json').read_text())"),
    ]

    def plan(step, last):
        return code(attacks[step]) if step < len(attacks) else read_balance_and_answer(step - len(attacks), last)

    return plan


def test_a_step_that_hunts_for_secrets_finds_none_and_the_key_is_in_no_file_the_run_writes(root, venv, tmp_path):
    canary = "sk-canary-appworld-5e1d93"
    secret, outside = tmp_path / "secret.txt", tmp_path / "outside.txt"
    secret.write_text(canary)
    listener = socket.create_server(("0.0.0.0", 0))
    addresses = [(ip, listener.getsockname()[1]) for ip in ["127.0.0.1", *other_addresses()]]
    out, cache = tmp_path / "run.jsonl", tmp_path / "cache"
    env = {name: value for name, value in os.environ.items() if name != processes.MODE_VARIABLE}  # auto: the default
    env |= {"AMD_CACHE_DIR": str(cache), "OPENAI_API_KEY": canary, "AWS_SECRET_ACCESS_KEY": canary}
    with listener, ScriptedServer(coder({BALANCE: snoop_then_solve(secret, outside, addresses, venv.python)})) as server:
        done = subprocess.run([sys.executable, "-m", "amd.cli", "run", "appworld", "--agent",
                               f"vllm:student@{server.url}", "--benchmark-option", f"root={root}", "--tasks",
                               "b41a9ce_1", "--out", str(out), "--max-retries", "0", "--no-progress"],
                              env=env, capture_output=True, text=True, timeout=600, check=False)
        asked = server.chat_requests()
    written = [path for path in tmp_path.rglob("*") if path.is_file() and path != secret]
    assert [path for path in written if canary.encode() in path.read_bytes()] == []
    if processes._unavailable("bwrap") is not None:
        # files cannot be confined here: the run is refused in one line before the model writes any code
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
        assert "amd: error: AppWorld runs the code its model writes, and its files cannot be confined" in done.stderr
        assert f"{processes.MODE_VARIABLE}=" in done.stderr and asked == [] and not out.exists()
        return
    assert done.returncode == 0, done.stderr[-3000:]
    (record,) = read_trajectories(out)
    assert record["success"]  # confined, AppWorld still does its work
    environment, read, _, spawn = (step["observations"][0] for step in steps(record)[:4])
    assert canary not in environment and "OPENAI" not in environment and "AWS" not in environment
    assert set(eval_free_keys(environment)) <= {"PATH", "LANG", "HOME", "TMPDIR", "PWD", "AMD_LIFELINE_FD",
                                                 "APPWORLD_ROOT", "APPWORLD_CACHE"}
    spawned = json.loads(spawn)
    assert "OPENAI_API_KEY" not in spawned["env"]
    assert "FileNotFoundError" in read and spawned["read"].startswith("refused")
    assert spawned["write"].startswith("refused") and not outside.exists()
    assert all(result.startswith("refused") for result in spawned["connect"])
    assert out in written and any(cache in path.parents for path in written)


def eval_free_keys(printed_dict: str) -> list[str]:
    """The keys of a dict as Python prints it, read as literals (nothing is evaluated)."""
    return list(ast.literal_eval(printed_dict.strip()))
