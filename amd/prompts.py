"""Prompt templates live as files under prompts/; code only fills their {fields}."""

from functools import cache
from pathlib import Path

from amd.errors import AmdError

PROMPTS_DIR = Path(__file__).resolve().parent.parent / "prompts"


@cache
def load_prompt(name: str) -> str:
    path = PROMPTS_DIR / f"{name}.md"
    if not path.exists():
        raise AmdError(f"missing prompt template {path}")
    return path.read_text(encoding="utf-8")
