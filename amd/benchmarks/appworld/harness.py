"""How an AppWorld episode is run: amd's own settings (the default) or those of the paper's harness.

The paper's release runs AppWorld students with ACE's ReAct agent (github taeilkim2465/agentic_memory_distillation,
appworld/*/experiments/code/ace: `base_react.py`, `adaptation_react.py`, the configs under `configs/`). What it does
that amd's default does not, each a benchmark option, all of them at once with `harness=paper`:

- `guide=paper`: a fuller guide with a worked example (prompts/appworld_guide_paper.md, ours; ACE's prompt is a
  ~3.5k-word few-shot dialogue) instead of the short one (prompts/appworld_guide.md);
- `code_blocks=first`: only a reply's first code block runs and the conversation keeps the reply up to that block
  (ACE `ignore_multiple_calls: true`); amd's default joins every block of the reply;
- `output_chars=20000`: an output longer than this is cut, with a marker (ACE `truncate_output`: 20,000 characters);
- `history_chars=50000`: what is sent to the model is trimmed to this many characters after the task message, older
  outputs first, then the oldest steps (ACE `max_output_length: 50000` and its trimming, by characters: amd has no
  tokenizer for ACE's token budget), instead of letting an overflowing prompt fail the task;
- `step_cap=scored`: a task that reaches the step cap is judged by AppWorld's evaluation as it stands (ACE stops
  after `max_steps` and evaluates every task), where amd's default counts it failed.

One more option is amd's own, not ACE's (the release has no AppWorld AMD agent to compare with): `failing_call`,
which API functions an error's function memory is looked up for. `read` (the default, the project's rule, after the
paper's Fig. 9, where the student misreads an API's response on a later line): the API calls whose results the
failing line reads, followed through the block's assignments, else an API call on that line, else none; an API's
own failure is the call on that line (`amd.benchmarks.appworld.benchmark.failing_calls`); `line`: only a call on that line (amd's earlier rule).

ACE's `max_tokens` (2048 by default, 4096 in the release's configs) is the run's `--max-tokens`, not an option here.
"""

from dataclasses import dataclass, fields, replace
from typing import Any

from amd.core.errors import AmdError

CHOICES = {"guide": ("amd", "paper"), "code_blocks": ("all", "first"), "step_cap": ("failed", "scored"),
           "failing_call": ("read", "line")}
NUMBERS = ("output_chars", "history_chars")  # 0: no limit


@dataclass(frozen=True)
class AppWorldHarness:
    guide: str = "amd"
    code_blocks: str = "all"
    output_chars: int = 0
    history_chars: int = 0
    step_cap: str = "failed"
    failing_call: str = "read"

    def describe(self) -> dict:
        """The settings that differ from amd's (recorded with the data version; {} for the default)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if getattr(self, f.name) != getattr(AppWorldHarness, f.name)}


DEFAULT_HARNESS = AppWorldHarness()
PAPER = AppWorldHarness(guide="paper", code_blocks="first", output_chars=20_000, history_chars=50_000,
                        step_cap="scored")
PRESETS = {"amd": DEFAULT_HARNESS, "paper": PAPER}
OPTIONS = ("harness", *CHOICES, *NUMBERS)


def harness_from_options(harness: str = "amd", **options) -> AppWorldHarness:
    """The preset `harness` (amd or paper) with any single option given beside it in its place."""
    if harness not in PRESETS:
        raise AmdError(f"benchmark appworld: harness must be one of {', '.join(PRESETS)}, got {harness!r}")
    chosen: dict[str, Any] = {}
    for name, value in options.items():
        text = str(value).strip().lower()
        if name in CHOICES and text not in CHOICES[name]:
            raise AmdError(f"benchmark appworld: {name} must be one of {', '.join(CHOICES[name])}, got {value!r}")
        if name in NUMBERS and not text.isdigit():
            raise AmdError(f"benchmark appworld: {name} must be a whole number of characters (0: no limit), "
                           f"got {value!r}")
        chosen[name] = int(text) if name in NUMBERS else text
    return replace(PRESETS[harness], **chosen)


def cut_output(output: str, limit: int) -> str:
    """An execution output cut to `limit` characters (0: whole), saying how much was left out."""
    if not limit or len(output) <= limit:
        return output
    return f"{output[:limit]}\n[{len(output) - limit} more characters not shown]"
