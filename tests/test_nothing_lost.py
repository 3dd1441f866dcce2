"""Nothing lost, round two (issue 41): a run file that vanishes under its run, a link around the one-writer lock,
commands writing over their own inputs or over a folder not theirs, hostile config values, SIGTERM.

Each case is refused in one line (`amd: error: ...`) or handled with nothing lost; real processes where the case is
about processes (a file removed under a running `amd run`, SIGTERM).
"""

import os
import signal
import subprocess
import sys

import pytest
import yaml
from conftest import REPO
from replay_model import ground_truth_answers, replay_model
from scripted_server import ScriptedServer
from test_pipeline_workflow import make_workdir, snakemake
from test_reliability import amd_process, held_replies, holder_file, model_run, one_error_line

from amd.cli import main
from amd.core.errors import AmdError
from amd.core.files import sole_writer
from amd.core.schema import RunFile, read_run
from amd.workflow.config import MAX_VALUES, ConfigError, active_config, merge_configs, read_config
from amd.workflow.grid import Grid

TASKS = [f"multi_turn_base_{i}" for i in range(8)]


def oracle_run(out, limit: int = 12) -> list[str]:
    return ["run", "bfcl", "--agent", "oracle", "--limit", str(limit), "--out", str(out), "--no-progress"]


# 1. A run file removed, replaced or cut while its run goes on is rewritten whole from what the run holds


@pytest.mark.parametrize("damage", ["removed", "replaced", "cut"])
@pytest.mark.parametrize("after", [4, 12])
def test_a_run_file_damaged_under_its_run_is_rewritten_from_the_records_the_run_holds(tmp_path, monkeypatch, caplog,
                                                                                      damage, after):
    out, append = tmp_path / "run.jsonl", RunFile.append

    def then_damaged(self, record):
        append(self, record)
        if len(self.lines) != after:
            return
        if damage == "removed":
            out.unlink()
        elif damage == "replaced":
            (tmp_path / "other").write_text("{}\n")
            os.replace(tmp_path / "other", out)
        else:
            os.truncate(out, 10)

    monkeypatch.setattr(RunFile, "append", then_damaged)
    assert main(oracle_run(out)) == 0
    assert [record["task_id"] for record in read_run(out)] == TASKS + [f"multi_turn_base_{i}" for i in (8, 9, 10, 11)]
    if after < 12:  # found by the next append; after the last one, the final rewrite writes what the run holds
        assert f"{out} was removed, replaced or cut while this run wrote it" in caplog.text


def test_a_run_file_removed_by_another_process_while_a_run_waits_for_its_model_loses_nothing(tmp_path):
    """The issue's case: `amd run ... &`, then `rm` of its output after 4 records."""
    out, answer, removed = tmp_path / "run.jsonl", replay_model(ground_truth_answers(TASKS)), []

    def remove_after_four(request):
        if not removed and out.exists() and len(out.read_bytes().splitlines()) >= 4:
            out.unlink()
            removed.append(True)
        return answer(request)

    with ScriptedServer(remove_after_four) as server:
        run = amd_process("run", "bfcl", "--agent", f"vllm:m@{server.url}", "--tasks", ",".join(TASKS), "--out", out,
                          "--no-progress")
        _, err = run.communicate(timeout=300)
    assert run.returncode == 0 and removed, err[-3000:]
    assert "was removed, replaced or cut while this run wrote it (by another process); rewrote it from the" in err
    assert [record["task_id"] for record in read_run(out)] == TASKS


def test_a_jobs_log_removed_and_rewritten_by_a_second_job_keeps_the_first_jobs_lines(tmp_path):
    """What Snakemake does to a job's log when a second workflow (--nolock) starts the job again: it removes the log
    and the second job writes a new one at its path. The first job's lines stay under LOG.PID."""
    out, log = tmp_path / "run.jsonl", tmp_path / "run.log"
    respond, asked, released = held_replies(TASKS)
    with ScriptedServer(respond) as server, open(log, "w") as stderr:
        first = subprocess.Popen([sys.executable, "-m", "amd.cli", *map(str, model_run(server, TASKS, out))],
                                 stdout=subprocess.DEVNULL, stderr=stderr)
        assert asked.wait(120)
        log.unlink()
        log.write_text("amd: error: the second job's line\n")
        released.set()
        assert first.wait(300) == 0
    assert log.read_text() == "amd: error: the second job's line\n"
    kept = tmp_path / f"run.log.{first.pid}"
    assert f"amd run: {len(TASKS)} tasks run, 0 already done" in kept.read_text()


