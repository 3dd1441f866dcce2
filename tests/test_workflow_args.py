"""Config values to `amd` arguments, in one place: every key the config schema allows is mapped, and every
command the workflow makes for the paper grid and the embedded default parses with amd's own parser."""

import shlex
from pathlib import Path

import pytest
import yaml

from amd.analysis import layout
from amd.cli import build_parser
from amd.workflow import args
from amd.workflow.config import ConfigError, active_config, config_schema, merge_configs
from amd.workflow.grid import Grid

REPO = Path(__file__).resolve().parents[1]
SAMPLE_VALUES = {"max_steps_per_turn": 20, "max_steps": 40, "temperature": 0.0, "max_tokens": 512, "concurrency": 4}


class Wildcards(dict):
    """What a rule's input and params functions receive: names as attributes and as keys."""

    __getattr__ = dict.__getitem__


def load_config(*names) -> dict:
    """The config the workflow uses with these files of config/ as --configfile (none: the embedded default)."""
    overlay = {}
    for name in names:
        overlay = merge_configs(overlay, yaml.safe_load((REPO / "config" / name).read_text()))
    return active_config(overlay, REPO / "config")


def test_every_key_the_schema_allows_is_mapped_to_a_flag():
    schema = config_schema()
    assert set(schema["properties"]["run"]["properties"]) == set(args.RUN_FLAGS)
    assert set(schema["$defs"]["agent"]["properties"]) == set(args.RUN_FLAGS) | set(args.AGENT_KEYS)
    writer_keys = set(schema["properties"]["writers"]["additionalProperties"]["properties"])
    assert writer_keys == {"spec"} | set(args.SAMPLING)


def test_every_run_flag_is_one_amd_run_accepts():
    flags = args.run_flags(SAMPLE_VALUES, samples=True)
    parsed = build_parser().parse_args(["run", "bfcl", "--agent", "oracle", "--out", "x", *shlex.split(flags)])
    assert {key: getattr(parsed, key) for key in SAMPLE_VALUES} == SAMPLE_VALUES
    assert "--temperature" not in args.run_flags(SAMPLE_VALUES, samples=False)
    model_options = args.run_flags({"prompting": "official", "think": True}, samples=True)
    parsed = build_parser().parse_args(["run", "bfcl", "--agent", "x:y", "--out", "x", *shlex.split(model_options)])
    assert (parsed.prompting, parsed.think) == ("official", "on")
    assert args.run_flags({"prompting": "official", "think": True}, samples=False) == ""


def parse_shell(command: str):
    """The `amd ...` part of a rule's shell command, parsed by amd's own parser."""
    words = shlex.split(command.split(" > ", 1)[0])
    if "serve-run" in words[:2]:  # amd serve-run --server-file FILE amd run ...
        words = words[words.index("amd", 1):]
    assert words[0] == "amd"
    return build_parser().parse_args(words[1:])


def run_command(grid: Grid, cell: dict) -> str:
    student = cell["student"]
    server = "results/servers/x.url" if grid.launch(student) else ""
    command = (f"{grid.launch(student)}{server} amd run {cell['benchmark']} {grid.agent_args(student)} --out x "
               f"{grid.benchmark_args(cell['benchmark'], 'student', student)} {grid.run_args(student, cell['benchmark'])} "
               f"--seed {cell['seed']}")
    if cell["method"]:
        wildcards = Wildcards(cell, k=grid.run_path(cell).split("/k_")[1].split("/")[0], seed=str(cell["seed"]))
        command += f" --memory {grid.bank_path(wildcards)} {grid.memory_args(wildcards)}"
    return command


@pytest.mark.parametrize("files", [(), ("paper.yaml",)])
def test_every_command_of_the_grid_parses_with_amd_own_parser(files):
    grid = Grid(load_config(*files))
    commands = 0
    for experiment in grid.config["experiments"]:
        for cell in grid.cells(experiment):
            parsed = parse_shell(run_command(grid, cell))
            assert parsed.benchmark == cell["benchmark"] and parsed.memory_config == cell["memcfg"]
            if cell["method"] and cell["teacher"] in grid.pools():
                wildcards = Wildcards(cell, seed=str(cell["seed"]))
                pool = parse_shell(f"amd memory pool --banks {' '.join(grid.pool_member_banks(wildcards))} "
                                   f"--teachers {grid.pool_member_names(wildcards)} --out b")
                assert len(pool.banks) == len(pool.teachers) == len(grid.pools()[cell["teacher"]]["teachers"])
            elif cell["method"]:
                wildcards = Wildcards(cell, seed=str(cell["seed"]))
                build = parse_shell(f"amd memory build --trajectories t.jsonl {grid.build_args(wildcards)} "
                                    f"{grid.writer_args(wildcards)} {grid.embedder_args(wildcards)} --out b")
                assert build.method == cell["method"]
            commands += 1
    assert commands > 0


