"""AppWorld's adapter without AppWorld: code blocks read with ast (calls, failing calls, oracle blocks), the
code-action reply parser, the loop's code-episode semantics, and the errors that name missing data."""

import pytest

from amd.agent.hooks import TaskContext
from amd.agent.loop import Limits, run_episode
from amd.benchmarks.appworld.benchmark import AppWorld, api_calls, failing_calls, solution_blocks
from amd.benchmarks.base import CODE, Episode, Proposal, StepOutcome, Verdict
from amd.benchmarks.parsing import NO_CODE, parse_code_reply
from amd.core.errors import AmdError

BLOCK = """passwords = {p["account_name"]: p["password"] for p in apis.supervisor.show_account_passwords()}
token = apis.venmo.login(username="a@b.com", password=passwords["venmo"])["access_token"]
for page in range(3):
    apis.venmo.show_transactions(access_token=token, page_index=page, limit=20)
"""
# What AppWorld's execute answered when the login of a block like BLOCK failed (from a real run).
LOGIN_FAILED = """Execution failed. Traceback:
  File "<python-input>", line 2, in <module>
    token = apis.venmo.login(username="a@b.com", password=passwords["venmo"])["access_token"]
            ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
Exception: Response status code is 401:
{"message":"Invalid credentials"}"""


def test_api_calls_are_read_in_source_order_with_their_literal_arguments():
    calls = api_calls(BLOCK)
    assert [call.name for call in calls] == ["supervisor.show_account_passwords", "venmo.login",
                                             "venmo.show_transactions"]
    assert calls[1].arguments == {"username": "a@b.com", "password": None}  # a variable is not a literal
    assert calls[2].arguments == {"access_token": None, "page_index": None, "limit": 20}
    assert calls[1].call == 'apis.venmo.login(username="a@b.com", password=passwords["venmo"])'
    assert api_calls("print(apis.venmo)\nrequester.get('x')\nfoo.apis.venmo.login()") == []
    assert api_calls("apis.venmo.login(") == []  # a syntax error: AppWorld reports it, nothing is read


def test_a_value_json_cannot_hold_is_not_kept_as_a_literal():
    assert api_calls("apis.x.y(a={1, 2}, b=(1, 2), c=b'x')")[0].arguments == {"a": None, "b": [1, 2], "c": None}


def test_the_failing_call_is_the_api_call_on_the_line_where_the_traceback_ends():
    assert failing_calls(BLOCK, LOGIN_FAILED) == ["venmo.login"]
    name_error = 'Execution failed. Traceback:\n  File "<python-input>", line 4, in <module>\nNameError: x'
    assert failing_calls("x = 1\ny = 2\nz = 3\nprint(x + q)", name_error) == []
    assert failing_calls(BLOCK, "Execution failed. Traceback:\nSyntax error in line:\n...") == []


def test_an_error_on_a_line_without_an_api_call_is_the_call_whose_response_it_read():
    """The paper's Fig. 9: the student reads an API's response with the wrong key, on a later line."""
    block = ('history = apis.venmo.show_transactions(\n    access_token=apis.venmo.login(username="a")["token"])\n'
             'total = 0\nfor item in history:\n    total += item["amount"]\n')
    key_error = ('Execution failed. Traceback:\n  File "<python-input>", line 5, in <module>\n'
                 '    total += item["amount"]\nKeyError: \'amount\'')
    assert failing_calls(block, key_error) == ["venmo.show_transactions"]  # item <- history <- the outer call
    assert failing_calls(block, key_error, "line") == []  # the earlier rule: only a call on that line
    on_line = key_error.replace("line 5", "line 2")
    assert failing_calls(block, on_line) == ["venmo.show_transactions", "venmo.login"]


def traceback_at(line: int, error: str) -> str:
    return f'Execution failed. Traceback:\n  File "<python-input>", line {line}, in <module>\n{error}'


LOGIN = 'token = apis.venmo.login(username="a@b.com", password="pw")["access_token"]\n'


def test_the_failing_function_is_the_call_whose_result_the_failing_line_reads_not_the_last_one_above():
    """Issue 40's three tracebacks: a misread response two calls back, an error no API call caused, and a read in a
    loop of a response assigned below it."""
    misread = (LOGIN + 'when = "today"\nbalance = apis.venmo.show_venmo_balance(access_token=token)\n'
               'cards = apis.venmo.show_payment_cards(access_token=token)\nprint(len(cards))\n'
               'print(balance["balance"])\n')
    assert failing_calls(misread, traceback_at(6, "KeyError: 'balance'")) == ["venmo.show_venmo_balance"]
    not_an_api = (LOGIN + 'history = apis.venmo.show_transactions(access_token=token)\nfrom datetime import datetime\n'
                  'day = datetime.strptime("2023-13-45", "%Y-%m-%d")\n')
    assert failing_calls(not_an_api, traceback_at(4, "ValueError: time data does not match")) == []
    loop = (LOGIN + 'for index in range(3):\n    if index > 0:\n        print(page["items"])\n'
            '    page = apis.venmo.show_transactions(access_token=token, page_index=index)\n')
    assert failing_calls(loop, traceback_at(4, "KeyError: 'items'")) == ["venmo.show_transactions"]
    through = LOGIN + 'found = apis.venmo.search_users(access_token=token, query="Bo")\nfirst = found[0]\nprint(first["id"])\n'
    assert failing_calls(through, traceback_at(4, "KeyError: 'id'")) == ["venmo.search_users"]  # first <- found


