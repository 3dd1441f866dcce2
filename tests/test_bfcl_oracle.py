"""Ground truth replayed one call per step passes the official checker on all 200 tasks; rescoring agrees."""

import pytest

from amd.benchmarks.bfcl.benchmark import BfclMultiTurn, rescore
from amd.core.errors import AmdError


def _replay(episode, skip: str | None = None):
    """Run the episode's reference calls one per step (optionally leaving one out) and score it."""
    reference = episode.reference_turns()
    while episode.next_user_message(None) is not None:
        for proposal in reference[len(episode.decoded_calls) - 1]:
            if proposal.source == skip:
                continue
            outcome = episode.execute([proposal])
            assert len(outcome.calls) == 1 and not outcome.rejected, proposal.source
    return episode.score()


def _record(bench, task_id, verdict):
    return {"task_id": task_id, "decoded_calls": verdict.decoded_calls, "data_version": bench.data_version()}


@pytest.fixture(scope="module")
def bench():
    return BfclMultiTurn()


@pytest.fixture(scope="module")
def oracle_verdicts(bench):
    return {task_id: _replay(bench.start(task_id)) for task_id in bench.task_ids()}


def test_every_task_passes_when_the_ground_truth_is_replayed(oracle_verdicts):
    failed = {task_id: verdict.details for task_id, verdict in oracle_verdicts.items() if not verdict.success}
    assert len(oracle_verdicts) == 200 and failed == {}


def test_rescoring_stored_decoded_calls_agrees(bench, oracle_verdicts):
    disagree = [task_id for task_id, verdict in oracle_verdicts.items()
                if rescore(_record(bench, task_id, verdict)) != verdict.details]
    assert disagree == []


def test_positional_ground_truth_becomes_keywords(oracle_verdicts):
    assert "sort(file_name='final_report.pdf')" in oracle_verdicts["multi_turn_base_0"].decoded_calls[2][0]


def test_dropping_a_state_changing_call_fails_both_ways(bench):
    verdict = _replay(bench.start("multi_turn_base_0"), skip="mkdir(dir_name='temp')")
    assert not verdict.success
    assert verdict.details["error_type"].startswith("multi_turn:")
    assert rescore(_record(bench, "multi_turn_base_0", verdict))["valid"] is False


def test_rescore_refuses_unsafe_or_mismatched_records(bench, tmp_path):
    sentinel = tmp_path / "sentinel"
    hostile = {"task_id": "multi_turn_base_0",
               "decoded_calls": [[[f"__import__('os').system('touch {sentinel}')"]]]}
    with pytest.raises(AmdError, match="refused"):
        rescore(hostile)
    assert not sentinel.exists()
    stale = {"task_id": "multi_turn_base_0", "decoded_calls": [], "data_version": {"sha256": "0" * 64}}
    with pytest.raises(AmdError, match="different tasks"):
        rescore(stale)
    with pytest.raises(AmdError, match="unknown BFCL task id"):
        rescore({"task_id": "multi_turn_base_x", "decoded_calls": []})
    with pytest.raises(AmdError, match="must be a string"):
        rescore({"decoded_calls": []})
