"""amd.trajectory's typed record says exactly what amd/trajectory.schema.json says: the same fields, the same
required ones, at every level."""

import json
import typing
from pathlib import Path

import pytest

from amd import trajectory

SCHEMA = json.loads((Path(trajectory.__file__).parent / "trajectory.schema.json").read_text())
PAIRS = [(trajectory.TrajectoryRecord, SCHEMA), (trajectory.DataVersion, SCHEMA["properties"]["data_version"]),
         (trajectory.AgentInfo, SCHEMA["properties"]["agent"]), (trajectory.MemoryInfo, SCHEMA["properties"]["memory"]),
         (trajectory.Turn, SCHEMA["properties"]["turns"]["items"]), (trajectory.Tokens, SCHEMA["properties"]["tokens"]),
         (trajectory.StepCaps, SCHEMA["properties"]["step_caps"]),
         (trajectory.Step, SCHEMA["$defs"]["step"]), (trajectory.Call, SCHEMA["$defs"]["call"]),
         (trajectory.InjectionRecord, SCHEMA["$defs"]["injection"])]


@pytest.mark.parametrize("typed,schema", PAIRS, ids=[typed.__name__ for typed, _ in PAIRS])
def test_typed_record_mirrors_the_schema(typed, schema):
    hints = typing.get_type_hints(typed)
    assert set(hints) == set(schema["properties"])
    assert typed.__required_keys__ == set(schema.get("required", []))
