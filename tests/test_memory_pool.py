"""Several teachers, one bank (amd.memory.pool): provenance per entry through pooling, dedup and injection records,
a preferred teacher, and the leakage protocols across teachers, on handmade trajectories of two teachers."""

import json

import pytest
from test_memory_fixtures import all_records, call, record, reply, step, write_jsonl

from amd.agent.hooks import TaskContext
from amd.cli import main
from amd.core.errors import AmdError
from amd.core.files import sha256_file
from amd.core.schema import validate
from amd.memory.bank import load_bank
from amd.memory.build import build_bank
from amd.memory.method import open_memory
from amd.memory.pool import pool_banks
from amd.memory.protocols import memory_side

EMBEDDER = "hash:256"
TEACHERS = ("alpha", "beta")
# alpha solves 901, 902, 903 and 905 and fails 904; beta fails 901, solves 902, 903 and 904, never ran 905
DEFAULT = {"multi_turn_base_901": "alpha", "multi_turn_base_902": "alpha", "multi_turn_base_903": "alpha",
           "multi_turn_base_904": "beta", "multi_turn_base_905": "alpha"}
PREFER_BETA = DEFAULT | {"multi_turn_base_902": "beta", "multi_turn_base_903": "beta"}


def beta_records() -> list[dict]:
    """A second teacher (a model): other words around the same calls, one more task solved, one failed."""
    solved = [r | {"agent": {"spec": "openai:beta", "kind": "model", "model": None, "params": {}}}
              for r in all_records() if r["task_id"] in ("multi_turn_base_902", "multi_turn_base_903")]
    for r in solved:
        for turn in r["turns"]:
            for s in turn["steps"]:
                s["model_text"] = f"beta thinks: {s['model_text']}"
    deleted = record("multi_turn_base_904", [("Delete the file temp_draft.txt.", [
        step([call("rm", file_name="temp_draft.txt")], ["None"]), reply("Deleted.")])], agent="openai:beta")
    failed = record("multi_turn_base_901", [("Move 'final_report.pdf' into a new folder called 'archive_2024'.", [
        step([call("mv", source="final_report.pdf", destination="nowhere")], ['{"error": "no such folder"}']),
        reply("I could not.")])], success=False, agent="openai:beta")
    return [failed, *solved, deleted]


def build_members(tmp_path, method="amd", embedder=EMBEDDER, options=None) -> list:
    banks = []
    for name, records in zip(TEACHERS, (all_records(), beta_records())):
        trajectories = write_jsonl(tmp_path / f"{name}.jsonl", records)
        build_bank([trajectories], method, "rules", embedder, tmp_path / f"{name}-{method}", options=options)
        banks.append(tmp_path / f"{name}-{method}")
    return banks


@pytest.fixture
def pooled(tmp_path):
    pool_banks(build_members(tmp_path), list(TEACHERS), tmp_path / "pool")
    return tmp_path / "pool"


def seen_teachers(records) -> dict:
    """source task -> the set of teachers whose entries of it were injected."""
    seen = {}
    for r in records:
        seen.setdefault(r["source_task_id"], set()).add(r["source_teacher"])
    return seen


def test_a_pooled_bank_keeps_every_teacher_entry_with_its_provenance(pooled, tmp_path):
    bank, members = load_bank(pooled), [load_bank(tmp_path / f"{name}-amd") for name in TEACHERS]
    manifest = bank.manifest
    for type_name in manifest["types"]:
        assert len(bank.entries[type_name]) == sum(len(m.entries[type_name]) for m in members)
        for member, name in zip(members, TEACHERS):
            mine = [e for e in bank.entries[type_name] if e["source_teacher"] == name]
            assert [e["id"] for e in mine] == [f"{name}/{e['id']}" for e in member.entries[type_name]]
            assert [e["source_task_id"] for e in mine] == [e["source_task_id"] for e in member.entries[type_name]]
    both = {e["source_teacher"] for e in bank.entries["workflow"] if e["source_task_id"] == "multi_turn_base_902"}
    assert both == set(TEACHERS)  # stored twice; the dedup happens when a run opens the bank
    assert [(s["teacher"], s["sha256"]) for s in manifest["sources"]] == [
        (name, sha256_file(tmp_path / f"{name}.jsonl")) for name in TEACHERS]
    assert {name: m["bank_sha256"] for name, m in manifest["pool"]["members"].items()} == {
        name: member.manifest_sha256 for name, member in zip(TEACHERS, members)}
    assert manifest["pool"]["default_teacher"] == DEFAULT
    assert manifest["solved_task_ids"] == sorted(DEFAULT)
    assert [a["spec"] for a in manifest["agents"]] == ["oracle", "openai:beta"]