@pytest.mark.parametrize("files", [(), ("paper.yaml",)])
def test_each_student_run_has_a_page_beside_its_zero_shot_run_with_its_bank(files):
    grid = Grid(load_config(*files))
    views = [path for path in grid.all_targets() if path.endswith("/view.html")]
    in_all = {grid.run_path(cell) for experiment, spec in grid.config["experiments"].items()
              if not spec.get("on_demand") and not spec.get("probe") for cell in grid.cells(experiment)}
    assert views and len(views) == len(in_all)
    paired = 0
    for view in views:
        run = view.removesuffix("/view.html").removeprefix("results/")
        parsed = parse_shell(f"amd view {layout.run_of_view(run)} {grid.view_args(Wildcards(run=run))} --out {view}")
        cell = layout.describe_run(layout.run_of_view(run))
        if cell["role"] == "zero_shot":
            assert parsed.against is None and parsed.bank is None
            continue
        zero_shot = layout.ZERO_SHOT_RUN.format(**cell)
        assert parsed.against == (zero_shot if zero_shot in grid.student_runs else None)
        assert parsed.bank == grid.bank_path(cell)
        paired += parsed.against is not None
    assert paired >= 2  # the default's wf_st_fn and wf_st_fn_online runs, beside its zero-shot run


def test_memory_flags_carry_the_method_run_options():
    flags = args.memory_flags("wf_st", ("wf", "st"), "cross_split", {"wf": 1, "st": 2, "fn": 1},
                              {"wf": 0.3, "st": 0.45}, 3, {"per_turn": True})
    parsed = build_parser().parse_args(["run", "bfcl", "--agent", "oracle", "--out", "x", *shlex.split(flags)])
    assert (parsed.k, parsed.delta, parsed.split_seed) == ("wf=1,st=2", "st=0.45,wf=0.3", 3)
    assert parsed.memory_option == ["per_turn=true"]


def test_an_undefined_name_in_an_experiment_is_a_config_error():
    config = load_config()
    config["experiments"]["ablation"]["teachers"] = ["nobody"]
    with pytest.raises(ConfigError, match="experiments.ablation.teachers: 'nobody' is not defined"):
        Grid(config)


def test_a_setting_is_in_the_paths_and_the_build_of_only_the_methods_that_have_it():
    """AMD's representation is a setting of AMD's: its banks and runs carry the name, its build gets the option;
    a baseline's have neither, and a config that uses no AMD config needs no `representations` at all."""
    config = load_config()
    config["experiments"] = {"both": {"benchmarks": ["bfcl"], "students": ["qwen05"],
                                      "memory_configs": ["wf", "memp"], "outputs": ["table1_main"]}}
    grid = Grid(config)
    cells = {cell["memcfg"]: cell for cell in grid.cells("both")}
    assert "/student-qwen05/oracle-rules-minilm-amd/wf/" in grid.run_path(cells["wf"])
    assert "/student-qwen05/oracle-rules-minilm/memp/" in grid.run_path(cells["memp"])
    builds = {}
    for name, cell in cells.items():
        wildcards = Wildcards(cell, seed=str(cell["seed"]))
        builds[name] = parse_shell(f"amd memory build --trajectories t.jsonl {grid.build_args(wildcards)} "
                                   f"--embedder hash:8 --out {grid.bank_path(wildcards)}")
    assert builds["wf"].option == ["representation=wf=prose,st=code,fn=code"] and builds["memp"].option == []
    assert builds["memp"].out.endswith("/bank/memp/oracle-rules-minilm")
    del config["representations"], config["defaults"]["representation"]
    config["experiments"]["both"]["memory_configs"] = ["zero_shot", "memp"]
    Grid(config)
    config["experiments"]["both"]["memory_configs"] = ["wf"]
    with pytest.raises(ConfigError, match=r"experiments\.both: .*'representation' needs `representations` here or "
                       r"`defaults\.representation`"):
        Grid(config)


def test_benchmark_options_reach_the_command_line():
    flags = args.benchmark_flags(["a_1", "b_2"], {"suite": "banking", "offline": True})
    parsed = build_parser().parse_args(["run", "x", "--agent", "oracle", "--out", "o", *shlex.split(flags)])
    assert parsed.tasks == "a_1,b_2" and parsed.benchmark_option == ["offline=true", "suite=banking"]


def test_in_the_paper_grid_each_teacher_writes_its_own_memory():
    grid = Grid(load_config("paper.yaml"))
    memory_cells = [cell for experiment in grid.config["experiments"] for cell in grid.cells(experiment)
                    if cell["method"]]
    assert memory_cells and all(cell["writer"] == cell["teacher"] for cell in memory_cells)
    student_memory = [cell for cell in memory_cells if cell["teacher"] == cell["student"]]
    assert student_memory  # the paper's Student Memory: the student writes from its own runs
    wildcards = Wildcards(student_memory[0], seed="0")
    assert grid.writer_launch(wildcards) == "amd serve-run --server-file "
    assert "@{base_url}" in grid.writer_args(wildcards)


