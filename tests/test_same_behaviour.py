"""What a reorganisation of the package must not change (issue 42): the dry-run plans of config/config.yaml and
config/paper.yaml (every job's description and shell command), an oracle run file, and banks of every in-tree
memory method (the baselines written by a scripted model server, AMD's by the rules writer) are byte for byte what
tests/golden/behaviour.json recorded. A change that means to alter one of them updates the record on purpose:

    .venv/bin/python tests/test_same_behaviour.py   # prints the new digests and rewrites tests/golden/behaviour.json
"""

import hashlib
import json
import os
import re
import subprocess
import tempfile
from pathlib import Path

from scripted_server import ScriptedServer
from test_baselines import writer_answer
from test_memory_fixtures import all_records, write_jsonl
from test_pipeline_workflow import SNAKEMAKE, make_workdir

from amd.cli import main as amd_main
from amd.memory.build import build_bank

TESTS = Path(__file__).resolve().parent
GOLDEN = TESTS / "golden" / "behaviour.json"
PLANS = {"plan_config": "config/config.yaml", "plan_paper": "config/paper.yaml"}
METHODS = ("amd", "reasoningbank", "memp", "sasm")


def digest(text: str | bytes) -> str:
    return hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()


def plan(where: Path, env: dict, configfile: str) -> str:
    """Each planned job's description and shell command, sorted: the dry run less its dates, reasons and numbers."""
    done = subprocess.run([str(SNAKEMAKE), "-n", "-p", "all", "--cores", "2", "--configfile", configfile], cwd=where,
                          env=env, capture_output=True, text=True, timeout=300, check=True)
    jobs, description = [], None
    for line in done.stdout.splitlines():
        if match := re.match(r"^(?:localrule|rule) (\w+):$", line):  # a job without a message of its own
            description = f"rule {match.group(1)}"
        elif match := re.match(r"^(?:local)?[Jj]ob \d+: (.*)$", line):
            description = match.group(1)
        elif line.startswith("Shell command: "):
            jobs.append(f"{description}\t{line.removeprefix('Shell command: ')}")
    assert jobs, done.stdout[-2000:]
    return "\n".join(sorted(jobs))


def oracle_run(where: Path) -> str:
    """An oracle's run file over AgentDojo's banking tasks, less its wall times."""
    out = where / "oracle.jsonl"
    assert amd_main(["run", "agentdojo", "--agent", "oracle", "--benchmark-option", "suite=banking", "--concurrency",
                     "1", "--no-progress", "--out", str(out)]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    for record in records:
        record["wall_time_s"] = 0
    return "\n".join(json.dumps(record, sort_keys=True) for record in records)


def banks(where: Path) -> dict[str, str]:
    """Every file of a bank of each in-tree method, built in `where` from the same handmade trajectories."""
    os.chdir(where)
    write_jsonl(Path("teacher.jsonl"), all_records())
    digests = {}
    with ScriptedServer(lambda request: writer_answer(request["messages"][-1]["content"])) as server:
        for method in METHODS:
            writer = "rules" if method == "amd" else f"vllm:writer@{server.url}"
            build_bank([Path("teacher.jsonl")], method, writer, "hash:64", Path(method), concurrency=1)
            for path in sorted(Path(method).iterdir()):
                digests[f"bank_{method}/{path.name}"] = digest(path.read_bytes().replace(server.url.encode(), b"URL"))
    return digests


def behaviour(where: Path) -> dict[str, str]:
    (where / "workflow").mkdir()
    workdir, env = make_workdir(where / "workflow")
    found = {name: digest(plan(workdir, env, configfile)) for name, configfile in PLANS.items()}
    (where / "run").mkdir()
    found["oracle_run"] = digest(oracle_run(where / "run"))
    (where / "banks").mkdir()
    here = Path.cwd()
    try:
        found |= banks(where / "banks")
    finally:
        os.chdir(here)
    return found


def test_plans_runs_and_banks_are_what_the_golden_record_says(tmp_path):
    expected = json.loads(GOLDEN.read_text())
    found = behaviour(tmp_path)
    changed = sorted(name for name in expected.keys() | found.keys() if expected.get(name) != found.get(name))
    assert not changed, (f"changed: {', '.join(changed)} (a change meant to alter them rewrites {GOLDEN.name}: "
                         f"python tests/test_same_behaviour.py)")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as scratch:
        digests = behaviour(Path(scratch))
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n")
    print(json.dumps(digests, indent=1, sort_keys=True))