@pytest.mark.parametrize("prefer, expected", [(None, DEFAULT), ("beta", PREFER_BETA), ("alpha", DEFAULT)])
def test_a_run_sees_one_teacher_per_task_and_a_preferred_teacher_first(pooled, prefer, expected):
    options = {} if prefer is None else {"prefer_teacher": prefer}
    hooks = open_memory(pooled, "wf_st_fn", k=50, delta=-1.0, options=options)
    unseen = TaskContext("multi_turn_base_999", "multi_turn_base_999", "Buy shares and post a tweet.")
    records = hooks.task_start(unseen).records + hooks.after_error(unseen, ["rm", "mv", "post_tweet"]).records
    assert seen_teachers(records) == {
        task: {teacher} for task, teacher in expected.items()
        if any(r["source_task_id"] == task for r in records)}
    assert {r["source_task_id"] for r in records if r["type"] == "workflow"} == set(expected)
    described = hooks.describe()["pool"]
    assert described["teachers"] == list(TEACHERS) and described["prefer_teacher"] == prefer
    assert described["tasks_by_teacher"] == {t: list(expected.values()).count(t) for t in TEACHERS}
    assert all(entry["entry_id"].startswith(f"{entry['source_teacher']}/") for entry in records)


def test_injection_records_name_their_teacher_and_follow_the_trajectory_schema(pooled):
    hooks = open_memory(pooled, "wf", k=3, delta=-1.0, options={"prefer_teacher": "beta"})
    injection = hooks.task_start(TaskContext("t", "t", "Post a tweet as john_doe."))
    assert injection.records and all(r["source_teacher"] in TEACHERS for r in injection.records)
    validate(all_records()[0] | {"memory": hooks.describe(), "system_memory": injection.records}, where="pooled run")


@pytest.mark.parametrize("prefer", [None, "beta"])
def test_no_task_sees_its_own_group_from_any_teacher(pooled, prefer):
    options = {} if prefer is None else {"prefer_teacher": prefer}
    hooks = open_memory(pooled, "wf_st_fn", k=50, delta=-1.0, options=options)
    for rec in all_records() + beta_records():
        me = TaskContext(rec["task_id"], rec["task_id"], rec["instruction"])
        names = [c["name"] for t in rec["turns"] for s in t["steps"] for c in s["calls"]]
        records = hooks.task_start(me).records + hooks.after_error(me, names).records
        assert records and rec["task_id"] not in {r["source_task_id"] for r in records}
    shared = open_memory(pooled, "wf", protocol="shared", k=50, delta=-1.0, options=options)
    own = TaskContext("multi_turn_base_902", "multi_turn_base_902", all_records()[1]["instruction"])
    assert "multi_turn_base_902" in {r["source_task_id"] for r in shared.task_start(own).records}  # can fail


def test_cross_split_takes_memory_from_the_memory_side_of_all_teachers(pooled):
    manifest = load_bank(pooled).manifest
    side = memory_side(manifest["task_groups"], "cross_split", 3)
    hooks = open_memory(pooled, "wf_st_fn", protocol="cross_split", split_seed=3, k=50, delta=-1.0,
                        options={"prefer_teacher": "beta"})
    entries = [e for entries in hooks.bank.entries.values() for e in entries]
    assert entries and {e["source_group"] for e in entries} <= side
    assert {e["source_teacher"] for e in entries} <= set(TEACHERS)
    assert all(PREFER_BETA[e["source_task_id"]] == e["source_teacher"] for e in entries)


def test_a_baseline_pool_prefers_a_solved_trajectory_over_a_failed_one(tmp_path):
    """ReasoningBank learns from failures too: beta's failed 901 has entries, alpha's solved one wins anyway."""
    pool_banks(build_members(tmp_path, "reasoningbank"), list(TEACHERS), tmp_path / "pool")
    bank = load_bank(tmp_path / "pool")
    assert {e["source_teacher"] for e in bank.entries["reasoning"]
            if e["source_task_id"] in ("multi_turn_base_901", "multi_turn_base_904")} == set(TEACHERS)
    assert bank.manifest["outcomes"] == {"success": 4 + 3, "failure": 1 + 1}  # counts summed over the members
    hooks = open_memory(tmp_path / "pool", "reasoningbank", k=50, delta=-1.0, options={"prefer_teacher": "beta"})
    records = hooks.task_start(TaskContext("t", "t", "Move a file.")).records
    assert seen_teachers(records) == {
        task: {teacher} for task, teacher in PREFER_BETA.items()}


