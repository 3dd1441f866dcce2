"""The agent loop and the batch runner, on the fixture benchmark (no BFCL, no model)."""

import json
import logging

import pytest
from plugins.counter import CounterBenchmark

from amd.agent.agents import OracleAgent
from amd.agent.base import AgentReply
from amd.agent.hooks import Injection, TaskContext
from amd.agent.loop import Limits, run_episode
from amd.agent.runner import RunSpec, run_tasks
from amd.benchmarks.base import Proposal
from amd.core.errors import AmdError
from amd.core.schema import read_trajectories
from amd.core.trajectory import EpisodeRecord

ORACLE_INFO = {"spec": "oracle", "kind": "oracle", "model": None, "params": {}}


def oracle_spec(benchmark, **overrides):
    fields = {"benchmark": benchmark, "agent_info": ORACLE_INFO,
              "make_agent": lambda episode: OracleAgent(episode.reference_turns())}
    fields.update(overrides)
    return RunSpec(**fields)


class AlwaysCalls:
    """An agent that never stops calling add(n=1)."""

    def begin(self, tools, memory_text, memory_first=False):
        self.memory_text = memory_text

    def add_user(self, text, memory_text="", memory_in_system=False):
        pass

    def act(self):
        return AgentReply(text="add", proposals=[Proposal(source="add(n=1)", name="add", arguments={"n": 1})])

    def observe(self, proposals, outcome, hint=""):
        self.last_hint = hint

    def student_chat(self):
        return None


def context(task_id):
    return TaskContext(task_id, task_id, "Add one to the counter.")


def test_oracle_run_writes_valid_successful_trajectories(tmp_path):
    out = tmp_path / "run.jsonl"
    summary = run_tasks(oracle_spec(CounterBenchmark()), CounterBenchmark().task_ids(), out, progress=False)
    records = read_trajectories(out)
    assert summary.finished == 6 and not summary.crashed
    assert [r["task_id"] for r in records] == CounterBenchmark().task_ids()
    for record in records:
        turns = int(record["task_id"].split("_")[1])
        assert record["success"] and record["status"] == "finished"
        assert record["n_steps"] == 2 * turns  # one call step and one closing reply per turn
        assert record["decoded_calls"] == [[["add(n=1)"]]] * turns


def test_resume_skips_finished_tasks_and_drops_a_truncated_tail(tmp_path):
    benchmark = CounterBenchmark()
    out = tmp_path / "run.jsonl"
    run_tasks(oracle_spec(benchmark), benchmark.task_ids()[:3], out, progress=False)
    with open(out, "a") as handle:
        handle.write('{"schema": "amd.trajectory/1", "task_id": "count_1_3", "ben')  # killed mid-write
    started = []

    def make_agent(episode):
        started.append(episode.task_id)
        return OracleAgent(episode.reference_turns())

    summary = run_tasks(oracle_spec(benchmark, make_agent=make_agent), benchmark.task_ids(), out, progress=False)
    ids = [r["task_id"] for r in read_trajectories(out)]
    assert started == benchmark.task_ids()[3:]
    assert summary.skipped == 3 and summary.finished == 3
    assert ids == benchmark.task_ids()  # no duplicates, task order


def test_a_crashing_task_is_not_written_and_the_run_goes_on(tmp_path):
    benchmark = CounterBenchmark()
    out = tmp_path / "run.jsonl"

    def flaky(episode):
        if episode.task_id == "count_2_1":
            raise RuntimeError("boom")
        return OracleAgent(episode.reference_turns())

    summary = run_tasks(oracle_spec(benchmark, make_agent=flaky), benchmark.task_ids(), out, progress=False)
    assert summary.crashed == ["count_2_1"]
    assert "count_2_1" not in {r["task_id"] for r in read_trajectories(out)}
    retry = run_tasks(oracle_spec(benchmark), benchmark.task_ids(), out, progress=False)
    assert retry.finished == 1 and [r["task_id"] for r in read_trajectories(out)] == benchmark.task_ids()


def test_concurrent_run_keeps_task_order(tmp_path):
    benchmark = CounterBenchmark(n_tasks=12)
    out = tmp_path / "run.jsonl"
    run_tasks(oracle_spec(benchmark), benchmark.task_ids(), out, concurrency=4, progress=False)
    assert [r["task_id"] for r in read_trajectories(out)] == benchmark.task_ids()


def test_a_different_run_in_the_same_file_is_refused(tmp_path):
    benchmark = CounterBenchmark()
    out = tmp_path / "run.jsonl"
    run_tasks(oracle_spec(benchmark), benchmark.task_ids()[:1], out, progress=False)
    other = oracle_spec(benchmark, memory_info={"config": "wf", "bank": "x"})
    with pytest.raises(AmdError, match="different run"):
        run_tasks(other, benchmark.task_ids(), out, progress=False)


