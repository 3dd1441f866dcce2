"""A wheel of the project, installed into a fresh virtual environment, runs from a folder outside the checkout.

The fresh environment gets the wheel only (`--no-deps`); the project venv's site-packages is made visible by a
plain path line in a .pth file. Python adds such a directory to sys.path without processing the .pth files inside
it, so the checkout's editable-install finder stays out (the probe below checks that, not only that `amd` resolves).
"""

import csv
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUILD_INPUTS = ("pyproject.toml", "amd", "prompts", "data", "templates")
STUDENT_RUN = "results/bfcl/student-oracle/zero_shot/seed0/trajectories.jsonl"
MEMORY_RUN = "results/bfcl/student-oracle/oracle-rules-hash64-amd/wf/shared/k_wf1/seed0/trajectories.jsonl"

PROBE = """
import json, sys
import amd
from amd.analysis.reference import REFERENCE_FILE, load_reference
from amd.core.prompts import TEMPLATES, load_prompt
names = sys.argv[1:]
print(json.dumps({
    "amd": amd.__file__, "templates": str(TEMPLATES), "reference": str(REFERENCE_FILE),
    "meta_path": [repr(finder) for finder in sys.meta_path],
    "editable_modules": [name for name in sys.modules if "editable" in name],
    "prompts": {name: load_prompt(name) for name in names},
    "reference_rows": len(load_reference().rows),
}))
"""


def run(argv, cwd, check=True):
    done = subprocess.run([str(arg) for arg in argv], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, check=False)
    assert not check or done.returncode == 0, f"{argv}\n{done.stdout}\n{done.stderr}"
    return done


def build_wheel(tmp_path: Path) -> Path:
    """An offline build (no index, the project venv's setuptools) from a clean copy, so no stale build/ leaks in."""
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=lambda folder, names: [
        name for name in names if Path(folder) == ROOT and name not in BUILD_INPUTS or name == "__pycache__"])
    run([sys.executable, "-m", "pip", "wheel", "--no-index", "--no-deps", "--no-build-isolation", "--quiet",
         "--wheel-dir", tmp_path / "dist", source], cwd=tmp_path)
    return next((tmp_path / "dist").glob("amd-*.whl"))


def fresh_install(tmp_path: Path, wheel: Path) -> Path:
    env_dir = tmp_path / "fresh-env"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    run([sys.executable, "-m", "pip", "--python", python, "install", "--no-index", "--no-deps", "--quiet", wheel],
        cwd=tmp_path)
    site = run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], cwd=tmp_path).stdout
    Path(site.strip(), "project-deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return env_dir


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("wheel")
    wheel = build_wheel(tmp_path)
    return wheel, fresh_install(tmp_path, wheel), tmp_path / "outside"


def test_wheel_carries_every_module_prompt_and_data_file(installed):
    wheel, _, _ = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    modules = {path.relative_to(ROOT).as_posix() for path in (ROOT / "amd").rglob("*.py")}
    prompts = {f"amd/prompt_templates/{path.name}" for path in (ROOT / "prompts").glob("*.md")}
    pages = {f"amd/page_templates/{path.name}" for ext in ("html", "css", "js")
             for path in (ROOT / "templates").glob(f"*.{ext}")}
    assert modules <= names and prompts <= names and pages <= names and len(pages) == 3
    assert {"amd/core/trajectory.schema.json", "amd/reference_data/paper_reference.csv",
            "amd/reference_data/prices.csv"} <= names


def test_installed_copy_is_imported_and_reads_its_own_package_data(installed):
    _, env_dir, outside = installed
    outside.mkdir(exist_ok=True)
    prompt_names = sorted(path.stem for path in (ROOT / "prompts").glob("*.md"))
    probe = json.loads(run([env_dir / "bin" / "python", "-c", PROBE, *prompt_names], cwd=outside).stdout)
    site = str(env_dir / "lib")
    assert probe["amd"].startswith(site) and probe["templates"].startswith(site)
    assert probe["reference"].startswith(site)
    assert not any("Editable" in finder for finder in probe["meta_path"]) and not probe["editable_modules"]
    assert probe["prompts"] == {name: (ROOT / "prompts" / f"{name}.md").read_text() for name in prompt_names}
    with open(ROOT / "data" / "paper_reference.csv", newline="") as handle:
        assert probe["reference_rows"] == len(list(csv.DictReader(handle)))


def test_installed_cli_builds_a_bank_and_a_table_outside_the_checkout(installed):
    _, env_dir, outside = installed
    outside.mkdir(exist_ok=True)
    amd = env_dir / "bin" / "amd"
    run([amd, "run", "bfcl", "--agent", "oracle", "--limit", "3", "--no-progress", "--out", STUDENT_RUN], outside)
    run([amd, "memory", "build", "--trajectories", STUDENT_RUN, "--writer", "rules", "--embedder", "hash:64",
         "--out", "bank"], outside)
    run([amd, "run", "bfcl", "--agent", "oracle", "--limit", "3", "--no-progress", "--memory", "bank",
         "--memory-config", "wf", "--protocol", "shared", "--k", "wf=1", "--out", MEMORY_RUN], outside)
    run([amd, "table", "table2_ablation", "--runs", STUDENT_RUN, MEMORY_RUN, "--out", "t2.csv", "t2.md"], outside)
    run([amd, "view", MEMORY_RUN, "--against", STUDENT_RUN, "--bank", "bank", "--out", "view.html"], outside)

    records = [json.loads(line) for line in (outside / STUDENT_RUN).read_text().splitlines()]
    calls = sum(len(step["calls"]) for record in records for turn in record["turns"] for step in turn["steps"])
    manifest = json.loads((outside / "bank" / "manifest.json").read_text())
    assert manifest["embedder"] == "hash:64" and manifest["writer"]["spec"] == "rules"
    assert manifest["counts"]["workflow"] == 3 and manifest["counts"]["function"] == calls
    with open(outside / "t2.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [(row["memory"], float(row["success"]), int(row["tasks"])) for row in rows] == [
        ("zero_shot", 100.0, 3), ("student_memory", 100.0, 3)]
    assert (outside / "t2.md").read_text().startswith("**Table 2")
    page = (outside / "view.html").read_text()  # the wheel's own page template, style and script
    assert "<h1>wf on bfcl beside zero_shot</h1>" in page and "Paired over 3 tasks" in page