def test_a_log_whose_path_still_holds_it_gets_no_second_name(tmp_path):
    with open(tmp_path / "run.log", "w") as stderr:
        run = subprocess.run([sys.executable, "-m", "amd.cli", *oracle_run(tmp_path / "run.jsonl", 2)],
                             stderr=stderr, check=False)
    assert run.returncode == 0 and sorted(path.name for path in tmp_path.glob("run.log*")) == ["run.log"]
    assert "amd run: 2 tasks run" in (tmp_path / "run.log").read_text()


# 2. The one-writer lock is that of the resolved path; commands never write over their own inputs


def test_a_link_to_an_output_is_the_same_output_for_the_lock_and_stays_a_link(tmp_path):
    real, link = tmp_path / "d" / "real.jsonl", tmp_path / "d" / "link.jsonl"
    real.parent.mkdir()
    link.symlink_to(real.name)
    with sole_writer(real, "amd run"), pytest.raises(AmdError, match=f"{link} is being written by another process"):
        sole_writer(link, "amd run").__enter__()
    assert main(oracle_run(link, 3)) == 0
    assert link.is_symlink() and len(read_run(real)) == 3


def test_two_runs_on_an_output_and_a_link_to_it_leave_one_run_with_each_task_once(tmp_path):
    real, link = tmp_path / "real.jsonl", tmp_path / "link.jsonl"
    link.symlink_to(real)
    runs = [amd_process(*oracle_run(path, 60)) for path in (link, real)]
    results = [(run.wait(timeout=300), run.stderr.read()) for run in runs]
    assert sorted(code for code, _ in results) in ([0, 0], [0, 2]), results
    assert all("is being written by another process" in one_error_line(err) for code, err in results if code == 2)
    assert len({record["task_id"] for record in read_run(real)}) == 60 and link.is_symlink()


@pytest.fixture
def run_file(tmp_path):
    assert main(oracle_run(tmp_path / "a.jsonl", 3)) == 0
    return tmp_path / "a.jsonl"


def refused(argv, capsys) -> str:
    assert main([str(arg) for arg in argv]) == 2
    return one_error_line(capsys.readouterr().err)


def test_score_and_table_refuse_to_write_over_the_run_file_they_read(run_file, tmp_path, capsys):
    before = run_file.read_bytes()
    assert "output 'a.jsonl' is the input 'a.jsonl' of the same command" in refused(
        ["score", "a.jsonl", "--json", "a.jsonl"], capsys)
    assert f"is the input {str(run_file)!r}" in refused(
        ["table", "table2_ablation", "--runs", run_file, "--out", run_file, tmp_path / "t.md"], capsys)
    assert run_file.read_bytes() == before


def test_memory_build_refuses_its_input_a_folder_not_a_bank_and_the_current_folder(run_file, tmp_path, capsys,
                                                                                  monkeypatch):
    build = ["memory", "build", "--embedder", "hash:8", "--trajectories"]
    assert "output 'a.jsonl' is the input 'a.jsonl'" in refused([*build, "a.jsonl", "--out", "a.jsonl"], capsys)
    victim = tmp_path / "victim"
    (victim / "sub").mkdir(parents=True)
    (victim / "a.jsonl").write_bytes(run_file.read_bytes())
    assert "output 'victim' holds the input 'victim/a.jsonl'" in refused(
        [*build, "victim/a.jsonl", "--out", "victim"], capsys)
    assert f"--out {victim}: exists and is not a memory bank (no bank manifest.json)" in refused(
        [*build, run_file, "--out", victim], capsys)
    (victim / "manifest.json").write_text('{"name": "a web app"}')  # a manifest, but not a bank's
    assert "exists and is not a memory bank" in refused([*build, run_file, "--out", victim], capsys)
    assert sorted(path.name for path in victim.iterdir()) == ["a.jsonl", "manifest.json", "sub"]
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    assert "--out '.' is the current folder or holds it" in refused([*build, run_file, "--out", "."], capsys)
    monkeypatch.chdir(tmp_path)
    assert main([*build, "a.jsonl", "--out", "bank"]) == 0 and main([*build, "a.jsonl", "--out", "bank"]) == 0
    assert not (tmp_path / "bank.old").exists() and not (tmp_path / "a.jsonl.old").exists()


