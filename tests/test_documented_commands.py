"""The commands the README and the docs show run as written in a new shell after `make run`: a block that uses the
environment's commands starts by activating it (every block of the README, the first of each docs page), and from a
shell whose PATH holds no environment, the README's blocks plan and price as shown and every `amd` command the docs
name exists."""

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from test_pipeline_workflow import REPO, WORKFLOW_FILES

ENVIRONMENT_COMMANDS = {"amd", "snakemake", "mkdocs", "pytest", "pip", "ruff", "mypy"}
ACTIVATE = "source .venv/bin/activate"
PAGES = [REPO / "README.md", REPO / "config/README.md", *sorted((REPO / "docs").rglob("*.md"))]


def code_blocks(text: str) -> list[list[str]]:
    """The lines of each fenced code block, in order."""
    blocks, current = [], None
    for line in text.splitlines():
        if line.strip().startswith("```"):
            if current is not None:
                blocks.append(current)
            current = None if current is not None else []
        elif current is not None:
            current.append(line)
    return blocks


def command_word(line: str) -> str:
    """The command a shell line runs: its first word after VAR=value assignments."""
    words = line.split()
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):
        words.pop(0)
    return words[0] if words else ""


def uses_environment(block: list[str]) -> bool:
    return any(command_word(line) in ENVIRONMENT_COMMANDS for line in block)


def without_comment(line: str) -> str:
    return re.sub(r"\s+#.*$", "", line).strip()


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO)))
def test_a_block_of_environment_commands_activates_the_environment_first(page):
    blocks = [block for block in code_blocks(page.read_text()) if uses_environment(block)]
    checked = blocks if page.name == "README.md" and page.parent == REPO else blocks[:1]
    for block in checked:
        assert block[0].strip().startswith(ACTIVATE), f"{page.name}: a block runs {block[0].strip()!r} first"


def readme_commands() -> list[str]:
    """The README's environment commands, each as a cheap form of itself: Snakemake plans (-n), amd runs as shown."""
    commands = []
    for block in code_blocks((REPO / "README.md").read_text()):
        for line in map(without_comment, block):
            word = command_word(line)
            if word == "snakemake":
                commands.append(f"{line} -n")
            elif word in ENVIRONMENT_COMMANDS:
                commands.append(line)
    return commands


def documented_amd_commands() -> set[str]:
    """Every `amd COMMAND [SUBCOMMAND]` the docs show in a code block."""
    found = set()
    for page in PAGES:
        for block in code_blocks(page.read_text()):
            for line in block:
                words = line.split()
                if command_word(line) != "amd":
                    continue
                words = words[words.index("amd") + 1:]
                found.add(" ".join(words[:2] if words[:1] == ["memory"] else words[:1]))
    return found


def new_shell(where: Path, commands: list[str]) -> subprocess.CompletedProcess:
    """`commands` in a new bash in `where`, after the README's activation line; PATH without the environment."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(where), "LANG": "C.UTF-8"}
    if "PYTHONPATH" in os.environ:  # a checkout whose environment is shared with another (a worktree)
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    script = "\n".join(["set -e", ACTIVATE, *commands])
    return subprocess.run(["bash", "-c", script], check=False, cwd=where, env=env, capture_output=True, text=True,
                          timeout=600)


@pytest.fixture
def checkout(tmp_path):
    """A copy of the workflow beside the checkout's environment, with no results of its own."""
    if not (REPO / ".venv/bin/activate").exists():
        pytest.skip("no .venv in the checkout: make run or make test sets it up")
    for name in WORKFLOW_FILES:
        source = REPO / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, tmp_path / name)
    (tmp_path / ".venv").symlink_to(REPO / ".venv")
    return tmp_path


def test_no_environment_command_is_found_without_activating(checkout):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(checkout)}
    for word in ("amd", "snakemake"):
        found = subprocess.run(["bash", "-c", f"command -v {word}"], check=False, cwd=checkout, env=env,
                               capture_output=True)
        assert found.returncode != 0, f"{word} is on the bare PATH, so this test proves nothing"


def test_the_readmes_commands_run_as_written_in_a_new_shell(checkout):
    commands = readme_commands()
    assert any(command.startswith("snakemake --cores 2 results/tables/") for command in commands)
    assert "amd plan" in commands
    result = new_shell(checkout, commands)
    assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-3000:])
    assert "table1_main" in result.stdout + result.stderr


def test_every_amd_command_the_docs_show_exists(checkout):
    commands = documented_amd_commands()
    assert {"run", "plan", "memory build"} <= commands
    result = new_shell(checkout, [f"amd {shlex.join(command.split())} --help > /dev/null" for command in
                                  sorted(commands)])
    assert result.returncode == 0, result.stderr[-2000:]