def test_bad_pools_and_preferences_are_one_line_errors(tmp_path, pooled):
    alpha, beta = build_members(tmp_path)
    cases = [
        (([alpha, beta], ["alpha"]), "2 banks but 1 teacher names"),
        (([alpha, beta], ["alpha", "alpha"]), "repeated: \\['alpha'\\]"),
        (([alpha], ["alpha"]), "at least two teachers"),
        (([alpha, beta], ["alpha", "be-ta"]), "must match"),
        (([alpha, pooled], ["alpha", "mix"]), "already a pooled bank"),
    ]
    for (banks, names), message in cases:
        with pytest.raises(AmdError, match=message):
            pool_banks(banks, names, tmp_path / "bad")
    (tmp_path / "other").mkdir()
    other = build_members(tmp_path / "other", embedder="hash:64")[1]
    with pytest.raises(AmdError, match="embedder"):
        pool_banks([alpha, other], ["alpha", "beta"], tmp_path / "bad")
    (tmp_path / "code").mkdir()
    code = build_members(tmp_path / "code", options={"representation": "wf=code"})[1]
    with pytest.raises(AmdError, match="disagree on representation.default.workflow"):
        pool_banks([alpha, code], ["alpha", "beta"], tmp_path / "bad")
    assert not (tmp_path / "bad").exists()
    with pytest.raises(AmdError, match="not a teacher of this pooled bank \\(alpha, beta\\)"):
        open_memory(pooled, "wf", options={"prefer_teacher": "gamma"})
    with pytest.raises(AmdError, match="needs a bank pooled from several teachers"):
        open_memory(alpha, "wf", options={"prefer_teacher": "alpha"})


def test_memory_cli_pools_and_shows_a_pool(tmp_path, capsys):
    alpha, beta = build_members(tmp_path)
    out = tmp_path / "pool"
    assert main(["memory", "pool", "--banks", str(alpha), str(beta), "--teachers", *TEACHERS, "--out", str(out)]) == 0
    assert "pooled from alpha, beta" in capsys.readouterr().out
    assert json.loads((out / "manifest.json").read_text())["pool"]["teachers"] == list(TEACHERS)
    assert main(["memory", "show", str(out), "--n", "1"]) == 0
    assert "tasks seen by default from alpha 4, beta 1" in capsys.readouterr().out
    assert main(["memory", "pool", "--banks", str(alpha), "--teachers", "alpha", "--out", str(out)]) == 2


def write_student_run(root, teacher, seed, successes, pool=None) -> str:
    from test_analysis_outputs import record as run_record

    from amd.analysis import layout

    path = root / layout.MEMORY_RUN.format(benchmark="bfcl", student="qwen3_4b", teacher=teacher, writer="w",
                                           embedder="e", build="-amd", memcfg="wf_st_fn", variant="",
                                           protocol="self_excluded", k="wf1_st1_fn1", seed=seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    records = [run_record(f"multi_turn_base_{i}", ok, 3, "vllm:Qwen/Qwen3-4B", "wf_st_fn")
               for i, ok in enumerate(successes)]
    for r in records:
        r["memory"] |= {"pool": pool} if pool else {}
    write_jsonl(path, records)
    return str(path)


def test_the_multi_teacher_table_puts_pools_beside_the_best_single_teacher(tmp_path):
    from amd.analysis.runs import load_runs
    from amd.analysis.teachers import table_multi_teacher

    pool = {"teachers": ["alpha", "beta"], "prefer_teacher": "beta", "tasks_by_teacher": {"alpha": 1, "beta": 3}}
    runs = [write_student_run(tmp_path, "alpha", 0, [True, False, False, False]),
            write_student_run(tmp_path, "alpha", 1, [True, True, False, False]),
            write_student_run(tmp_path, "beta", 0, [True, True, True, False]),
            write_student_run(tmp_path, "both_b", 0, [True, True, True, True], pool)]
    table = table_multi_teacher(load_runs(runs))
    rows = {row.teacher: row for row in table.itertuples()}
    assert list(table["teacher"]) == ["alpha", "beta", "both_b"]  # single teachers first
    assert rows["alpha"].success == 37.5 and rows["alpha"].runs == 2 and rows["alpha"].vs_best_single == -37.5
    assert rows["beta"].vs_best_single == 0 and rows["both_b"].vs_best_single == 25.0
    assert (rows["both_b"].pool, rows["both_b"].prefer, rows["both_b"].memory_from) == (
        "alpha+beta", "beta", "alpha 1, beta 3")
    with pytest.raises(AmdError, match="no run with a pooled bank"):
        table_multi_teacher(load_runs(runs[:3]))