def test_a_model_free_teacher_cannot_write_its_own_memory():
    config = load_config()
    config["defaults"]["writer"] = "teacher"
    with pytest.raises(ConfigError, match="writer 'oracle' has no model"):
        Grid(config)


def test_repeats_in_the_paper_grid_decode_greedily_with_a_recorded_seed_each_and_sampling_is_its_own_experiment():
    grid = Grid(load_config("paper.yaml"))
    for experiment, temperature in (("repeats_paper", 0), ("repeats", 0), ("sampling", 0.7)):
        cells = [cell for cell in grid.cells(experiment) if cell["benchmark"] == "bfcl"]
        commands = [parse_shell(run_command(grid, cell)) for cell in cells if cell["memcfg"] == "zero_shot"]
        assert sorted(command.seed for command in commands) == [0, 1, 2, 3, 4], experiment
        assert {command.temperature for command in commands} == {temperature}, experiment
    teacher = parse_shell(f"amd run bfcl {grid.agent_args('gpt5mini')} --out x {grid.run_args('gpt5mini', 'bfcl')}")
    assert teacher.temperature is None and teacher.max_tokens >= 16384


def test_the_paper_grid_runs_tables_1_and_2_also_under_the_paper_protocol_by_name():
    grid = Grid(load_config("paper.yaml"))
    for name in ("table1_main", "table2_ablation"):
        runs = grid.output_runs(name)
        assert any("/shared/" in run for run in runs) and any("/self_excluded/" in run for run in runs), name
    assert all(cell["protocol"] == "self_excluded" for cell in grid.cells("main"))


def test_each_benchmark_of_the_paper_grid_runs_in_the_authors_harness_and_an_agent_still_overrides_it():
    grid = Grid(load_config("paper.yaml"))
    cells = {(cell["benchmark"], cell["memcfg"]): cell for cell in grid.cells("main_paper")}
    bfcl = parse_shell(run_command(grid, cells["bfcl", "wf_st_fn"]))
    assert (bfcl.prompting, bfcl.max_tokens) == ("official", 4096)
    assert {"harness=official", "per_turn=true", "turn_memory=system", "placement=before", "fn_doc=true",
            "subtask_view=calls", "subtask_calls=2"} <= set(bfcl.benchmark_option + bfcl.memory_option)
    assert "wf=-1" in bfcl.delta  # the BFCL release has no workflow threshold
    appworld = parse_shell(run_command(grid, cells["appworld", "wf_st_fn"]))
    assert (appworld.prompting, appworld.max_tokens) == ("amd", 4096) and "harness=paper" in appworld.benchmark_option
    assert {"fn_doc=true", "prompts=benchmark"} <= set(appworld.memory_option)
    toolsandbox = cells["toolsandbox", "wf_st_fn"]
    assert "/k_wf1_st1_fn2/" in grid.run_path(toolsandbox)
    memory = parse_shell(run_command(grid, toolsandbox))
    assert memory.prompting == "official" and "wf=0.5" in memory.delta
    assert "query=scenario" in memory.benchmark_option and {"fn_doc=true", "subtask_view=calls"} <= set(
        memory.memory_option)
    teacher = parse_shell(f"amd run bfcl {grid.agent_args('gpt5mini')} --out x {grid.run_args('gpt5mini', 'bfcl')}")
    assert (teacher.prompting, teacher.max_tokens) == ("official", 16384)
    wildcards = Wildcards(cells["bfcl", "wf_st_fn"], seed="0")
    build = parse_shell(f"amd memory build --trajectories t.jsonl {grid.build_args(wildcards)} "
                        f"{grid.writer_args(wildcards)} {grid.embedder_args(wildcards)} --out b")
    assert {"insights=keep", "observation_chars=500", "prompts=benchmark", "audit=none", "entry_values=masked",
            "subtask_key=label_description"} <= set(build.option)
    default = Grid(load_config())
    assert not any("harness" in flag for flag in parse_shell(run_command(default, next(default.cells("ablation"))))
                   .benchmark_option)


@pytest.mark.parametrize("harness, message", [
    ({"memory_options": {"amd": {"placement": "middle"}}}, "benchmarks.bfcl.memory_options.amd.placement"),
    ({"build_options": {"amd": {"representation": "wf=code"}}}, "benchmarks.bfcl.build_options.amd"),
    ({"run": {"max_tokens": 0}}, "benchmarks.bfcl.run.max_tokens"),
])
def test_a_bad_harness_value_of_a_benchmark_is_a_config_error_naming_it(harness, message):
    config = load_config()
    config["benchmarks"]["bfcl"] |= harness
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        Grid(config)