def test_step_limit_per_turn_force_quits_the_task():
    episode = CounterBenchmark().start("count_2_0")
    record = run_episode(AlwaysCalls(), episode, Limits(max_steps_per_turn=5, max_steps=40), context("count_2_0"))
    assert record["status"] == "step_limit" and not record["success"]
    assert record["n_steps"] == 5 and len(record["turns"]) == 1
    assert record["step_caps"] == {"max_steps": 40, "max_steps_per_turn": 5}  # the caps it ran under, recorded


def test_step_limit_per_task_counts_over_turns():
    class CallOnceThenReply(AlwaysCalls):
        def add_user(self, text, memory_text="", memory_in_system=False):
            self.calls_left = 3

        def act(self):
            self.calls_left -= 1
            return super().act() if self.calls_left >= 0 else AgentReply(text="done")

    episode = CounterBenchmark().start("count_3_0")
    record = run_episode(CallOnceThenReply(), episode, Limits(max_steps_per_turn=20, max_steps=6), context("count_3_0"))
    assert record["status"] == "step_limit" and record["n_steps"] == 6


class RecordingMemory:
    one_task_at_a_time = False

    def __init__(self):
        self.after_error_calls, self.finished = [], []

    def describe(self):
        return {"config": "wf_st_fn", "bank": "fixture"}

    def task_start(self, task):
        assert task.student is None  # oracle-like agents have no model to ask
        return Injection("MEMORY BLOCK", [{"type": "workflow", "entry_id": "w1", "source_task_id": "other",
                                           "similarity": 0.9}])

    def user_turn(self, task, message):
        return Injection()

    def after_error(self, task, failing_functions):
        self.after_error_calls.append(failing_functions)
        return Injection("HINT", [{"type": "function", "entry_id": "f1", "source_task_id": "other", "similarity": 0.5}])

    def run_start(self, run):
        self.started = run

    def episode_end(self, task, record):
        self.finished.append((task.task_id, record["task_id"], record["success"]))

    def run_end(self):
        self.ended = True


def test_memory_hooks_are_called_and_recorded():
    class CallsBadThenStops(AlwaysCalls):
        def act(self):
            if getattr(self, "done", False):
                return AgentReply(text="done")
            self.done = True
            return AgentReply(text="bad", proposals=[Proposal(source="sub(n=1)", name="sub", arguments={"n": 1})])

    agent, memory = CallsBadThenStops(), RecordingMemory()
    record = run_episode(agent, CounterBenchmark().start("count_1_0"), Limits(), context("count_1_0"), memory)
    # the loop hands the method's text over as it is; a model agent frames it (tests/test_memory_as_data.py)
    assert agent.memory_text == "MEMORY BLOCK" and agent.last_hint == "HINT"
    assert memory.after_error_calls == [["sub"]]
    assert record["system_memory"][0]["entry_id"] == "w1"
    assert record["turns"][0]["steps"][0]["injected_memory"][0]["entry_id"] == "f1"
    assert record["turns"][0]["steps"][0]["error"] and not record["success"]
    # a record's keys keep the order run files have always had: optional ones among the others, not appended
    assert list(record) == [key for key in EpisodeRecord.__annotations__ if key in record]
    assert list(record).index("memory_queries") < list(record).index("turns")


def test_the_runner_calls_episode_end_with_every_written_record_in_a_fixed_order(tmp_path):
    benchmark, memory = CounterBenchmark(), RecordingMemory()
    out = tmp_path / "run.jsonl"
    run_tasks(oracle_spec(benchmark, memory=memory, memory_info={"config": "wf_st_fn", "bank": "fixture"}),
              benchmark.task_ids(), out, progress=False)
    assert memory.finished == [(task_id, task_id, True) for task_id in benchmark.task_ids()]
    assert [r["task_group"] for r in read_trajectories(out)] == [t.rsplit("_", 1)[0] for t in benchmark.task_ids()]


def test_a_corrupt_line_in_the_middle_is_an_error_with_its_line_number(tmp_path):
    benchmark = CounterBenchmark()
    out = tmp_path / "run.jsonl"
    run_tasks(oracle_spec(benchmark), benchmark.task_ids()[:2], out, progress=False)
    lines = out.read_text().splitlines()
    out.write_text("\n".join([lines[0], "{not json", lines[1]]) + "\n")
    with pytest.raises(AmdError, match=r"run.jsonl:2: corrupt trajectory line"):
        read_trajectories(out)
    record = json.loads(lines[0])
    del record["success"]
    out.write_text(json.dumps(record) + "\n")
    with pytest.raises(AmdError, match=r":1: invalid trajectory.*success"):
        read_trajectories(out)


