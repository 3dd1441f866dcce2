"""Prompt templates live as files under the project's prompts/ folder; code only fills their {fields}.

pyproject.toml maps that folder into the package as `amd.prompt_templates`, so an editable install reads the
checkout's files and a wheel carries them as package data.
"""

from functools import cache
from importlib.resources import files

from amd.core.errors import AmdError

TEMPLATES = files("amd.prompt_templates")


@cache
def load_prompt(name: str) -> str:
    template = TEMPLATES / f"{name}.md"
    if not template.is_file():
        raise AmdError(f"missing prompt template {name}.md in {TEMPLATES}")
    return template.read_text(encoding="utf-8")


def benchmark_prompt(name: str, benchmark: str | None) -> str:
    """`NAME_BENCHMARK` where prompts/ has one written for that benchmark (e.g. decompose_appworld), else NAME."""
    specific = f"{name}_{benchmark}"
    return specific if benchmark and (TEMPLATES / f"{specific}.md").is_file() else name