def test_run_refuses_a_folder_for_its_output_and_writing_into_its_own_bank(run_file, tmp_path, capsys):
    assert "output '.' is a folder, not a file" in refused(oracle_run("."), capsys)
    assert main(["memory", "build", "--embedder", "hash:8", "--trajectories", str(run_file), "--out", "bank"]) == 0
    assert "output 'bank/x.jsonl' lies inside the input 'bank'" in refused(
        [*oracle_run("bank/x.jsonl"), "--memory", "bank", "--memory-config", "wf_st_fn"], capsys)
    assert f"output 'bank/x.jsonl' lies inside the memory bank {str(tmp_path / 'bank')!r}" in refused(
        oracle_run("bank/x.jsonl"), capsys)
    assert "output 'bank/s.json' lies inside the memory bank" in refused(["score", run_file, "--json", "bank/s.json"],
                                                                         capsys)


def test_a_lock_path_that_is_a_folder_is_one_line(tmp_path, capsys):
    (tmp_path / ".locks" / "run.jsonl.lock").mkdir(parents=True)
    line = refused(oracle_run(tmp_path / "run.jsonl"), capsys)
    assert f"{tmp_path / 'run.jsonl'}: cannot take its one-writer lock {tmp_path / '.locks/run.jsonl.lock'}: " \
           "Is a directory" in line


# 3. SIGTERM is met as SIGINT is


def test_sigterm_ends_a_run_in_one_line_releasing_its_lock_and_the_rerun_resumes(tmp_path):
    out = tmp_path / "run.jsonl"
    respond, asked, released = held_replies(TASKS)
    with ScriptedServer(respond) as server:
        argv = model_run(server, TASKS, out)
        first = amd_process(*argv)
        assert asked.wait(120)
        first.send_signal(signal.SIGTERM)  # while its first task waits for a reply
        released.set()
        _, err = first.communicate(timeout=120)
        assert first.returncode == 128 + signal.SIGTERM, err[-3000:]
        assert "Traceback" not in err and err.strip().splitlines()[-1] == (
            "amd: terminated (SIGTERM); finished tasks are kept, rerun the same command to resume")
        assert not holder_file(out).exists()
        assert [record["task_id"] for record in read_run(out)] == TASKS[:1]  # the task in flight, finished
        again = amd_process(*argv)
        _, err = again.communicate(timeout=300)
    assert again.returncode == 0, err[-3000:]
    assert [record["task_id"] for record in read_run(out)] == TASKS


# 4. The config: alias bombs, whole-string names, long texts, NaN and infinities, keys given twice


def config_file(tmp_path, text: str):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return path


def alias_bomb(levels: int = 9) -> str:
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for previous, name in zip("abcdefghij", "bcdefghij"[: levels - 1]):
        lines.append(f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]")
    return "note: x\n" + "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_at_once_without_expanding_it(tmp_path):
    path = config_file(tmp_path, alias_bomb())
    assert len(path.read_bytes()) < 1000
    with pytest.raises(ConfigError, match=rf"^config file {path}: [a-i]: expands to more than {MAX_VALUES:,} values"):
        read_config(path)
    shared = yaml.safe_load(path.read_text())  # as Snakemake loads a --configfile: aliases shared, not expanded
    with pytest.raises(ConfigError, match=rf"^config: [a-i]: expands to more than {MAX_VALUES:,} values"):
        Grid(active_config(shared, REPO / "config"))
    with pytest.raises(ConfigError, match=r"nests deeper than it can be read|nests more than 64 levels deep"):
        read_config(config_file(tmp_path, "a: " + "[" * 3000 + "]" * 3000 + "\n"))
    with pytest.raises(ConfigError, match=r"^config file .*: a(\.0)+: nests more than 64 levels deep"):
        read_config(config_file(tmp_path, "a: " + "[" * 80 + "]" * 80 + "\n"))
    looped = yaml.safe_load("a: &a [1, *a]\n")
    with pytest.raises(ConfigError, match=r"^config: a\.1: contains itself"):
        Grid(looped)


