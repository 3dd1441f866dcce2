"""Nothing wrong, nothing lost (issue 30): one writer per output, checked banks, caches that heal, a full disk that
costs no paid reply, one line for undecodable input, tests that never read the checkout's results.

Each case of the issue either gives one line (`amd: error: ...`) and a non-zero exit, or heals with a warning that
names the file. The lock is tested with real concurrent processes, the full disk with a failing write and, where
user namespaces allow a tmpfs, with a real full disk.
"""

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO
from replay_model import ground_truth_answers, replay_model
from scripted_server import ScriptedServer
from test_memory_fixtures import all_records, failed_task, write_jsonl

from amd.cli import main
from amd.core.errors import AmdError
from amd.core.schema import read_run, read_trajectories
from amd.llm import open_model
from amd.memory.bank import load_bank
from amd.memory.build import build_bank
from amd.memory.embed import LocalMiniLM, VectorCache, cache_key
from amd.memory.method import open_memory

TASKS = [f"multi_turn_base_{i}" for i in range(3)]
HELLO = [{"role": "user", "content": "hello"}]


def amd_process(*argv, env=None, **popen) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "amd.cli", *map(str, argv)], env=env or os.environ,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


def one_error_line(err: str) -> str:
    """The single `amd: error:` line of a refused command (and no traceback)."""
    lines = [line for line in err.splitlines() if line.startswith("amd: error:")]
    assert len(lines) == 1 and "Traceback" not in err, err[-3000:]
    return lines[0]


def wait_for(path: Path, process: subprocess.Popen) -> None:
    while not path.exists():
        assert process.poll() is None, process.communicate()
        time.sleep(0.02)


# 1. One writer per output


def holder_file(out: Path) -> Path:
    return out.parent / ".locks" / f"{out.name}.lock.holder"


def held_replies(tasks: list[str]):
    """A model that answers `tasks` right, each reply held until `released` is set; `asked` is set by the first
    request. Returns (respond, asked, released)."""
    asked, released = threading.Event(), threading.Event()
    answer = replay_model(ground_truth_answers(tasks))

    def held_until_released(request):
        asked.set()
        released.wait(60)
        return answer(request)

    return held_until_released, asked, released


def model_run(server, tasks: list[str], out: Path) -> list:
    return ["run", "bfcl", "--agent", f"vllm:m@{server.url}", "--tasks", ",".join(tasks), "--out", out,
            "--request-timeout", "60", "--no-progress"]


def test_a_second_writer_is_refused_naming_the_holder_and_a_dead_holders_lock_is_taken_over(tmp_path):
    out = tmp_path / "run.jsonl"
    respond, _, released = held_replies(TASKS)
    with ScriptedServer(respond) as server:
        argv = model_run(server, TASKS, out)
        first = amd_process(*argv)
        wait_for(holder_file(out), first)
        second = amd_process(*argv)  # the first holds the lock while it waits for its reply
        _, err = second.communicate(timeout=120)
        assert second.returncode == 2
        line = one_error_line(err)
        assert f"{out} is being written by another process (`amd run`, pid {first.pid} on " in line
        first.send_signal(signal.SIGKILL)  # the holder dies holding the lock
        first.wait()
        released.set()
        third = amd_process(*argv)
        _, err = third.communicate(timeout=300)
    assert third.returncode == 0, err[-3000:]
    assert [record["task_id"] for record in read_run(out)] == TASKS
    assert not holder_file(out).exists()  # released: the next writer names itself afresh
    assert not [path for path in tmp_path.iterdir() if path.name.endswith((".lock", ".holder"))]  # in .locks/


def test_two_runs_started_together_leave_one_run_with_each_task_once(tmp_path):
    out = tmp_path / "run.jsonl"
    runs = [amd_process("run", "bfcl", "--agent", "oracle", "--limit", "60", "--out", out, "--no-progress")
            for _ in range(2)]
    errors = [run.communicate(timeout=300)[1] for run in runs]
    results = [(run.returncode, err) for run, err in zip(runs, errors)]
    refused = [err for code, err in results if code == 2]
    assert len(refused) <= 1 and all(code in (0, 2) for code, _ in results), results
    assert all("is being written by another process" in one_error_line(err) for err in refused)
    assert len({record["task_id"] for record in read_run(out)}) == 60


