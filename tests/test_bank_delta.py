"""A bank records its embedder's calibrated δ and a run uses it unless told otherwise (issue 40): a MiniLM bank run
by hand no longer gets text-embedding-3-small's 0.30 / 0.45."""

from pathlib import Path

import pytest
import yaml
from test_memory_fixtures import all_records, write_jsonl
from test_workflow_args import Wildcards, load_config, parse_shell

from amd.cli import main
from amd.core.errors import AmdError
from amd.core.vocabulary import method_spec
from amd.memory.build import bank_delta, build_bank
from amd.memory.embed import OPENAI_DELTA, LocalMiniLM
from amd.memory.method import open_memory
from amd.workflow.grid import Grid

AMD_TYPES = method_spec("amd").types
CONFIG = Path(__file__).resolve().parents[1] / "config"


@pytest.fixture(scope="module")
def trajectories(tmp_path_factory):
    return write_jsonl(tmp_path_factory.mktemp("delta") / "t.jsonl", all_records())


def test_a_bank_records_the_delta_it_was_built_with_and_a_run_uses_it(trajectories, tmp_path):
    manifest = build_bank([trajectories], "amd", "rules", "hash:64", tmp_path / "bank", delta={"wf": 0.5, "st": 0.6})
    assert manifest["delta"] == {"workflow": 0.5, "subtask": 0.6}
    assert open_memory(tmp_path / "bank", "wf_st").describe()["delta"] == {"workflow": 0.5, "subtask": 0.6}
    told = open_memory(tmp_path / "bank", "wf_st", delta={"wf": 0.1}).describe()["delta"]
    assert told == {"workflow": 0.1, "subtask": 0.6}
    assert open_memory(tmp_path / "bank", "wf_st", delta=0.2).describe()["delta"] == {"workflow": 0.2, "subtask": 0.2}
    plain = build_bank([trajectories], "amd", "rules", "hash:64", tmp_path / "plain")  # no δ known for hash:64
    assert plain["delta"] == {}
    assert open_memory(tmp_path / "plain", "wf_st").describe()["delta"] == {"workflow": 0.30, "subtask": 0.45}


def test_the_delta_a_bank_records_is_the_embedders_calibration_for_the_methods_types():
    assert bank_delta(AMD_TYPES, LocalMiniLM.calibrated_delta, {}) == {"workflow": 0.32, "subtask": 0.33}
    assert bank_delta(AMD_TYPES, LocalMiniLM.calibrated_delta, {"st": 0.4}) == {"workflow": 0.32, "subtask": 0.4}
    assert bank_delta(method_spec("reasoningbank").types, LocalMiniLM.calibrated_delta, {}) == {}
    with pytest.raises(AmdError, match="--delta for rb: the method has no such memory type"):
        bank_delta(AMD_TYPES, {}, {"rb": 0.3})


def test_the_configs_embedder_delta_is_the_calibration_amd_records():
    base = yaml.safe_load((CONFIG / "base.yaml").read_text())["embedders"]["minilm"]
    paper = yaml.safe_load((CONFIG / "paper.yaml").read_text())["embedders"]["te3small"]
    assert base["delta"] == dict(LocalMiniLM.calibrated_delta)
    assert paper["delta"] == OPENAI_DELTA["text-embedding-3-small"]


def test_the_workflow_builds_a_bank_with_its_embedders_calibration_and_runs_with_the_configs_delta():
    """A δ sweep changes the runs' flags, never the bank's build (tests/test_pipeline_workflow.py reruns it)."""
    grid = Grid(load_config())
    cell = next(cell for cell in grid.cells("ablation") if cell["method"] == "amd")
    build = parse_shell(f"amd memory build --trajectories t.jsonl {grid.build_args(Wildcards(cell, seed='0'))} "
                        f"{grid.embedder_args(Wildcards(cell, seed='0'))} --out b")
    assert build.delta is None and build.embedder == "local:all-minilm-l6-v2"


def test_a_bad_build_delta_is_one_line(trajectories, tmp_path, capsys):
    argv = ["memory", "build", "--trajectories", str(trajectories), "--embedder", "hash:64", "--out", str(tmp_path / "bank")]
    assert main([*argv, "--delta", "wf=high"]) == 2
    assert "--delta: bad item 'wf=high'; expected TYPE=NUMBER" in capsys.readouterr().err
