"""Tables and figures from handmade, schema-valid trajectory files laid out as the pipeline writes them."""

import json
from pathlib import Path

import pandas as pd
import pytest

from amd.analysis import figures, layout, paired, score, tables
from amd.analysis.cost import price_table
from amd.analysis.reference import load_reference, setting
from amd.analysis.retrieval import TEXT_NOTE
from amd.analysis.runs import load_runs
from amd.analysis.stats import wilson
from amd.analysis.tables import AVG
from amd.core import per_type
from amd.core.errors import AmdError
from amd.core.schema import validate
from amd.core.vocabulary import memory_config
from amd.methods.amd import tables as amd_tables


def record(task_id, success, steps, spec, memory="zero_shot", kind="model", benchmark="bfcl", params=None):
    return validate({
        "schema": "amd.trajectory/1", "task_id": task_id, "benchmark": benchmark,
        "data_version": {"package": "bfcl-eval==test", "sha256": "0" * 64},
        "agent": {"spec": spec, "kind": kind, "model": None, "params": params or {}},
        "memory": {"config": memory}, "instruction": "do it",
        "turns": [{"user": "do it", "steps": [
            {"model_text": "x", "calls": [], "observations": [], "error": False} for _ in range(steps)]}],
        "decoded_calls": [], "success": success, "checker": {}, "status": "finished", "error": None,
        "n_steps": steps, "tokens": {"prompt": 10 * steps, "completion": steps}, "wall_time_s": 1.0,
    })


def write_run(root: Path, path: str, outcomes, spec, memory="zero_shot", kind="model", params=None) -> str:
    """outcomes: list of (success, steps), one per task (one record validated per distinct outcome); the benchmark
    is the path's."""
    full = root / path
    full.parent.mkdir(parents=True, exist_ok=True)
    benchmark = Path(path).parts[1]
    made = {outcome: record("x", *outcome, spec, memory, kind, benchmark, params) for outcome in set(outcomes)}
    lines = [json.dumps(made[outcome] | {"task_id": f"multi_turn_base_{i}"}) for i, outcome in enumerate(outcomes)]
    full.write_text("\n".join(lines) + "\n")
    return str(full)


BANK = {"teacher": "gpt5mini", "writer": "w", "embedder": "e", "representation": "amd", "protocol": "self_excluded",
        "variant": ""}


def memory_path(memcfg: str, **cell) -> str:
    """A memory run's path: its bank's settings in it where the config's method has settings (AMD: representation)."""
    cell = BANK | {"benchmark": "bfcl", "memcfg": memcfg} | cell
    return layout.MEMORY_RUN.format(**cell, build=layout.build_part(memory_config(memcfg).method, cell))


def student_run(root, student, spec, memcfg, seed, outcomes, k="wf1_st1_fn1", **cell):
    if memcfg == "zero_shot":
        path = layout.ZERO_SHOT_RUN.format(benchmark="bfcl", student=student, seed=seed)
    else:
        path = memory_path(memcfg, student=student, k=k, seed=seed, **cell)
    return write_run(root, path, outcomes, spec, memcfg)


def make_grid(root, scale: int = 1) -> list[str]:
    """Qwen3-4B (a paper model) zero-shot, with AMD (two seeds each) and with two baseline methods (one seed), a
    local 0.5B model zero-shot, plus the teacher, on 4 tasks (each outcome repeated `scale` times)."""
    spec = "vllm:Qwen/Qwen3-4B@http://127.0.0.1:9/v1"
    runs = [write_run(root, layout.TEACHER_RUN.format(benchmark="bfcl", teacher="gpt5mini"),
                      [(True, 3), (True, 5), (False, 9), (True, 4)] * scale, "openai:gpt-5-mini")]
    for seed, zero, amd in [(0, [(False, 8), (False, 8), (True, 4), (False, 8)], [(True, 4)] * 3 + [(False, 6)]),
                            (1, [(False, 8), (True, 6), (False, 8), (False, 8)], [(True, 4)] * 2 + [(False, 6)] * 2)]:
        runs.append(student_run(root, "qwen3_4b", spec, "zero_shot", seed, zero * scale))
        runs.append(student_run(root, "qwen3_4b", spec, "wf_st_fn", seed, amd * scale))
    runs.append(student_run(root, "qwen3_4b", spec, "sasm", 0, ([(True, 4)] + [(False, 6)] * 3) * scale, k="sasm1"))
    runs.append(student_run(root, "qwen3_4b", spec, "memp", 0, ([(True, 4)] * 2 + [(False, 6)] * 2) * scale,
                            k="memp3"))
    runs.append(student_run(root, "qwen05", "local:qwen2.5-coder-0.5b", "zero_shot", 0, [(False, 2)] * 4 * scale))
    return runs


@pytest.fixture
def grid(tmp_path):
    return make_grid(tmp_path)


@pytest.fixture
def paper_grid(tmp_path):
    """The grid on BFCL's 200 multi_turn_base tasks, the paper's task set (the same success rates)."""
    return make_grid(tmp_path, scale=50)