def test_where_files_cannot_be_locked_a_command_runs_with_a_warning(tmp_path, monkeypatch, caplog):
    def no_flock(self, *args, **kwargs):
        raise NotImplementedError("FileSystem does not appear to support flock")

    monkeypatch.setattr("amd.core.files.FileLock.acquire", no_flock)
    out = tmp_path / "run.jsonl"
    with caplog.at_level(logging.WARNING):
        assert main(["run", "bfcl", "--agent", "oracle", "--limit", "2", "--out", str(out), "--no-progress"]) == 0
    assert f"{out}: its file system cannot lock files" in caplog.text and len(read_run(out)) == 2


@pytest.fixture
def broken_runs(tmp_path):
    """A run file with two tasks written twice, and one holding two agents' records."""
    records = [record | {"task_id": f"multi_turn_base_{i}"} for i, record in enumerate(all_records())]
    doubled, mixed = tmp_path / "doubled.jsonl", tmp_path / "mixed.jsonl"
    write_jsonl(doubled, records + records[:2])
    model = {"spec": "vllm:m@http://127.0.0.1:1/v1", "kind": "model", "model": "m", "params": {}}
    write_jsonl(mixed, records[:2] + [record | {"agent": model} for record in records[2:]])
    return doubled, mixed


def test_score_and_tables_refuse_a_file_with_duplicated_or_mixed_tasks_naming_them(broken_runs, tmp_path, capsys):
    doubled, mixed = broken_runs
    for argv in (["score"], ["table", "table2_ablation", "--out", tmp_path / "t.csv", tmp_path / "t.md", "--runs"]):
        assert main([*map(str, argv), str(doubled)]) == 2
        line = one_error_line(capsys.readouterr().err)
        assert f"{doubled}: 2 tasks are written more than once (multi_turn_base_0, multi_turn_base_1)" in line
        assert main([*map(str, argv), str(mixed)]) == 2
        line = one_error_line(capsys.readouterr().err)
        assert f"{mixed}: holds the records of 2 different runs (bfcl, agent vllm:m@http://127.0.0.1:1/v1, " in line
        assert "memory zero_shot: 3 tasks; bfcl, agent oracle, memory zero_shot: 2 tasks)" in line
    assert main(["run", "bfcl", "--agent", "oracle", "--out", str(doubled), "--no-progress"]) == 2  # nor resumed
    assert "2 tasks are written more than once" in one_error_line(capsys.readouterr().err)


# 2, 3. Banks carry checksums and the embedder's dimension


@pytest.fixture
def bank(tmp_path):
    write_jsonl(tmp_path / "teacher.jsonl", all_records())
    build_bank([tmp_path / "teacher.jsonl"], "amd", "rules", "hash:16", tmp_path / "bank")
    return tmp_path / "bank"


def manifest_of(bank: Path) -> dict:
    return json.loads((bank / "manifest.json").read_text())


def rewrite_manifest(bank: Path, **changes) -> None:
    manifest = manifest_of(bank) | changes
    (bank / "manifest.json").write_text(json.dumps({k: v for k, v in manifest.items() if v is not None}))


def test_a_bank_records_the_checksum_of_every_file_and_its_dimension(bank):
    manifest = manifest_of(bank)
    assert manifest["dim"] == 16 and manifest["embedder"] == "hash:16"
    assert sorted(manifest["files"]) == sorted(path.name for path in bank.iterdir() if path.name != "manifest.json")
    assert len(load_bank(bank).entries["workflow"]) == manifest["counts"]["workflow"]


