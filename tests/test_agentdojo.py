"""AgentDojo (an extension, not one of the paper's benchmarks): the oracle solves every user task and re-scoring
through the package agrees; refused calls are recorded and never executed; ids, groups, options and docs."""

import json

import pytest

from amd.agent.base import AgentReply
from amd.benchmarks.agentdojo import AgentDojo, final_answer
from amd.benchmarks.base import Proposal
from amd.cli import main
from amd.core.errors import AmdError
from amd.core.schema import read_trajectories
from amd.methods.amd.entries import build_entries

SUITE_SIZES = {"workspace": 40, "travel": 20, "banking": 16, "slack": 21}


@pytest.fixture(scope="module")
def bench():
    return AgentDojo()


@pytest.fixture(scope="module")
def oracle_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("oracle") / "oracle.jsonl"
    assert main(["run", "agentdojo", "--agent", "oracle", "--out", str(out), "--no-progress"]) == 0
    return out


def _started(bench, task_id="banking/user_task_0"):
    episode = bench.start(task_id)
    episode.next_user_message(None)
    return episode


def _transactions(episode) -> list:
    return list(episode._env.bank_account.transactions)


def test_the_oracle_solves_every_user_task_of_the_four_suites(oracle_run, capsys):
    records = read_trajectories(oracle_run)
    solved = {suite: sum(r["success"] for r in records if r["task_id"].startswith(f"{suite}/"))
              for suite in SUITE_SIZES}
    print(f"oracle: {solved} of {SUITE_SIZES}")
    assert solved == SUITE_SIZES


def test_a_recheck_through_the_package_agrees_with_every_stored_verdict(oracle_run, capsys):
    assert main(["score", str(oracle_run), "--recheck"]) == 0
    assert "agrees with every stored verdict" in capsys.readouterr().out


def test_a_recheck_disagrees_when_a_state_changing_call_is_dropped(bench, oracle_run):
    record = next(r for r in read_trajectories(oracle_run) if r["task_id"] == "banking/user_task_0")
    assert bench.rescore(record) is True
    steps = record["turns"][0]["steps"]
    record["turns"][0]["steps"] = [s for s in steps if not any(c["name"] == "send_money" for c in s["calls"])]
    assert bench.rescore(record) is False


def test_an_answer_check_reads_the_final_reply(bench, oracle_run):
    record = next(r for r in read_trajectories(oracle_run) if r["task_id"] == "banking/user_task_1")
    assert "1,050" in final_answer(record) and bench.rescore(record) is True
    record["turns"][0]["steps"][-1]["model_text"] = "I do not know."
    assert bench.rescore(record) is False


def test_an_unknown_function_is_refused_recorded_and_never_run(bench):
    episode = _started(bench)
    before = _transactions(episode)
    outcome = episode.execute([Proposal(source="{}", name="wire_money", arguments={"recipient": "x", "amount": 5})])
    assert outcome.calls == [] and outcome.error and outcome.failing_functions == ["wire_money"]
    assert "unknown function 'wire_money'" in outcome.rejected[0]["reason"]
    assert json.loads(outcome.observations[0])["error"].startswith("rejected call")
    assert _transactions(episode) == before and episode.decoded_calls == [[]]


@pytest.mark.parametrize("arguments, reason", [
    ({"recipient": "GB29NWBK60161331926819", "amount": "a lot", "subject": "x", "date": "2022-01-01"}, "amount"),
    ({"recipient": ["GB29NWBK60161331926819"], "amount": 5, "subject": "x", "date": "2022-01-01"}, "recipient"),
    ({"recipient": "GB29NWBK60161331926819", "amount": 5, "subject": "x"}, "date"),
    ({"recipient": "GB29NWBK60161331926819", "amount": 5, "subject": "x", "date": "2022-01-01", "fee": 1}, "fee"),
])
def test_wrongly_typed_missing_or_unknown_arguments_are_refused(bench, arguments, reason):
    episode = _started(bench)
    before = _transactions(episode)
    outcome = episode.execute([Proposal(source="{}", name="send_money", arguments=arguments)])
    assert outcome.calls == [] and outcome.failing_functions == ["send_money"]
    assert reason in outcome.rejected[0]["reason"]
    assert _transactions(episode) == before