SOLUTION = '''# Canary String: not a statement
from collections import Counter


def helper(items):
    return Counter(items)


def solution(apis, requester):
    """Ground truth."""
    profile = apis.supervisor.show_profile()
    for item in helper([1, 1]):
        print(item)
    apis.supervisor.complete_task(answer=profile["email"])
'''


def test_a_ground_truth_solution_replays_statement_by_statement_after_its_header():
    blocks = solution_blocks(SOLUTION, "t_1")
    assert blocks[0] == "from collections import Counter\ndef helper(items):\n    return Counter(items)"
    assert blocks[1:] == ["profile = apis.supervisor.show_profile()",
                          "for item in helper([1, 1]):\n    print(item)",
                          "apis.supervisor.complete_task(answer=profile['email'])"]


def test_a_solution_that_returns_early_runs_as_one_block_like_appworlds_own_verification():
    early = "def solution(apis, requester):\n    if apis.x.y():\n        return\n    apis.supervisor.complete_task()\n"
    assert solution_blocks(early, "t_1") == [early.strip() + "\n\nsolution(apis, requester)"]
    nested = "def solution(apis, requester):\n    def f():\n        return 1\n    print(f())\n"
    assert solution_blocks(nested, "t_1") == ["def f():\n    return 1", "print(f())"]
    with pytest.raises(AmdError, match="defines no solution"):
        solution_blocks("def other(apis):\n    pass\n", "t_1")


def test_a_code_reply_is_its_python_blocks_and_a_reply_without_one_is_refused():
    reply = "Let me look.\n```python\nx = 1\n```\nthen\n```py\nprint(x)\n```\n```json\n{}\n```"
    assert [(p.code, p.malformed) for p in parse_code_reply(reply)] == [("x = 1\n\nprint(x)", None)]
    refused = parse_code_reply("I am done.")
    assert refused[0].code is None and refused[0].malformed == NO_CODE


class CodeEpisode(Episode):
    """One user turn; each code step appends to a log; `finish` in the code ends the task."""

    action_format = CODE
    caps_turns = False
    guide = "Write code."

    def __init__(self):
        self.tools = []
        self.task_id, self.instruction, self.asked, self.ran = "t_1", "do it", False, []

    def next_user_message(self, last_agent_reply):
        if self.asked:
            return None
        self.asked = True
        return "do it"

    def execute(self, proposals):
        self.ran += [p.code for p in proposals]
        return StepOutcome(observations=["ok"], code=proposals[0].code, finished="finish" in proposals[0].code)

    def reference_turns(self):
        return None

    def score(self):
        return Verdict(success="finish" in (self.ran or [""])[-1], details={}, decoded_calls=[])


class ScriptedAgent:
    needs_model = True

    def __init__(self, codes):
        self.codes = list(codes)

    def begin(self, tools, memory_text, memory_first=False):
        pass

    def add_user(self, text, memory_text="", memory_in_system=False):
        pass

    def act(self):
        from amd.agent.base import AgentReply

        code = self.codes.pop(0)
        return AgentReply(text=code, proposals=[Proposal(source=code, code=code)])

    def observe(self, proposals, outcome, hint=""):
        pass

    def student_chat(self):
        return None


def test_a_code_episode_ends_when_the_environment_says_so_and_has_only_the_task_cap():
    task = TaskContext("t_1", "t", "do it")
    done = run_episode(ScriptedAgent(["a = 1", "b = 2", "finish()"]), CodeEpisode(), Limits(2, 5), task)
    assert done["status"] == "finished" and done["success"] and done["n_steps"] == 3  # 3 > the per-turn cap 2
    assert [step["code"] for step in done["turns"][0]["steps"]] == ["a = 1", "b = 2", "finish()"]
    capped = run_episode(ScriptedAgent(["x"] * 9), CodeEpisode(), Limits(2, 5), task)
    assert capped["status"] == "step_limit" and capped["n_steps"] == 5 and not capped["success"]
    assert capped["step_caps"] == {"max_steps": 5, "max_steps_per_turn": 5}  # a code world's turns: the task's cap


def test_missing_data_is_named_at_once(tmp_path, monkeypatch):
    monkeypatch.delenv("APPWORLD_ROOT", raising=False)
    with pytest.raises(AmdError, match="APPWORLD_ROOT"):
        AppWorld()
    with pytest.raises(AmdError, match=f"{tmp_path}/data is missing"):
        AppWorld(root=str(tmp_path))
    (tmp_path / "data" / "datasets").mkdir(parents=True)
    (tmp_path / "data" / "datasets" / "dev.txt").write_text("a_1\n")
    with pytest.raises(AmdError, match="test_normal.txt is missing; datasets here: dev"):
        AppWorld(root=str(tmp_path))
    with pytest.raises(AmdError, match="1 tasks of dev have no .*specs.json, e.g. a_1"):
        AppWorld(root=str(tmp_path), dataset="dev")
    with pytest.raises(AmdError, match=r"no option \['suite'\]"):
        AppWorld(root=str(tmp_path), suite="x")