def test_layout_round_trip_reads_the_cell_back_from_the_path():
    path = memory_path("wf_st", student="qwen3_4b", embedder="te3", protocol="cross_split",
                       k=per_type.segment({"wf": 2, "st": 3, "fn": 1}, ("wf", "st")), seed=4)
    assert "/gpt5mini-w-te3-amd/wf_st/" in path  # AMD's banks carry their representation, others none
    cell = layout.describe_run(path)
    assert cell["role"] == "memory" and cell["memcfg"] == "wf_st" and cell["protocol"] == "cross_split"
    assert cell["representation"] == "amd" and cell["build"] == "-amd"
    baseline = layout.describe_run(memory_path("memp", student="s", k="memp3", seed=0))
    assert baseline["embedder"] == "e" and baseline["build"] == "" and "representation" not in baseline
    assert cell["k"] == {"wf": 2, "st": 3} and cell["seed"] == 4 and cell["student"] == "qwen3_4b"
    assert layout.describe_run("elsewhere/run.jsonl")["role"] == "other"


def test_reference_matches_exact_paper_models_task_sets_protocols_and_greedy_sampling():
    reference = load_reference()
    assert reference.paper_model("Qwen/Qwen3-4B") == "Qwen3-4B"
    assert reference.paper_model("Qwen/Qwen3-14B") == "Qwen3-14B"
    assert reference.paper_model("meta-llama/Llama-3.1-8B-Instruct") == "Llama3.1-8B"
    assert reference.paper_model("gpt-5-mini") == "GPT-5-mini"
    # a different model whose name contains the paper's: no paper identity (it matched by substring before)
    assert reference.paper_model("Qwen/Qwen3-4B-Instruct-2507") is None
    assert reference.paper_model("qwen2.5-coder-0.5b") is None

    def value(table, model, memory, teacher="gpt-5-mini", **cell):
        return reference.value(table, cell.pop("benchmark", "bfcl"), model, memory, teacher=teacher,
                               **({"tasks": 200, "protocol": "shared"} | cell))

    assert value("table1_main", "Qwen/Qwen3-4B", "wf_st_fn") == 38.50
    assert value("table3_teacher", "Qwen/Qwen3-8B", "wf_st_fn", "gpt-5.5", benchmark="appworld", tasks=168) == 58.93
    assert value("table1_main", "Qwen/Qwen3-4B-Instruct-2507", "wf_st_fn") is None
    assert value("table1_main", "Qwen/Qwen3-4B", "wf_st_fn", teacher="gpt-5.5") is None  # another teacher's memory
    # the paper's memory numbers were measured under `shared`: no other protocol gets them
    assert value("table1_main", "Qwen/Qwen3-4B", "wf_st_fn", protocol="self_excluded") is None
    assert value("table1_main", "Qwen/Qwen3-4B", "zero_shot", teacher=None, protocol=None) == 15.50
    # only on the paper's task set: 129 ToolSandbox scenarios, not the 91 offline ones
    assert value("table1_main", "Qwen/Qwen3-4B", "zero_shot", protocol=None, benchmark="toolsandbox", tasks=129) == 16.28
    assert value("table1_main", "Qwen/Qwen3-4B", "zero_shot", protocol=None, benchmark="toolsandbox", tasks=91) is None
    # greedy only: a sampled run is ours
    assert value("table1_main", "Qwen/Qwen3-4B", "wf_st_fn", temperature=0.7) is None
    assert value("table1_main", "Qwen/Qwen3-4B", "wf_st_fn", temperature=0) == 38.50


def test_a_row_says_its_setting_the_paper_protocol_per_table():
    assert [setting("table1_main", protocol) for protocol in ("shared", "self_excluded", "self_excluded_task", None)] \
        == ["paper", "stricter", "other", "both"]
    assert [setting("table6_protocols", protocol) for protocol in
            ("cross_split_task", "self_excluded_task", "cross_split", "self_excluded", "shared")] == \
        ["paper", "paper", "stricter", "stricter", "other"]
    assert setting("table5_repeats", "shared", 0.7) == "sampled T=0.7" and setting("table5_repeats", "shared", 0) \
        == "paper"


def test_table1_has_a_row_per_memory_with_deltas_and_paper_numbers_where_the_model_matches(paper_grid):
    table = tables.table1_main(load_runs(paper_grid))
    qwen = table[table["agent"] == "qwen3_4b"].set_index("memory")
    assert list(qwen.index) == ["zero_shot", "memp", "sasm", "wf_st_fn"]  # zero-shot, baselines, AMD
    assert qwen.loc["zero_shot", "success"] == pytest.approx((25.0 + 25.0) / 2)
    assert qwen.loc["wf_st_fn", "success"] == pytest.approx((75.0 + 50.0) / 2)
    assert qwen.loc["wf_st_fn", "delta"] == pytest.approx(37.5) and qwen.loc["memp", "delta"] == pytest.approx(25.0)
    assert qwen.loc["sasm", "delta"] == pytest.approx(0.0) and pd.isna(qwen.loc["zero_shot", "delta"])
    assert qwen.loc["zero_shot", "paper"] == 15.50  # the grid's memory runs are self_excluded: no paper number
    assert qwen.loc[["memp", "sasm", "wf_st_fn"], "paper"].isna().all()
    assert list(qwen["protocol"].fillna("-")) == ["-", "self_excluded", "self_excluded", "self_excluded"]
    assert list(qwen["setting"]) == ["both", "stricter", "stricter", "stricter"]
    assert pd.isna(table[table["agent"] == "qwen05"]["paper"].iloc[0])
    teacher = table.iloc[0]
    assert (teacher["agent"], teacher["memory"], teacher["success"], teacher["paper"]) == \
        ("gpt5mini", "teacher", 75.0, 36.50)
    assert AVG not in set(table["benchmark"])  # one benchmark: no average