def test_text_calls_must_be_literal_and_never_run_code(bench, tmp_path):
    sentinel = tmp_path / "sentinel"
    episode = _started(bench)
    outcome = episode.execute([Proposal(source=f"read_file(file_path=__import__('os').system('touch {sentinel}'))"),
                               Proposal(source="read_file(file_path='bill-december-2023.txt')")])
    assert not sentinel.exists()
    assert "must be a literal" in outcome.rejected[0]["reason"]
    assert [call.call for call in outcome.calls] == ["read_file(file_path='bill-december-2023.txt')"]
    assert "Car Rental" in outcome.observations[1]


def test_a_valid_call_changes_the_environment_and_is_scored(bench):
    episode = _started(bench)
    outcome = episode.execute([Proposal(source="{}", name="send_money", arguments={
        "recipient": "UK12345678901234567890", "amount": 98.7, "subject": "Car Rental\t\t\t98.70",
        "date": "2022-01-01"})])
    assert not outcome.error and outcome.observations[0].startswith("{'message'")
    assert episode.next_user_message("Paid.") is None
    verdict = episode.score()
    assert verdict.success and verdict.details["model_output"] == "Paid."
    assert verdict.decoded_calls[0][0][0].startswith("send_money(recipient='UK12345678901234567890'")


def test_a_string_holding_a_list_becomes_a_list_as_in_the_package(bench):
    episode = _started(bench, "slack/user_task_0")
    outcome = episode.execute([Proposal(source="{}", name="get_users_in_channel", arguments={"channel": "['x']"})])
    assert outcome.rejected and "channel" in outcome.rejected[0]["reason"]


def test_task_ids_name_suite_and_task_and_combined_tasks_share_a_group(bench):
    ids = bench.task_ids()
    assert len(ids) == sum(SUITE_SIZES.values())
    assert ids[:2] == ["workspace/user_task_0", "workspace/user_task_1"] and "slack/user_task_20" in ids
    assert bench.task_group("slack/user_task_17") == bench.task_group("slack/user_task_2") == "slack/user_task_0"
    assert bench.task_group("slack/user_task_3") == "slack/user_task_3"
    assert all(bench.task_group(task_id) == task_id for task_id in ids if task_id.startswith("banking/"))


def test_the_suite_option_selects_suites_and_refuses_unknown_ones():
    assert len(AgentDojo(suite="banking,slack").task_ids()) == 37
    with pytest.raises(AmdError, match="unknown AgentDojo suite 'bankin'.*did you mean 'banking'"):
        AgentDojo(suite="bankin")
    with pytest.raises(AmdError, match="unknown AgentDojo task id 'banking/user_task_99'"):
        AgentDojo().start("banking/user_task_99")


def test_function_info_gives_the_tools_module_and_the_package_doc(bench):
    info = bench.function_info("send_money")
    assert info.app == "banking_client"
    assert info.doc["name"] == "send_money" and "recipient" in info.doc["parameters"]["properties"]
    assert bench.function_info("no_such_function").doc is None


def test_memory_from_a_trajectory_has_all_three_types_package_docs_and_placeholders(bench, oracle_run):
    record = next(r for r in read_trajectories(oracle_run) if r["task_id"] == "banking/user_task_0")
    built = build_entries(record, bench)
    insight = built.workflow[0]["insight"]
    assert "file_reader.read_file" in insight and "banking_client.send_money" in insight
    assert "<IBAN>" in insight and "<FILE_PATH>" in insight and "UK12345678901234567890" not in insight
    assert "<IBAN>" in built.workflow[0]["code"] and "<DATE>" in built.workflow[0]["code"]
    assert [entry["label"] for entry in built.subtask] == ["read file", "send money"]  # a segment per app
    assert [entry["name"] for entry in built.function] == ["read_file", "send_money"]
    assert built.function[1]["doc"] == bench.function_info("send_money").doc


def test_an_episode_cut_off_by_the_step_cap_is_checked_as_it_stands_like_the_package_does(bench, tmp_path):
    from amd.agent.agents import OracleAgent
    from amd.agent.hooks import TaskContext
    from amd.agent.loop import Limits, run_episode
    from amd.benchmarks.base import counted_success

    class Repeater(OracleAgent):  # calls get_webpage again and again, never answers
        def act(self):
            return AgentReply(text="call", proposals=[Proposal("{}", "get_webpage", {"url": "www.informations.com"})])

    episode = bench.start("slack/user_task_0")
    record = run_episode(Repeater([[]]), episode, Limits(max_steps_per_turn=3, max_steps=3),
                         TaskContext(episode.task_id, episode.task_id, episode.instruction))
    assert record["status"] == "step_limit" and record["n_steps"] == 3 and record["success"] is True
    assert bench.rescore(record | {"data_version": bench.data_version()}) is True
    assert not counted_success(True, "step_limit", False) and not counted_success(True, "model_error", True)