def test_reordered_entries_or_a_damaged_index_are_refused_naming_the_file_and_the_rebuild(bank, tmp_path, capsys):
    lines = (bank / "workflow.jsonl").read_text().splitlines()
    (bank / "workflow.jsonl").write_text("\n".join(lines[::-1]) + "\n")  # same count, same index, wrong rows
    assert main(["memory", "show", str(bank)]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert f"{bank / 'workflow.jsonl'}: not the file this bank was built with" in line
    assert f"amd memory build --trajectories {tmp_path / 'teacher.jsonl'} --method amd --writer rules " in line
    (bank / "workflow.jsonl").write_text("\n".join(lines) + "\n")
    index = (bank / "function.faiss").read_bytes()
    (bank / "function.faiss").write_bytes(index[: len(index) // 2])
    with pytest.raises(AmdError, match=r"function\.faiss: not the file this bank was built with"):
        load_bank(bank)


def test_a_bank_without_checksums_opens_with_a_warning_and_a_garbage_index_is_one_line(bank, caplog):
    rewrite_manifest(bank, files=None)  # as built before banks carried checksums
    with caplog.at_level(logging.WARNING):
        load_bank(bank)
    assert "built before banks carried checksums, so its files are not verified" in caplog.text
    (bank / "subtask.faiss").write_bytes(b"not an index at all")
    with pytest.raises(AmdError, match=r"subtask\.faiss: not a readable FAISS index \(.*\); rebuild it: `amd memory"):
        load_bank(bank)


def test_a_bank_whose_embedder_gives_another_dimension_is_refused(bank):
    rewrite_manifest(bank, embedder="hash:8")
    with pytest.raises(AmdError, match=r"16-dimensional vectors, but its embedder hash:8 gives 8; rebuild it"):
        open_memory(bank, "wf_st_fn")
    rewrite_manifest(bank, embedder="hash:8", dim=8)
    with pytest.raises(AmdError, match=r"workflow\.faiss: 16-dimensional vectors in a bank of 8 dimensions"):
        load_bank(bank)


def test_an_empty_trajectory_set_builds_no_bank_and_an_entryless_bank_warns_the_run(tmp_path, caplog, capsys):
    (tmp_path / "empty.jsonl").write_text("")
    assert main(["memory", "build", "--trajectories", str(tmp_path / "empty.jsonl"), "--embedder", "hash:8",
                 "--out", str(tmp_path / "bank")]) == 2
    assert f"no trajectories in {tmp_path / 'empty.jsonl'}" in one_error_line(capsys.readouterr().err)
    assert not (tmp_path / "bank").exists()
    write_jsonl(tmp_path / "failed.jsonl", [failed_task()])
    build_bank([tmp_path / "failed.jsonl"], "amd", "rules", "hash:8", tmp_path / "bank")
    with caplog.at_level(logging.WARNING):
        open_memory(tmp_path / "bank", "wf_st_fn")
    assert "holds no memory entries (none of its 1 trajectories gave one): memory config wf_st_fn injects" in \
        caplog.text


# 4, 5. Caches heal; a full disk costs no paid reply and stops a run at once


@pytest.mark.parametrize("stored", [b'{"key": "KEY", "reply": {}}', b'{"key": "KEY", "reply": {"text": "x", "tip": 1}}',
                                    b'{"key": "KEY", "reply": {"text": 7}}', b'{"key": "KE'])
def test_a_cached_reply_of_the_wrong_shape_is_a_miss_named_and_replaced(stored, caplog):
    with ScriptedServer(lambda request: "fresh") as server, open_model(f"vllm:m@{server.url}") as model:
        assert model.chat(HELLO).text == "fresh"
        [path] = list(Path(os.environ["AMD_CACHE_DIR"]).rglob("*.json"))
        path.write_bytes(stored.replace(b"KEY", path.stem.encode()))
        with caplog.at_level(logging.WARNING):
            again = model.chat(HELLO)
        assert again.text == "fresh" and not again.cached and len(server.chat_requests()) == 2
        assert f"response cache {path} is unusable" in caplog.text
        assert model.chat(HELLO).cached and len(server.chat_requests()) == 2  # replaced by the new reply


def test_a_response_cache_that_cannot_be_written_loses_no_reply(tmp_path, monkeypatch, caplog):
    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("amd.llm.cache.atomic_file", full_disk)
    out = tmp_path / "run.jsonl"
    with ScriptedServer(replay_model(ground_truth_answers(TASKS))) as server, caplog.at_level(logging.WARNING):
        assert main(["run", "bfcl", "--agent", f"vllm:m@{server.url}", "--tasks", ",".join(TASKS), "--out",
                     str(out), "--no-progress"]) == 0
    assert [record["task_id"] for record in read_run(out)] == TASKS
    assert caplog.text.count("cannot write the response cache") == 1  # said once, not once per reply


def test_a_full_disk_under_out_stops_the_run_at_once_in_one_line_keeping_what_was_written(tmp_path, monkeypatch,
                                                                                          capsys):
    out, fsync, appended = tmp_path / "run.jsonl", os.fsync, []

    def fills_after_three(fd):
        if os.readlink(f"/proc/self/fd/{fd}") == str(out):
            appended.append(fd)
            if len(appended) > 3:
                raise OSError(28, "No space left on device")
        fsync(fd)

    monkeypatch.setattr(os, "fsync", fills_after_three)
    argv = ["run", "bfcl", "--agent", "oracle", "--limit", "40", "--out", str(out), "--no-progress"]
    assert main(argv) == 2
    line = one_error_line(capsys.readouterr().err)
    assert f"{out}: No space left on device; the run stopped there, keeping the 3 tasks written" in line
    assert len(appended) == 4 and len(read_run(out)) == 3  # no fourth task tried; its half line cut back off
    monkeypatch.setattr(os, "fsync", fsync)
    assert main(argv) == 0 and len(read_run(out)) == 40


def cached(embedder, text: str) -> int:
    store = VectorCache()
    try:
        return len(store.get_many([cache_key(embedder.identity, text)], embedder.dim))
    finally:
        store.close()


def test_a_damaged_embedding_cache_or_a_wrong_size_vector_is_set_aside_named_and_replaced(caplog):
    embedder = LocalMiniLM("all-minilm-l6-v2")  # its own instance, whose model is never loaded here
    embedder._encode = lambda texts, progress: np.ones((len(texts), embedder.dim))
    store = VectorCache()
    store.put_many({cache_key(embedder.identity, "a"): np.ones(embedder.dim),
                    cache_key(embedder.identity, "b"): np.ones(3)})
    store.close()
    with caplog.at_level(logging.WARNING):
        assert embedder.embed(["a", "b"]).shape == (2, embedder.dim)
    assert f"embedding cache {store.path}: 1 vectors are not 384 float32 values" in caplog.text
    assert cached(embedder, "b") == 1  # replaced
    store.path.write_bytes(store.path.read_bytes()[:5000])  # truncated (every connection closed: no journal left)
    embedder.__dict__.pop("_memo")
    with caplog.at_level(logging.WARNING):
        assert embedder.embed(["a", "c"]).shape == (2, embedder.dim)
    assert f"embedding cache {store.path} is damaged" in caplog.text and Path(f"{store.path}.damaged").exists()
    assert cached(embedder, "c") == 1 and cached(embedder, "a") == 1


def unshare_can_mount() -> bool:
    return shutil.which("unshare") is not None and subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", "mount -t tmpfs -o size=64k none /mnt"],
        capture_output=True, check=False).returncode == 0


@pytest.mark.skipif(not unshare_can_mount(), reason="needs `unshare` to mount a tmpfs in a user namespace")
def test_a_real_full_disk_stops_a_run_and_costs_no_paid_reply(tmp_path):
    """A 96 KiB tmpfs (in a mount namespace of its own) under --out, then under the response cache."""
    script = (
        'mount -t tmpfs -o size=96k none "$DISK" || exit 99\n'
        '"$PYTHON" -m amd.cli run bfcl --agent oracle --out "$DISK/run.jsonl" --no-progress 2> "$OUT/full-out.err"\n'
        'echo $? > "$OUT/full-out.rc"; cp "$DISK/run.jsonl" "$OUT/"; rm -rf "$DISK"/*\n'
        'head -c 90k /dev/zero > "$DISK/filler" 2>/dev/null\n'
        'AMD_CACHE_DIR="$DISK/cache" "$PYTHON" -m amd.cli run bfcl --agent "vllm:m@$URL" --tasks "$TASKS" '
        '--out "$OUT/paid.jsonl" --no-progress 2> "$OUT/full-cache.err"\n'
        'echo $? > "$OUT/full-cache.rc"\n')
    (tmp_path / "disk").mkdir()
    with ScriptedServer(replay_model(ground_truth_answers(TASKS))) as server:
        env = os.environ | {"DISK": str(tmp_path / "disk"), "OUT": str(tmp_path), "PYTHON": sys.executable,
                            "URL": server.url, "TASKS": ",".join(TASKS), "PYTHONPATH": str(REPO)}
        done = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script], env=env,
                              capture_output=True, text=True, timeout=300, check=False)
        paid = len(server.chat_requests())
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "full-out.rc").read_text().strip() == "2"
    line = one_error_line((tmp_path / "full-out.err").read_text())
    assert "No space left on device; the run stopped there, keeping the" in line
    kept = read_run(tmp_path / "run.jsonl")
    assert 0 < len(kept) < 200 and f"keeping the {len(kept)} tasks written" in line
    assert (tmp_path / "full-cache.rc").read_text().strip() == "0", (tmp_path / "full-cache.err").read_text()
    assert "cannot write the response cache" in (tmp_path / "full-cache.err").read_text()
    assert [record["task_id"] for record in read_run(tmp_path / "paid.jsonl")] == TASKS and paid > 0


