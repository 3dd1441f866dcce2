"""BFCL episodes follow the benchmark protocol: turn order, fresh state, error bookkeeping, data identity."""

import hashlib
import importlib.metadata
import json
from pathlib import Path

import bfcl_eval
import pytest

from amd.benchmarks.base import Proposal, create_benchmark
from amd.benchmarks.bfcl.benchmark import BfclMultiTurn, openai_tool
from amd.core.errors import AmdError

DATA = Path(bfcl_eval.__file__).parent / "data"


def _questions() -> dict:
    with open(DATA / "BFCL_v4_multi_turn_base.json") as handle:
        return {entry["id"]: entry for entry in map(json.loads, handle)}


@pytest.fixture(scope="module")
def bench():
    return create_benchmark("bfcl")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _started(bench, task_id="multi_turn_base_0"):
    episode = bench.start(task_id)
    episode.next_user_message(None)
    return episode


def test_task_ids_are_the_200_base_tasks_in_numeric_order(bench):
    ids = bench.task_ids()
    assert ids == [f"multi_turn_base_{index}" for index in range(200)]
    assert set(ids) == set(_questions())


def test_data_version_identifies_package_and_files(bench):
    version = bench.data_version()
    assert version["package"] == f"bfcl-eval=={importlib.metadata.version('bfcl-eval')}"
    assert version["sha256"] == _sha256(DATA / "BFCL_v4_multi_turn_base.json")
    answers = DATA / "possible_answer" / "BFCL_v4_multi_turn_base.json"
    assert version["ground_truth_sha256"] == _sha256(answers)
    assert version["category"] == "multi_turn_base"


def test_unknown_task_id_and_options_are_clear_errors(bench):
    with pytest.raises(AmdError, match=r"'multi_turn_base_200'.*did you mean"):
        bench.start("multi_turn_base_200")
    with pytest.raises(AmdError, match="no option.*split.*options: harness"):
        BfclMultiTurn(split="test")
    with pytest.raises(AmdError, match="harness must be one of amd, official"):
        BfclMultiTurn(harness="paper")


@pytest.mark.parametrize("task_id", ["multi_turn_base_0", "multi_turn_base_57", "multi_turn_base_199"])
def test_user_turns_come_in_order_then_none(bench, task_id):
    entry = _questions()[task_id]
    episode = bench.start(task_id)
    assert episode.instruction == entry["question"][0][0]["content"]
    messages = []
    while (message := episode.next_user_message("done")) is not None:
        messages.append(message)
    assert messages == [turn[0]["content"] for turn in entry["question"]]
    assert episode.next_user_message(None) is None
    assert len(episode.decoded_calls) == len(messages)


def test_tools_are_openai_functions_of_the_involved_classes(bench):
    episode = bench.start("multi_turn_base_0")
    names = [tool["function"]["name"] for tool in episode.tools]
    assert names == [doc["name"] for doc in episode.tool_docs]
    assert {"cd", "post_tweet"} <= set(names) and "add" not in names  # GorillaFileSystem + TwitterAPI only
    gorilla_types = {"dict", "float", "tuple", "any"}

    def types(schema):
        found = {schema["type"]} if "type" in schema else set()
        subschemas = list(schema.get("properties", {}).values())
        for sub in subschemas + ([schema["items"]] if "items" in schema else []):
            found |= types(sub)
        return found

    assert all(tool["type"] == "function" and tool["function"]["parameters"]["type"] == "object"
               and not types(tool["function"]["parameters"]) & gorilla_types for tool in episode.tools)


def test_gorilla_types_map_to_json_schema():
    doc = {"name": "f", "description": "d", "parameters": {"type": "dict", "required": ["a"], "properties": {
        "a": {"type": "float", "description": "x", "default": 1.5},
        "b": {"type": "array", "items": {"type": "tuple", "items": {"type": "dict", "properties": {}}}},
        "c": {"type": "any"}}}}
    parameters = openai_tool(doc)["function"]["parameters"]
    assert parameters == {"type": "object", "required": ["a"], "properties": {
        "a": {"type": "number", "description": "x", "default": 1.5},
        "b": {"type": "array", "items": {"type": "array", "items": {"type": "object", "properties": {}}}},
        "c": {}}}
    assert doc["parameters"]["type"] == "dict"  # the raw doc is left as it was