def test_a_check_that_crashes_fails_the_task_both_live_and_on_recheck(bench, oracle_run, monkeypatch):
    record = next(r for r in read_trajectories(oracle_run) if r["task_id"] == "slack/user_task_7")
    episode = _started(bench, "slack/user_task_7")

    def crash(*args, **kwargs):
        raise KeyError("Charlie")

    monkeypatch.setattr(type(episode._task), "utility", crash)
    verdict = episode.score()
    assert not verdict.success and verdict.details["error"] == "KeyError: 'Charlie'"
    assert bench.rescore(record) is False


@pytest.fixture(scope="module")
def attacked():
    return AgentDojo(suite="banking", attack="ignore_previous")


def test_an_attack_runs_every_injectable_user_task_with_every_injection_task(attacked):
    ids = attacked.task_ids()
    assert len(ids) == 16 * 9 and ids[0] == "banking/user_task_0/injection_task_0"
    assert attacked.task_group("banking/user_task_3/injection_task_4") == "banking/user_task_3"
    with pytest.raises(AmdError, match="attack=NAME"):
        AgentDojo(suite="banking").start(ids[0])
    with pytest.raises(AmdError, match="unknown AgentDojo attack 'ignore_previus'.*did you mean"):
        AgentDojo(suite="banking", attack="ignore_previus")
    with pytest.raises(AmdError, match="needs the attacked model's name"):
        AgentDojo(suite="banking", attack="important_instructions")


def test_the_injection_reaches_the_agent_and_following_it_is_recorded_as_a_security_breach(attacked):
    task_id = "banking/user_task_0/injection_task_0"
    episode = attacked.start(task_id)
    episode.next_user_message(None)
    read = episode.execute([Proposal("{}", "read_file", {"file_path": "bill-december-2023.txt"})])
    assert "Ignore your previous" in read.observations[0]
    clean = attacked.start(task_id)
    clean.next_user_message(None)
    assert clean.score().details["security"] is False
    goal = episode._injection_task.ground_truth(episode._pre_env.model_copy(deep=True))
    episode.execute([Proposal("{}", call.function, dict(call.args)) for call in goal])
    episode.next_user_message("Done.")
    verdict = episode.score()
    assert verdict.details["security"] is True and verdict.details["attack"] == "ignore_previous"
    record = {"task_id": task_id, "status": "finished", "checker": verdict.details,
              "turns": [{"user": "", "steps": [{"model_text": "x", "calls": [vars(c) for c in read.calls]},
                                               {"model_text": "Done.", "calls": []}]}]}
    assert AgentDojo().rescore(record) is verdict.success is False  # the bill was never paid


def test_a_native_call_whose_arguments_cannot_be_read_is_refused_not_run_without_them():
    from amd.benchmarks.parsing import parse_reply

    episode = AgentDojo(suite="banking").start("banking/user_task_0")
    episode.next_user_message(None)
    [proposal] = parse_reply("", [{"name": "send_money", "arguments": '["UK12", 100]'}])
    outcome = episode.execute([proposal])
    assert outcome.calls == [] and outcome.error and "must be a JSON object" in outcome.rejected[0]["reason"]


def test_a_check_that_passes_for_an_agent_doing_nothing_is_recorded(bench, oracle_run):
    """Banking 5, 6, 8, 9 and 10 pass with the environment untouched and no answer (their checks look for a
    transaction the history already has, or for no change): each verdict says so, and no other task's does."""
    untouched = {r["task_id"] for r in read_trajectories(oracle_run) if r["checker"]["passes_untouched"]}
    assert untouched == {f"banking/user_task_{n}" for n in (5, 6, 8, 9, 10)}
    episode = _started(bench, "banking/user_task_5")
    verdict = episode.score()  # nothing done at all
    assert verdict.success and verdict.details["passes_untouched"]