def test_each_record_is_validated_once(tmp_path, monkeypatch):
    """Once when appended, or once when read on resume; never again for the final rewrite in task order."""
    import amd.core.schema

    validated = []
    check = amd.core.schema.validate
    monkeypatch.setattr(amd.core.schema, "validate", lambda record, where="record": validated.append(1) or check(record))
    benchmark = CounterBenchmark()
    out = tmp_path / "run.jsonl"
    run_tasks(oracle_spec(benchmark), benchmark.task_ids()[:2], out, progress=False)
    assert len(validated) == 2
    run_tasks(oracle_spec(benchmark), benchmark.task_ids(), out, progress=False)
    assert len(validated) == 2 + 2 + 4  # two read on resume, four appended
    assert [r["task_id"] for r in read_trajectories(out)] == benchmark.task_ids()


def test_a_task_missing_from_the_run_file_counts_as_a_failure_loudly(tmp_path, capsys):
    from amd.analysis.runs import summarize_run
    from amd.analysis.score import summarize

    benchmark = CounterBenchmark()
    out = tmp_path / "run.jsonl"
    run_tasks(oracle_spec(benchmark), benchmark.task_ids(), out, progress=False)
    assert summarize(out)["success_%"] == 100.0
    lines = out.read_text().splitlines()
    out.write_text("\n".join(lines[:4]) + "\n")  # two finished tasks lost (a crash, a hand edit)
    row = summarize(out)
    assert (row["tasks"], row["missing"], row["success_%"]) == (6, 2, round(400 / 6, 2))
    assert "2 of 6 tasks the run was asked for have no record" in capsys.readouterr().err
    analysed = summarize_run(out)
    assert analysed["n_tasks"] == 6 and analysed["success_by_task"]["count_3_5"] is False


class SlowOracle(OracleAgent):
    """The oracle, taking `pause` seconds per step: a task that stays in flight for a while."""

    pause = 0.3

    def act(self):
        import time

        time.sleep(self.pause)
        return super().act()


def test_a_log_gets_a_progress_line_at_the_start_at_each_task_and_while_a_task_runs(tmp_path, caplog):
    benchmark = CounterBenchmark()
    tasks = benchmark.task_ids()[:2]
    spec = oracle_spec(benchmark, make_agent=lambda episode: SlowOracle(episode.reference_turns()))
    with caplog.at_level("INFO", logger="amd.run"):
        run_tasks(spec, tasks, tmp_path / "run.jsonl", progress_every_s=0.1)  # stderr is not a terminal here
    lines = [record.getMessage() for record in caplog.records if record.getMessage().startswith("progress:")]
    assert lines[0] == "progress: 2 tasks, 0 already finished, 2 to run"
    steps = [int(line.split("; ")[1].split()[0]) for line in lines[1:]]
    assert any(" 0 of 2 tasks done" in line and "1 in flight" in line for line in lines[1:])  # a heartbeat mid-task
    assert steps == sorted(steps) and steps[-1] == 2 + 4  # every step counted: 1 + 2 turns, a call and a reply each
    assert "2 of 2 tasks done, 0 failed, 0 in flight" in lines[-1]


def test_no_progress_means_no_progress_lines(tmp_path, caplog):
    benchmark = CounterBenchmark()
    with caplog.at_level("INFO", logger="amd.run"):
        run_tasks(oracle_spec(benchmark), benchmark.task_ids()[:1], tmp_path / "run.jsonl", progress=False)
    assert not [record for record in caplog.records if record.getMessage().startswith("progress:")]


def test_a_seeded_run_copies_only_whole_records_of_its_own_setting_and_an_output_with_records_keeps_its_own(
        tmp_path, caplog):
    caplog.set_level(logging.INFO, "amd.run")
    benchmark = CounterBenchmark()
    tasks = benchmark.task_ids()
    source, other, out = tmp_path / "released.jsonl", tmp_path / "other.jsonl", tmp_path / "run.jsonl"
    run_tasks(oracle_spec(benchmark), tasks[:3], source, progress=False)
    lines = source.read_bytes().splitlines(keepends=True)
    run_tasks(oracle_spec(benchmark, agent_info=ORACLE_INFO | {"spec": "another"}), tasks[3:4], other, progress=False)
    source.write_bytes(lines[0] + lines[1] + other.read_bytes() + lines[2][:30])  # another setting, a cut line
    started = []

    def make_agent(episode):
        started.append(episode.task_id)
        return OracleAgent(episode.reference_turns())

    summary = run_tasks(oracle_spec(benchmark, make_agent=make_agent), tasks[:4], out, progress=False,
                        seed_from=source)
    assert summary.skipped == 2 and started == tasks[2:4]
    assert out.read_bytes().splitlines(keepends=True)[:2] == lines[:2]  # the seeded records as they were written
    assert "1 records of this run's tasks are of another setting" in caplog.text
    started.clear()
    run_tasks(oracle_spec(benchmark, make_agent=make_agent), tasks[:5], out, progress=False, seed_from=other)
    assert started == tasks[4:5] and "resumes from them, not from" in caplog.text