def test_each_episode_starts_from_the_initial_state(bench):
    first = _started(bench)
    first.execute([Proposal(source="cd(folder='document')"), Proposal(source="mkdir(dir_name='temp')")])
    assert "temp" in first.execute([Proposal(source="ls()")]).observations[0]
    second = _started(bench)
    second.execute([Proposal(source="cd(folder='document')")])
    assert "temp" not in second.execute([Proposal(source="ls()")]).observations[0]
    assert "temp" in first.execute([Proposal(source="ls()")]).observations[0]  # no sharing between episodes


def test_backend_errors_set_error_and_failing_functions(bench):
    episode = _started(bench)
    outcome = episode.execute([Proposal(source="pwd()"), Proposal(source="cd(folder='nowhere')")])
    assert outcome.error and outcome.failing_functions == ["cd"]
    assert "No such file or directory" in json.loads(outcome.observations[1])["error"]
    assert [call.call for call in outcome.calls] == ["pwd()", "cd(folder='nowhere')"]  # executed, then failed
    crashed = episode.execute([Proposal(source="x", name="mkdir", arguments={})])  # missing required argument
    assert crashed.error and crashed.failing_functions == ["mkdir"]
    assert crashed.observations[0].startswith("Error during execution: ")


def test_structured_calls_execute_and_record_canonical_strings(bench):
    episode = _started(bench)
    proposal = Proposal(source='{"name": "cd"}', name="cd", arguments={"folder": "document"})
    outcome = episode.execute([proposal])
    assert not outcome.error and outcome.calls[0].call == "cd(folder='document')"
    assert json.loads(outcome.observations[0]) == {"current_working_directory": "document"}


def test_decoded_calls_follow_turns_and_steps(bench):
    episode = bench.start("multi_turn_base_0")
    with pytest.raises(AmdError, match="before the first user turn"):
        episode.execute([Proposal(source="ls()")])
    episode.next_user_message(None)
    episode.execute([Proposal(source="ls()"), Proposal(source="pwd()")])
    episode.execute([])
    episode.execute([Proposal(source="nope()")])
    episode.next_user_message("ok")
    episode.execute([Proposal(source="cd(folder='document')")])
    assert episode.decoded_calls == [[["ls()", "pwd()"]], [["cd(folder='document')"]]]


def test_unfinished_run_is_padded_and_fails(bench):
    episode = _started(bench)
    verdict = episode.score()
    assert not verdict.success
    assert verdict.decoded_calls == [[], [], [], []]
    assert verdict.details["error_type"] == "multi_turn:empty_turn_model_response"
    json.dumps(verdict.details)


def test_scoring_leaves_no_instances_in_the_checker_globals(bench):
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils

    before = set(vars(multi_turn_utils))
    for _ in range(3):
        _started(bench).score()
    assert set(vars(multi_turn_utils)) == before


@pytest.mark.parametrize("raw", ['"ls()"', '["archive"]', "ls()", "{broken", '"mkdir(dir_name=\'x\')"'])
def test_native_calls_with_unreadable_arguments_are_refused_never_run_without_them(bench, raw):
    """Arguments given as a string of code or as a list once ran `ls()` and `mkdir()` with no arguments."""
    from amd.benchmarks.parsing import parse_reply

    episode = _started(bench)
    for name in ("ls", "mkdir"):
        [proposal] = parse_reply("", [{"name": name, "arguments": raw}])
        outcome = episode.execute([proposal])
        assert outcome.calls == [] and outcome.error and outcome.failing_functions == [name]
        assert "rejected call" in outcome.observations[0] and outcome.rejected[0]["text"] == proposal.source
    assert episode.decoded_calls == [[]]  # nothing reached the checker
    [text_call] = parse_reply('{"name": "mkdir", "arguments": ["archive"]}', [])
    assert text_call.malformed and episode.execute([text_call]).calls == []


def test_native_calls_with_no_or_null_arguments_run_with_none(bench):
    from amd.benchmarks.parsing import parse_reply

    episode = _started(bench)
    for raw in ("", "{}", "null"):
        [proposal] = parse_reply("", [{"name": "pwd", "arguments": raw}])
        assert episode.execute([proposal]).calls[0].call == "pwd()"