# 6. Undecodable input is one line wherever a trajectory is read; a resumed run says what it dropped


def test_non_utf8_bytes_in_a_trajectory_are_one_line_naming_file_and_line_everywhere(tmp_path, capsys):
    bad = tmp_path / "run.jsonl"
    lines = [json.dumps(record | {"task_id": f"multi_turn_base_{i}"}) for i, record in enumerate(all_records()[:2])]
    bad.write_bytes((lines[0] + "\n" + lines[1].replace('"instruction": "', '"instruction": "\xff') + "\n")
                    .encode("latin-1"))
    commands = {
        "score": ["score", bad],
        "view": ["view", bad, "--out", tmp_path / "v.html"],
        "memory build": ["memory", "build", "--trajectories", bad, "--embedder", "hash:8", "--out", tmp_path / "b"],
        "table": ["table", "table2_ablation", "--runs", bad, "--out", tmp_path / "t.csv", tmp_path / "t.md"],
        "figure": ["figure", "fig3_steps", "--runs", bad, "--out", tmp_path / "f.pdf"],
        "run's resume": ["run", "bfcl", "--agent", "oracle", "--limit", "2", "--out", bad],
    }
    for name, argv in commands.items():
        assert main([str(arg) for arg in argv]) == 2, name
        line = one_error_line(capsys.readouterr().err)
        assert line.startswith(f"amd: error: {bad}:2: not UTF-8 text (byte 0xff at column "), (name, line)


