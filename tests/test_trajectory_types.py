"""amd.core.trajectory's typed record says exactly what amd/core/trajectory.schema.json says: the same fields, the same
required ones, at every level; an older file reads as a current record and stays as it is; a run's settings at
their defaults are left out, so older runs are the same run."""

import json
import typing
from pathlib import Path

import pytest

from amd.core import trajectory
from amd.core.schema import read_trajectories
from amd.core.vocabulary import AGENT_PARAM_DEFAULTS, method_spec

SCHEMA = json.loads((Path(trajectory.__file__).parent / "trajectory.schema.json").read_text())
PAIRS = [(trajectory.TrajectoryRecord, SCHEMA), (trajectory.DataVersion, SCHEMA["properties"]["data_version"]),
         (trajectory.AgentInfo, SCHEMA["properties"]["agent"]), (trajectory.MemoryInfo, SCHEMA["properties"]["memory"]),
         (trajectory.Turn, SCHEMA["properties"]["turns"]["items"]), (trajectory.Tokens, SCHEMA["properties"]["tokens"]),
         (trajectory.StepCaps, SCHEMA["properties"]["step_caps"]),
         (trajectory.Step, SCHEMA["$defs"]["step"]), (trajectory.Call, SCHEMA["$defs"]["call"]),
         (trajectory.InjectionRecord, SCHEMA["$defs"]["injection"]),
         (trajectory.MemoryQuery, SCHEMA["properties"]["memory_queries"]["items"]),
         (trajectory.MemoryCalls, SCHEMA["properties"]["memory_calls"]),
         (trajectory.UserCalls, SCHEMA["properties"]["user_calls"])]


@pytest.mark.parametrize("typed,schema", PAIRS, ids=[typed.__name__ for typed, _ in PAIRS])
def test_typed_record_mirrors_the_schema(typed, schema):
    hints = typing.get_type_hints(typed)
    assert set(hints) == set(schema["properties"])
    assert typed.__required_keys__ == set(schema.get("required", []))


def test_a_record_is_its_run_header_and_its_episode_part():
    header, episode = typing.get_type_hints(trajectory.RunHeader), typing.get_type_hints(trajectory.EpisodeRecord)
    assert not set(header) & set(episode)
    assert set(header) | set(episode) | {"memory_calls"} == set(typing.get_type_hints(trajectory.TrajectoryRecord))


def older_record(task_id: str, params: dict, memory: dict) -> dict:
    """A record as files written before task groups, prefix-cache counts, step caps and retrieval queries hold it."""
    return {"schema": "amd.trajectory/1", "task_id": task_id, "benchmark": "counter",
            "data_version": {"package": "fixture", "sha256": "0" * 64},
            "agent": {"spec": "vllm:student@http://127.0.0.1:1/v1", "kind": "model", "model": "student",
                      "params": params},
            "memory": memory, "instruction": "Add one to the counter.",
            "turns": [{"user": "Turn 1", "steps": [{"model_text": "Done.", "calls": [], "observations": [],
                                                    "error": False}]}],
            "decoded_calls": [[]], "success": False, "checker": {}, "status": "finished", "error": None,
            "n_steps": 1, "tokens": {"prompt": 3, "completion": 1}, "wall_time_s": 0.1}


def test_an_older_file_reads_with_the_fields_added_since_and_stays_as_it_is(tmp_path):
    path = tmp_path / "old.jsonl"
    path.write_text(json.dumps(older_record("count_1_0", {"temperature": 0.0}, {"config": "zero_shot", "bank": None}))
                    + "\n")
    before = path.read_bytes()
    (record,) = read_trajectories(path)
    assert record["task_group"] == "count_1_0" and record["tokens"] == {"prompt": 3, "completion": 1, "cached_prompt": 0}
    assert "memory_queries" not in record and "step_caps" not in record  # absent where nothing was recorded
    assert path.read_bytes() == before
    current = older_record("count_1_1", {}, {"config": "zero_shot", "bank": None}) | {"task_group": "count_1"}
    current["tokens"]["cached_prompt"] = 2
    assert trajectory.upgrade(json.loads(json.dumps(current))) == current


def test_a_setting_at_its_default_is_left_out_and_an_older_run_is_the_same_run():
    params = {"temperature": 0.0, "max_tokens": 512, "seed": 0}
    asked = trajectory.recorded(params | {"prompting": "amd", "think": False}, AGENT_PARAM_DEFAULTS)
    assert asked == params and list(asked) == ["temperature", "max_tokens", "seed"]
    assert trajectory.recorded(params | {"think": True}, AGENT_PARAM_DEFAULTS) == params | {"think": True}
    defaults = method_spec("amd").record_defaults
    older = {"config": "wf_st_fn", "per_turn": False}
    assert trajectory.same_setting(older, older | {"placement": "after", "fn_gate": "always"}, defaults)
    assert not trajectory.same_setting(older, older | {"placement": "before"}, defaults)
    assert not trajectory.same_setting(older, older | {"per_turn": True}, defaults)