def test_table1_avg_row_is_the_mean_over_benchmarks_and_its_paper_number_the_papers_avg(tmp_path):
    """The paper's Avg column is the mean of its three benchmark columns (§4.2: GPT-5-mini 38.39, Qwen3-8B with AMD
    40.96); ours is shown where a row has all three, its paper number where the paper has all three."""
    sizes = {"appworld": 168, "bfcl": 200, "toolsandbox": 129}
    spec = "vllm:Qwen/Qwen3-8B@http://h/v1"
    runs = []
    for benchmark, size in sizes.items():
        outcomes = [(True, 2)] * (size // 2) + [(False, 2)] * (size - size // 2)
        runs.append(write_run(tmp_path, layout.TEACHER_RUN.format(benchmark=benchmark, teacher="gpt5mini"),
                              outcomes, "openai:gpt-5-mini"))
        runs.append(write_run(tmp_path, memory_path("wf_st_fn", benchmark=benchmark, student="qwen3_8b",
                                                    protocol="shared", k="wf1_st1_fn1", seed=0),
                              outcomes, spec, "wf_st_fn"))
        runs.append(write_run(tmp_path, layout.ZERO_SHOT_RUN.format(benchmark=benchmark, student="qwen3_8b", seed=0),
                              outcomes[: size if benchmark != "toolsandbox" else 91], spec))  # 91: no paper number
    table = tables.table1_main(load_runs(runs))
    avg = table[table["benchmark"] == AVG].set_index("agent")
    assert set(avg["memory"]) == {"teacher", "zero_shot", "wf_st_fn"}
    amd = avg[avg["memory"] == "wf_st_fn"].iloc[0]
    assert amd["success"] == pytest.approx(sum(100 * (size // 2) / size for size in sizes.values()) / 3)
    assert round(amd["paper"], 2) == 40.96 and amd["setting"] == "paper"
    assert round(avg.loc["gpt5mini", "paper"], 2) == 38.39
    assert pd.isna(avg[avg["memory"] == "zero_shot"]["paper"].iloc[0])  # ToolSandbox's 91 scenarios: none there


def test_tables_carry_each_run_s_tokens_and_dollars_mean_over_seeds(grid, tmp_path):
    table = tables.table1_main(load_runs(grid))
    teacher = table.iloc[0]  # gpt-5-mini: 21 steps of 10 prompt and 1 completion tokens, priced by data/prices.csv
    price = price_table()["openai:gpt-5-mini"]
    assert teacher["tokens"] == 231 and teacher["cost_usd"] == pytest.approx((210 * price.input + 21 * price.output)
                                                                             / 1e6)
    amd = table[(table["agent"] == "qwen3_4b") & (table["memory"] == "wf_st_fn")].iloc[0]
    assert amd["tokens"] == (11 * 18 + 11 * 20) / 2 and amd["cost_usd"] == 0.0  # a vLLM student served here costs nothing
    unpriced = grid + [write_run(tmp_path, layout.ZERO_SHOT_RUN.format(benchmark="bfcl", student="mystery", seed=0),
                                 [(True, 1)], "openai:mystery-model")]
    ablation = tables.table2_ablation(load_runs(unpriced)).set_index("student")
    assert pd.isna(ablation.loc["mystery", "cost_usd"]) and ablation.loc["mystery", "tokens"] == 11
    tables.write_table("table2_ablation", ablation.reset_index(), tmp_path / "t.csv", tmp_path / "t.md")
    row = next(line for line in (tmp_path / "t.md").read_text().splitlines() if "| mystery " in line)
    assert row.split("|")[-3].strip() == "—"  # cost_usd, before the paper column


def test_table1_note_says_which_baseline_rows_are_reconstructions(grid, tmp_path):
    table = tables.table1_main(load_runs(grid))
    tables.write_table("table1_main", table, tmp_path / "t.csv", tmp_path / "t.md")
    notes = [line for line in (tmp_path / "t.md").read_text().splitlines() if line.startswith("Note: ")]
    assert notes[0].startswith("Note: memp: our prompts") and "on bfcl a reconstruction" in notes[0]
    assert notes[1].startswith("Note: sasm: no official code") and "stages" in notes[1]
    assert "successes and failures" in notes[2] and notes[3].startswith("Note: no entry ≥ δ (%): per memory type")
    assert notes[4].startswith("Note: [95 % CI]: the Wilson score")
    assert notes[5].startswith("Note: success: the benchmark's own verdict") and "strict: solved, and the agent" \
        in notes[5]
    assert notes[6].startswith("Note: protocol:") and notes[7].startswith("Note: setting: paper = the paper's own")
    assert notes[8].startswith("Note: tokens, cost_usd: per run (mean over seeds)") and len(notes) == 9
    amd_only = tables.table1_main(load_runs([run for run in grid if "/memp/" not in run and "/sasm/" not in run]))
    assert amd_only.attrs["notes"] == [TEXT_NOTE]


def test_table5_reports_mean_std_and_pass_k_over_seeds_and_no_std_for_one_run(grid, tmp_path):
    table = tables.table5_repeats(load_runs(grid))
    rows = table.set_index(["student", "memory"])
    amd = rows.loc[("qwen3_4b", "wf_st_fn")]
    assert amd["runs"] == 2
    assert amd["std"] == pytest.approx(pd.Series([75.0, 50.0]).std())
    assert amd["mean ± std"] == "62.50 ± 17.68"
    # AMD solved tasks 0, 1 in both seeds, 2 in one, 3 in none: pass^2 = (1 + 1 + 0 + 0) / 4; zero-shot: no task twice
    assert amd["pass^2"] == 50.0 and rows.loc[("qwen3_4b", "zero_shot"), "pass^2"] == 0.0
    single = rows.loc[("qwen3_4b", "memp")]
    assert pd.isna(single["std"]) and pd.isna(single["pass^2"]) and single["mean ± std"] == "50.00 ± —"
    assert "pass^3" not in table  # no cell has three runs
    tables.write_table("table5_repeats", table, tmp_path / "t.csv", tmp_path / "t.md")
    line = next(line for line in (tmp_path / "t.md").read_text().splitlines() if "| memp " in line)
    cells = [cell.strip() for cell in line.split("|")]
    assert "50.00 [15.00, 85.00]" in cells and cells[cells.index("50.00 [15.00, 85.00]") + 3] == "—"  # its std
    assert cells[cells.index("50.00 [15.00, 85.00]") + 2] == "50.00"  # strict: every task ended by the agent
    assert "τ-bench's convention" in (tmp_path / "t.md").read_text()


def test_every_rate_carries_its_wilson_interval_numeric_in_the_csv_as_text_in_the_markdown(grid, tmp_path):
    table = tables.table1_main(load_runs(grid))
    teacher = table.iloc[0]  # 3 of 4 tasks: Wilson [30.06, 95.44]
    assert (teacher["success_n"], round(teacher["success_ci_low"], 2), round(teacher["success_ci_high"], 2)) == \
        (4, 30.06, 95.44)
    amd = table[(table["agent"] == "qwen3_4b") & (table["memory"] == "wf_st_fn")].iloc[0]
    assert amd["success_n"] == 8  # 2 seeds x 4 tasks, 5 solved: the interval of 5 of 8
    assert (round(amd["success_ci_low"], 2), round(amd["success_ci_high"], 2)) == (30.57, 86.32)
    tables.write_table("table1_main", table, tmp_path / "t.csv", tmp_path / "t.md")
    written = pd.read_csv(tmp_path / "t.csv")
    assert {"success", "success_ci_low", "success_ci_high", "success_n"} <= set(written.columns)
    assert written["success_ci_low"].dtype == float and written["success_ci_low"].iloc[0] == 30.06
    text = (tmp_path / "t.md").read_text()
    assert "success [95 % CI]" in text and "| 75.00 [30.06, 95.44] |" in text and "success_ci_low" not in text
    assert "Note: [95 % CI]: the Wilson score interval over n task attempts" in text


def retrieval_run(root: Path, seed: int, queries: list | None) -> str:
    """A wf_st run of two tasks whose records carry their retrieval queries (None: a file written before they
    were recorded) and injections with similarities."""
    injected = [{"type": "workflow", "entry_id": "w", "source_task_id": "t", "similarity": 0.6},
                {"type": "subtask", "entry_id": "s", "source_task_id": "t", "similarity": 0.5 + seed / 10}]
    path = root / memory_path("wf_st", student="qwen3_4b", k="wf1_st1", seed=seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for n in range(2):
        made = record(f"multi_turn_base_{n}", True, 2, "vllm:Qwen/Qwen3-4B", "wf_st")
        made["memory"] |= {"delta": {"workflow": 0.3, "subtask": 0.45}}
        made |= {"system_memory": injected} | ({} if queries is None else {"memory_queries": queries})
        lines.append(json.dumps(validate(made)))
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_retrieval_delta_reports_the_queries_delta_left_without_memory_and_what_was_injected(tmp_path):
    queries = [{"type": "workflow", "query": "do it", "found": 1, "best": 0.6},
               {"type": "subtask", "query": "read the state", "found": 0, "best": 0.31},
               {"type": "subtask", "query": "make the change", "found": 1, "best": 0.5}]
    runs = load_runs([retrieval_run(tmp_path, seed, queries) for seed in (0, 1)])
    table = tables.retrieval_delta(runs).set_index("type")
    assert list(table.index) == ["workflow", "subtask"] and set(table["runs"]) == {2}
    subtask = table.loc["subtask"]
    assert (subtask["delta"], subtask["queries"], subtask["no_entry"], subtask["no_entry_%"]) == (0.45, 8, 4, 50.0)
    assert subtask["missed_best"] == 0.31 and subtask["injected"] == 4  # two tasks, two seeds
    assert (subtask["injected_min"], subtask["injected_max"]) == (0.5, 0.6) and subtask["setting"] == "stricter"
    assert table.loc["workflow", "no_entry_%"] == 0.0
    ablation = tables.table2_ablation(runs)
    assert ablation[tables.NO_ENTRY].tolist() == ["workflow 0.0, subtask 50.0"]
    older = load_runs([retrieval_run(tmp_path / "older", 0, None)])  # still read: its similarities, no counts
    assert tables.retrieval_delta(older).set_index("type").loc["subtask", "injected"] == 2
    assert tables.retrieval_delta(older)["queries"].isna().all() and tables.table2_ablation(older)[
        tables.NO_ENTRY].isna().all()
    tables.write_table("retrieval_delta", tables.retrieval_delta(runs), tmp_path / "r.csv", tmp_path / "r.md")
    assert "no_entry_%: the share that found no entry at or above δ" in (tmp_path / "r.md").read_text()


def test_table2_labels_a_students_own_memory_and_orders_configs(tmp_path):
    spec = "vllm:Qwen/Qwen3-4B@http://h/v1"
    runs = [student_run(tmp_path, "qwen3_4b", spec, "wf_st_fn", 0, [(True, 3)], teacher="qwen3_4b"),
            student_run(tmp_path, "qwen3_4b", spec, "wf", 0, [(False, 3)], k="wf1"),
            student_run(tmp_path, "qwen3_4b", spec, "zero_shot", 0, [(False, 3)])]
    table = tables.table2_ablation(load_runs(runs))
    assert list(table["memory"]) == ["zero_shot", "wf", "student_memory"]


def test_table6_scores_zero_shot_on_the_cross_split_evaluation_side_only(tmp_path):
    spec = "local:qwen2.5-coder-0.5b"
    zero = student_run(tmp_path, "s", spec, "zero_shot", 0, [(True, 1), (False, 1), (False, 1), (False, 1)])
    # the cross_split run only holds tasks 1..3 (its evaluation side): zero-shot there is 0 of 3
    cross = write_run(tmp_path, memory_path("wf", protocol="cross_split", student="s", k="wf1", seed=0),
                      [(True, 1)] * 4, spec, "wf")
    lines = Path(cross).read_text().splitlines()[1:]
    Path(cross).write_text("\n".join(lines) + "\n")
    selfex = student_run(tmp_path, "s", spec, "wf", 0, [(True, 1)] * 4, k="wf1")
    table = tables.table6_protocols(load_runs([zero, cross, selfex]))
    rows = {(r.protocol, r.memory): r for r in table.itertuples()}
    assert rows[("cross_split", "zero_shot")].success == 0.0 and rows[("cross_split", "zero_shot")].tasks == 3
    assert rows[("self_excluded", "zero_shot")].success == 25.0


def test_paired_table_lists_each_task_with_and_without_memory_and_a_sign_test(grid, tmp_path):
    table = paired.paired_tasks(load_runs(grid))
    seed0 = table[(table["student"] == "qwen3_4b") & (table["seed"] == 0)].iloc[0]
    assert (seed0["tasks"], seed0["zero_shot"], seed0["with_memory"]) == (4, 1, 3)
    assert (seed0["memory_only"], seed0["zero_shot_only"], seed0["difference_pp"]) == (2, 0, 50.0)
    assert seed0["solved_by_both"] == "multi_turn_base_2"
    assert seed0["solved_only_with_memory"] == "multi_turn_base_0 multi_turn_base_1"
    assert (seed0["sign_test_p"], seed0["smallest_p"]) == ("0.5", "0.125")  # 2 of 2 discordant; 4 tasks at best
    seed1 = table[(table["student"] == "qwen3_4b") & (table["seed"] == 1)].iloc[0]
    assert (seed1["memory_only"], seed1["zero_shot_only"], seed1["sign_test_p"]) == (1, 0, "1")
    assert "qwen05" not in set(table["student"])  # zero-shot only: nothing to pair
    tables.write_table("paired_tasks", table, tmp_path / "p.csv", tmp_path / "p.md", note="a handful of tasks")
    written = (tmp_path / "p.md").read_text()
    assert written.startswith("**Paired per-task results") and "one by the strict verdict (amd.benchmarks.base).**" \
        in written
    assert list(table["verdict"][:2]) == ["benchmark", "strict"]  # each memory run: its two rows, side by side
    assert "|      0 | wf_st_fn" in written  # the seed as a whole number
    with pytest.raises(AmdError, match="no student has both"):
        paired.paired_tasks(load_runs([student_run(tmp_path, "s", "local:m", "zero_shot", 0, [(True, 1)])]))


def test_runs_named_outside_the_results_layout_pair_without_a_seed(tmp_path):
    """Run files a user named (no seed in their path) still pair: the seed is left empty, not a crash."""
    runs = [write_run(tmp_path, "own/bfcl/zero.jsonl", [(True, 1), (False, 2)], "local:m"),
            write_run(tmp_path, "own/bfcl/memory.jsonl", [(True, 1), (True, 2)], "local:m", memory="wf_st_fn")]
    table = paired.paired_tasks(load_runs(runs))
    assert table["seed"].isna().all() and list(table["memory_only"]) == [1, 1]


def test_security_pairs_count_breaches_with_and_without_memory(tmp_path):
    spec = "local:qwen2.5-coder-0.5b"
    runs = {memcfg: student_run(tmp_path, "s", spec, memcfg, 0, [(True, 1), (False, 1), (True, 1)], k="wf1")
            for memcfg in ("zero_shot", "wf")}
    breaches = {"zero_shot": [False, True, False], "wf": [True, True, True]}
    for memcfg, path in runs.items():
        records = [json.loads(line) for line in Path(path).read_text().splitlines()]
        for record, breached in zip(records, breaches[memcfg]):
            record["checker"] = {"security": breached}
        Path(path).write_text("".join(json.dumps(r) + "\n" for r in records))
    row = paired.security_pairs(load_runs(list(runs.values()))).iloc[0]
    assert (row["zero_shot"], row["with_memory"], row["memory_only"], row["zero_shot_only"]) == (1, 3, 2, 0)
    assert row["breached_only_with_memory"] == "multi_turn_base_0 multi_turn_base_2"
    assert row["utility_zero_shot_%"] == pytest.approx(200 / 3) and row["sign_test_p"] == "0.5"
    assert (row["utility_zero_shot_%_ci_low"], row["utility_zero_shot_%_n"]) == (pytest.approx(wilson(2, 3)[0]), 3)
    with pytest.raises(AmdError, match="security_pairs: no student"):
        paired.security_pairs(load_runs([student_run(tmp_path, "t", spec, "zero_shot", 0, [(True, 1)])]))


def test_written_table_carries_caption_citation_and_note(grid, tmp_path):
    table = tables.table1_main(load_runs(grid))
    tables.write_table("table1_main", table, tmp_path / "t.csv", tmp_path / "t.md", note="pipeline demo only")
    text = (tmp_path / "t.md").read_text()
    assert text.startswith("**Table 1") and "arXiv 2608.07169" in text and "Note: pipeline demo only" in text
    assert pd.read_csv(tmp_path / "t.csv").shape[0] == len(table)


def test_bad_inputs_are_one_line_errors(tmp_path):
    with pytest.raises(AmdError, match="no such trajectory file"):
        load_runs([str(tmp_path / "missing.jsonl")])
    teacher_only = write_run(tmp_path, layout.TEACHER_RUN.format(benchmark="bfcl", teacher="t"), [(True, 1)],
                             "oracle", kind="oracle")
    with pytest.raises(AmdError, match="no student runs"):
        tables.table2_ablation(load_runs([teacher_only]))


def test_a_paper_number_sits_only_beside_a_cell_of_the_paper_setting(paper_grid, tmp_path):
    spec = "vllm:Qwen/Qwen3-4B@http://127.0.0.1:9/v1"
    shared = [student_run(tmp_path, "qwen3_4b", spec, "wf_st_fn", 0, [(True, 4)] * 200, protocol="shared"),
              student_run(tmp_path, "qwen3_4b", spec, "memp", 0, [(True, 4)] * 200, k="memp3", protocol="shared"),
              student_run(tmp_path, "qwen3_4b", spec, "sasm", 0, [(True, 4)] * 4, k="sasm1", protocol="shared")]
    sampled = student_run(tmp_path, "qwen3_4b_t07", spec, "wf_st_fn", 0, [(True, 4)] * 200, protocol="shared")
    rewrite_records(sampled, lambda _, rec: rec["agent"].update(params={"temperature": 0.7, "seed": 0}))
    other_model = student_run(tmp_path, "qwen3_4b_2507", "vllm:Qwen/Qwen3-4B-Instruct-2507@http://h/v1", "wf_st_fn",
                              0, [(True, 4)] * 200, protocol="shared")
    runs = load_runs(paper_grid + shared + [sampled, other_model])
    for name in ("table1_main", "table2_ablation", "table5_repeats"):
        table = tables.build_table(name, runs)
        with_paper = table[table.get("paper", pd.Series(dtype=float)).notna()] if "paper" in table else table[:0]
        assert set(with_paper["protocol"].dropna()) <= {"shared"}, name
        assert set(with_paper["setting"]) <= {"paper", "both"}, name
    table1 = tables.table1_main(runs).set_index(["agent", "memory", "protocol"])
    assert table1.loc[("qwen3_4b", "wf_st_fn", "shared"), "paper"] == 38.50
    assert table1.loc[("qwen3_4b", "memp", "shared"), "paper"] == 28.25
    assert table1.loc[("qwen3_4b", "wf_st_fn", "shared"), "setting"] == "paper"
    assert pd.isna(table1.loc[("qwen3_4b", "sasm", "shared"), "paper"])  # 4 tasks: not the paper's 200
    assert pd.isna(table1.loc[("qwen3_4b", "wf_st_fn", "self_excluded"), "paper"])
    assert table1.loc[("qwen3_4b_t07", "wf_st_fn", "shared"), "setting"] == "sampled T=0.7"
    assert pd.isna(table1.loc[("qwen3_4b_t07", "wf_st_fn", "shared"), "paper"])
    assert pd.isna(table1.loc[("qwen3_4b_2507", "wf_st_fn", "shared"), "paper"])  # not the paper's Qwen3-4B
    fig = figures.fig3_steps(runs)
    labels = {text.get_text() for text in fig.legends[0].get_texts()}
    assert {"wf_st_fn (shared)", "wf_st_fn (self_excluded)"} <= labels


def test_a_harness_variant_is_a_row_of_its_own_in_every_table_labelled_and_without_paper_numbers(paper_grid,
                                                                                                    tmp_path):
    """The paper's text run beside the release (config `variants`: paper_text): its own rows, never pooled with the
    release's; the paper's number stays beside the release's row, which made it."""
    spec = "vllm:Qwen/Qwen3-4B@http://127.0.0.1:9/v1"
    release = student_run(tmp_path, "qwen3_4b", spec, "wf_st_fn", 0, [(True, 4)] * 200, protocol="shared")
    text = student_run(tmp_path, "qwen3_4b", spec, "wf_st_fn", 0, [(False, 4)] * 200, protocol="shared",
                       variant="-paper_text")
    assert "/wf_st_fn-paper_text/shared/" in text and layout.describe_run(text)["variant"] == "paper_text"
    assert layout.describe_run(release)["variant"] is None
    runs = load_runs(paper_grid + [release, text])
    table1 = tables.table1_main(runs)
    cell = table1[(table1["agent"] == "qwen3_4b") & (table1["memory"] == "wf_st_fn") & (table1["protocol"] == "shared")]
    cell = cell.set_index("setting")
    assert (cell.loc["paper", "success"], cell.loc["paper", "paper"]) == (100.0, 38.50)
    assert cell.loc["paper_text", "success"] == 0.0 and pd.isna(cell.loc["paper_text", "paper"])
    for name in ("table2_ablation", "table3_teacher", "table4_representation", "table5_repeats", "table6_protocols"):
        labelled = tables.build_table(name, runs)
        assert "paper_text" in set(labelled["setting"]), name
        assert labelled[labelled["setting"] == "paper_text"].get("paper", pd.Series(dtype=float)).isna().all()
    assert "wf_st_fn-paper_text" in set(paired.paired_tasks(runs)["memory"])  # tables without a setting column
    legend = {text.get_text() for text in figures.fig3_steps(runs).legends[0].get_texts()}
    assert "wf_st_fn-paper_text (shared)" in legend


def rewrite_records(path, change):
    """Apply `change(index, record)` to every record of a run file (each must stay schema-valid)."""
    records = [json.loads(line) for line in Path(path).read_text().splitlines()]
    for index, rec in enumerate(records):
        change(index, rec)
        validate(rec)
    Path(path).write_text("".join(json.dumps(r) + "\n" for r in records))


def test_decomposition_check_pairs_each_checked_run_with_its_single_shot_run(tmp_path):
    spec = "vllm:Qwen/Qwen3-4B@http://h/v1"
    single = student_run(tmp_path, "qwen3_4b", spec, "wf_st_fn", 0, [(True, 2), (False, 2), (False, 2), (True, 2)])
    checked = student_run(tmp_path, "qwen3_4b", spec, "wf_st_fn_checked", 0,
                          [(True, 2), (True, 2), (False, 2), (True, 2)])
    other_seed = student_run(tmp_path, "qwen3_4b", spec, "wf_st_fn_checked", 1, [(True, 2)] * 4)  # no pair
    differs = [False, True, True, False]

    def decomposed(index, rec):
        merged = ["b"] if differs[index] else ["a"]
        rec["memory_details"] = {"decomposition": {"single_shot": ["a"], "merged": merged,
                                                   "differs": differs[index]}}

    rewrite_records(checked, decomposed)
    table = amd_tables.decomposition_check(load_runs([single, checked, other_seed]))
    assert len(table) == 1
    row = table.iloc[0]
    assert (row["memory"], row["baseline"], row["samples"], row["seed"]) == ("wf_st_fn_checked", "wf_st_fn", 5, 0)
    assert (row["differ"], row["differ_%"]) == (2, 50.0)
    assert (row["single_shot_on_differ"], row["checked_on_differ"]) == (0, 1)  # tasks 1 and 2: 1 solved when checked
    assert (row["tasks"], row["single_shot"], row["checked"], row["checked_only"], row["single_shot_only"]) == \
        (4, 2, 3, 1, 0)
    assert row["solved_only_checked"] == "multi_turn_base_1" and row["sign_test_p"] == "1"
    tables.write_table("decomposition_check", table, tmp_path / "d.csv", tmp_path / "d.md")
    assert (tmp_path / "d.md").read_text().startswith("**Checked decomposition (beyond the paper)")
    with pytest.raises(AmdError, match="decomposition_check: no run of a config variant"):
        amd_tables.decomposition_check(load_runs([single]))


def test_function_gating_compares_each_variant_with_always_on_function_memory(tmp_path):
    spec = "vllm:google/gemma-4-E4B-it@http://h/v1"
    outcomes = {"wf_st_fn": [(True, 1), (False, 1)], "wf_st_fn_gated": [(True, 1), (True, 1)],
                "wf_st_fn_signature": [(False, 1), (False, 1)], "wf_st_fn_checked": [(True, 1), (True, 1)]}
    runs = {memcfg: student_run(tmp_path, "gemma4_e4b", spec, memcfg, 0, result) for memcfg, result in outcomes.items()}
    hint = {"type": "function", "entry_id": "function:t:0", "source_task_id": "t", "query": "mv"}

    def hinted(withheld):
        def change(_, rec):
            step = rec["turns"][0]["steps"][0]
            step["injected_memory"] = [] if withheld else [hint, hint | {"entry_id": "function:t:1"}]
            if withheld:
                step["memory_details"] = {"fn_gate": {"withheld": ["mv"]}}
            rec["tokens"]["prompt"] = 100 if withheld else 300
        return change

    rewrite_records(runs["wf_st_fn"], hinted(False))
    rewrite_records(runs["wf_st_fn_gated"], hinted(True))
    table = amd_tables.function_gating(load_runs(list(runs.values()))).set_index("memory")
    assert set(table.index) == {"wf_st_fn_gated", "wf_st_fn_signature"}  # the checked run is not a function variant
    gated, compact = table.loc["wf_st_fn_gated"], table.loc["wf_st_fn_signature"]
    assert (gated["fn_gate"], gated["fn_form"], compact["fn_gate"], compact["fn_form"]) == \
        ("repeat", "bank", "always", "signature")
    assert (gated["hints_per_task_always_on"], gated["hints_per_task"], gated["withheld_per_task"]) == (1.0, 0.0, 1.0)
    assert (gated["prompt_tokens_per_task_always_on"], gated["prompt_tokens_per_task"]) == (300.0, 100.0)
    assert (gated["always_on"], gated["variant"], gated["variant_only"], gated["always_on_only"]) == (1, 2, 1, 0)
    assert (compact["variant"], compact["always_on_only"], compact["difference_pp"]) == (0, 1, -50.0)


def test_online_vs_frozen_pairs_each_online_run_with_the_frozen_run_of_its_cell(tmp_path):
    spec = "vllm:Qwen/Qwen3-4B@http://127.0.0.1:9/v1"
    frozen = student_run(tmp_path, "qwen3_4b", spec, "wf_st_fn", 0, [(True, 4), (False, 6), (False, 6), (True, 4)])
    online = student_run(tmp_path, "qwen3_4b", spec, "wf_st_fn_online", 0, [(True, 4), (True, 5), (True, 5), (False, 6)])
    unpaired = student_run(tmp_path, "qwen3_4b", spec, "wf_st_fn_online", 1, [(True, 4)] * 4)  # no frozen seed 1
    events = [{"task_id": "multi_turn_base_0", "retrieved": ["workflow:t:0"], "dedup": [],
               "added": [{"id": "online:workflow:multi_turn_base_0:0"}, {"id": "online:subtask:multi_turn_base_0:0"}]},
              {"task_id": "multi_turn_base_1", "retrieved": ["online:workflow:multi_turn_base_0:0"],
               "dedup": [{"entry_id": "online:workflow:multi_turn_base_1:0", "dropped": True}], "added": []},
              {"task_id": "multi_turn_base_2", "retrieved": ["workflow:t:0"], "dedup": [], "added": []},
              {"task_id": "multi_turn_base_3", "retrieved": ["online:subtask:multi_turn_base_0:0"], "dedup": [],
               "added": []}]
    Path(f"{online}.online.jsonl").write_text("\n".join(json.dumps(line) for line in [{"schema": "h"}, *events]) + "\n")
    teacher = write_run(tmp_path, layout.TEACHER_RUN.format(benchmark="bfcl", teacher="gpt5mini"),
                        [(True, 3)] * 4, "openai:gpt-5-mini")  # a run without a seed: the seed column is float
    table = amd_tables.online_vs_frozen(load_runs([frozen, online, unpaired, teacher]))
    (row,) = table.itertuples()
    assert (row.baseline, row.memory, row.seed, row.tasks) == ("wf_st_fn", "wf_st_fn_online", 0, 4)
    assert (row.frozen, row.online, row.online_only, row.frozen_only) == (2, 3, 2, 1)
    assert row.solved_only_online == "multi_turn_base_1 multi_turn_base_2" and row.difference_pp == 25.0
    assert row.sign_test_p == "1"  # 2 against 1 discordant pairs
    assert (row.entries_added, row.duplicates_dropped, row.tasks_using_added) == (2, 1, 2)
    tables.write_table("online_vs_frozen", table, tmp_path / "o.csv", tmp_path / "o.md")
    written = (tmp_path / "o.md").read_text()
    assert written.startswith("**Online memory vs the same memory frozen")
    assert "|      0 | wf_st_fn_online" in written  # the seed as a whole number
    with pytest.raises(AmdError, match="online_vs_frozen: no run of a config variant"):
        other_types = student_run(tmp_path, "qwen3_4b", spec, "wf_st", 1, [(True, 4)] * 4, k="wf1_st1")
        amd_tables.online_vs_frozen(load_runs([unpaired, other_types]))


def test_the_strict_verdict_fails_a_success_the_step_cap_ended_in_every_table_score_and_the_paired_test(tmp_path):
    """AgentDojo's harness checks an episode cut off by its cap as it stands: such a success is the benchmark's,
    not the strict verdict's (amd.benchmarks.base.strict_success), and old files have the verdict too."""
    zero = student_run(tmp_path, "s", "local:m", "zero_shot", 0, [(True, 3), (False, 3), (False, 3)])
    memory = student_run(tmp_path, "s", "local:m", "wf_st_fn", 0, [(True, 3), (True, 20), (True, 20)])
    lines = Path(memory).read_text().splitlines()
    capped = [json.loads(line) | {"status": "step_limit", "error": "more than 20 steps in the task"}
              for line in lines[1:]]
    Path(memory).write_text("\n".join([lines[0], *map(json.dumps, capped)]) + "\n")
    runs = load_runs([zero, memory])
    table = tables.table2_ablation(runs).set_index("memory")
    assert table.loc["wf_st_fn", "success"] == 100.0 and table.loc["wf_st_fn", "strict"] == pytest.approx(100 / 3)
    pairs = paired.paired_tasks(runs).set_index("verdict")
    assert (pairs.loc["benchmark", "memory_only"], pairs.loc["strict", "memory_only"]) == (2, 0)
    scored = score.summarize(memory)
    assert (scored["success_%"], scored["strict_%"]) == (100.0, 33.33)