def test_a_key_given_twice_is_an_error_naming_the_key_and_both_lines(tmp_path):
    path = config_file(tmp_path, "name: mine\nrun:\n  max_steps: 3\n  seed: 1\n  max_steps: 4\n")
    with pytest.raises(ConfigError, match=rf"^config file {path}: key 'max_steps' is given twice in one mapping "
                                          r"\(lines 3 and 5\); keep one$"):
        read_config(path)
    assert read_config(config_file(tmp_path, "base: &b {x: 1}\nover: {<<: *b, x: 2}\n"))["over"] == {"x": 2}


@pytest.mark.parametrize("text, problem", [
    ("defaults: {delta: {wf: .nan}}", r"defaults\.delta\.wf: nan is not a number a config can use"),
    ("students: {s: {spec: oracle, temperature: .nan}}", r"students\.s\.temperature: nan is not a number"),
    ("estimate: {node_gpus: 8, gpus: {h: {memory_gb: .inf}}}", r"estimate\.gpus\.h\.memory_gb: inf is not a number"),
    ("benchmarks: {bfcl: {options: {x: '" + "y" * 20_000 + "'}}}",
     r"benchmarks\.bfcl\.options\.x: a text of 20,000 characters, more than the 10,000"),
])
def test_nan_infinities_and_huge_texts_are_refused_naming_the_key(tmp_path, text, problem):
    path = config_file(tmp_path, text + "\n")
    with pytest.raises(ConfigError, match=rf"^config file {path}: {problem}"):
        read_config(path)
    with pytest.raises(ConfigError, match=rf"^config: {problem}"):
        Grid(merge_configs(active_config({}, REPO / "config"), yaml.safe_load(text)))


@pytest.mark.parametrize("change, message", [
    ({"name": "hp\n"}, r"^config: name: 'hp\\n' is not a valid name"),
    ({"students": {"s": {"spec": "oracle\n"}}}, r"^config: students\.s\.spec: 'oracle\\n' is not an agent spec"),
    ({"note": "n" * 3000}, r"^config: note: is 3,000 characters long, more than the 2,000 allowed$"),
])
def test_names_match_whole_strings_and_a_note_has_a_length_limit(change, message):
    with pytest.raises(ConfigError, match=message):
        Grid(merge_configs(active_config({}, REPO / "config"), change))


def test_the_workflow_reads_its_configfiles_as_amd_does(tmp_path):
    where, env = make_workdir(tmp_path)
    (where / "twice.yaml").write_text("note: one\nnote: two\n")
    (where / "bomb.yaml").write_text(alias_bomb())
    for name, line in (("twice.yaml", "key 'note' is given twice in one mapping (lines 1 and 2)"),
                       ("bomb.yaml", f"expands to more than {MAX_VALUES:,} values")):
        done = snakemake(where, env, "-n", "--configfile", name, check=False)
        assert done.returncode != 0 and "Traceback" not in done.stderr
        assert done.stderr.strip().splitlines()[-1].startswith(f"amd: config file {where / name}: "), done.stderr
        assert line in done.stderr


@pytest.mark.parametrize("flags, message", [
    (["--delta", "wf=nan"], "--delta: workflow=nan is not a cosine similarity, a number from -1 to 1"),
    (["--delta", "wf=7"], "--delta: workflow=7.0 is not a cosine similarity, a number from -1 to 1"),
    (["--delta", "wf=-inf"], "--delta: workflow=-inf is not a cosine similarity, a number from -1 to 1"),
])
def test_delta_on_the_command_line_is_a_finite_similarity(flags, message, capsys):
    argv = [*oracle_run("b.jsonl"), "--memory", "bank", "--memory-config", "wf_st_fn", *flags]
    assert message in refused(argv, capsys)


def test_writer_params_refuse_nan_and_infinity(run_file, capsys):
    argv = ["memory", "build", "--trajectories", run_file, "--embedder", "hash:8", "--out", "bank", "--writer",
            "openai:x", "--writer-params", '{"temperature": NaN}']
    assert "--writer-params: NaN is not a number a writer can use" in refused(argv, capsys)


@pytest.mark.parametrize("flag", [["--temperature", "nan"], ["--request-timeout", "inf"]])
def test_nan_and_infinities_are_refused_for_float_flags(flag, capsys):
    with pytest.raises(SystemExit) as stop:
        main([*oracle_run("b.jsonl"), *flag])
    assert stop.value.code == 2
    assert f"argument {flag[0]}: invalid " in capsys.readouterr().err