def test_a_damaged_task_list_beside_a_run_is_one_line(tmp_path, capsys):
    write_jsonl(tmp_path / "run.jsonl", all_records()[:1])
    (tmp_path / "run.jsonl.tasks.json").write_bytes(b'{"benchmark": "bfcl", "task_')
    assert main(["score", str(tmp_path / "run.jsonl")]) == 2
    assert f"{tmp_path / 'run.jsonl.tasks.json'}: not the list of tasks `amd run` writes" in \
        one_error_line(capsys.readouterr().err)


def test_a_resumed_run_says_what_it_dropped(tmp_path, caplog):
    out = tmp_path / "run.jsonl"
    assert main(["run", "bfcl", "--agent", "oracle", "--limit", "2", "--out", str(out), "--no-progress"]) == 0
    with open(out, "ab") as handle:
        handle.write(b'{"task_id": "multi_turn_base_2", "turns": "' + b"x" * 100_000)  # cut off mid-write
    with caplog.at_level(logging.WARNING):
        assert main(["run", "bfcl", "--agent", "oracle", "--limit", "3", "--out", str(out), "--no-progress"]) == 0
    assert f"{out}: dropped its unterminated last line (100043 bytes)" in caplog.text
    assert [record["task_id"] for record in read_trajectories(out)] == [f"multi_turn_base_{i}" for i in range(3)]


# 7. Tests never read the checkout's results or caches


def test_a_test_runs_outside_the_checkout_and_cannot_read_its_results():
    assert not Path.cwd().is_relative_to(REPO)
    with pytest.raises(PermissionError, match="the checkout's results and caches are no test's input"):
        (REPO / "results" / ".gitkeep").read_text()
    with pytest.raises(PermissionError):
        os.listdir(REPO / ".amd")
