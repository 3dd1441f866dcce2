"""Walking a trajectory record step by step, and rendering calls with their observations.

A code step (the step record has `code`: a block the environment ran) has one observation, the block's output;
every call found in the block shares it, and the block with its output is what memory shows.
"""

from dataclasses import dataclass
from typing import Any

from amd.memory.placeholders import RAW, ValueMask

OBSERVATION_CHARS = 300


@dataclass
class Step:
    index: int  # position over the whole trajectory, from 0
    turn: int  # user turn it belongs to, from 0
    user: str  # the user message that opened its turn
    first_of_turn: bool
    data: dict  # the step object of the trajectory record

    @property
    def calls(self) -> list[dict]:
        return self.data.get("calls", [])

    @property
    def code(self) -> str | None:
        return self.data.get("code")

    def call_observations(self) -> list[tuple[dict, str]]:
        """Executed calls paired with their observations (rejected calls come after them and are left out)."""
        observations = self.data.get("observations", [])
        if self.code is not None:
            return [(call, observations[0] if observations else "") for call in self.calls]
        return [(call, observations[i] if i < len(observations) else "") for i, call in enumerate(self.calls)]

    def rejected_observations(self) -> list[tuple[dict, str]]:
        observations = self.data.get("observations", [])
        executed = (1 if observations else 0) if self.code is not None else len(self.calls)
        return list(zip(self.data.get("rejected", []), observations[executed:]))


def steps_of(record: dict) -> list[Step]:
    steps: list[Any] = []
    for turn_index, turn in enumerate(record["turns"]):
        for position, step in enumerate(turn["steps"]):
            steps.append(Step(len(steps), turn_index, turn["user"], position == 0, step))
    return steps


def qualified_name(benchmark, function_name: str) -> str:
    """`app.function_name`, as memory names a function; the bare name where the benchmark knows no app."""
    app = benchmark.function_info(function_name).app
    if app is None or function_name.startswith(app + "."):
        return function_name
    return f"{app}.{function_name}"


def one_line(text: str, limit: int = OBSERVATION_CHARS) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def is_error_observation(text: str) -> bool:
    head = text.lstrip()[:40].lower()
    return (head.startswith(('{"error"', "error", "{'error'")) or "error during execution" in head
            or "traceback" in head)


def render_steps_code(steps: list[Step], observation_chars: int = OBSERVATION_CHARS, mask: ValueMask = RAW) -> str:
    """Call lines (or a code step's block) with `# -> observation` comments, each observation cut at
    `observation_chars`; a `# user:` comment where a user turn starts. `mask`: how values are shown."""
    lines = []

    def observed(observation: str) -> str:
        return f"# -> {one_line(mask.observation(observation), observation_chars)}"

    for step in steps:
        if step.first_of_turn:
            lines.append(f"# user: {one_line(mask.text(step.user), 200)}")
        if step.code is not None:
            lines += [mask.text(step.code), observed((step.data.get("observations") or [""])[0])]
            continue
        for call, observation in step.call_observations():
            lines += [mask.call(call), observed(observation)]
        for rejected, observation in step.rejected_observations():
            lines += [f"# rejected: {one_line(mask.text(rejected.get('text', '')), 200)}", observed(observation)]
    return "\n".join(lines)


def render_steps_prose(benchmark, steps: list[Step]) -> str:
    """What the steps did, in words (the paper's natural-language form, Table 4): which functions in which order,
    which parameters they were given, where a value came from and how each call went. No call syntax, no argument
    values, no raw observations."""
    earlier: list[tuple[str, str]]
    sentences, earlier = [], []
    for step in steps:
        for call, observation in step.call_observations():
            sentences.append("The agent " + _call_sentence(benchmark, call, observation, earlier))
            earlier.append((qualified_name(benchmark, call["name"]), observation))
    return " ".join(sentences) or "The agent answered in words, without calling a function."


def _call_sentence(benchmark, call: dict, observation: str, earlier: list[tuple[str, str]]) -> str:
    name = qualified_name(benchmark, call["name"])
    given = f" setting {', '.join(call['arguments'])}" if call["arguments"] else " with no arguments"
    sources = [f"{key} from the result of {source}" for key, value in call["arguments"].items()
               if (source := _source_of(value, earlier))]
    taken = f", taking {' and '.join(sources)}" if sources else ""
    outcome = "it failed with an error" if is_error_observation(observation) else "it worked"
    return f"called {name}{given}{taken}; {outcome}."


def _source_of(value, earlier: list[tuple[str, str]]) -> str | None:
    """The latest earlier call whose observation holds this argument value (values of two or more characters)."""
    text = str(value)
    if len(text) < 2:
        return None
    return next((name for name, observation in reversed(earlier) if text in observation), None)


def call_example_code(step: Step, previous: Step | None, call: dict, observation: str,
                      observation_chars: int = OBSERVATION_CHARS, mask: ValueMask = RAW) -> str:
    """One call as code, with its user turn and the preceding step of the same turn as context; a call of a code
    step is shown in its block. `mask`: how values are shown."""
    lines = [f"# user: {one_line(mask.text(step.user), 200)}"]
    for before, before_observation in previous.call_observations() if previous else []:
        lines.append(f"# before: {mask.call(before)} -> {one_line(mask.observation(before_observation), 150)}")
    shown = mask.text(step.code) if step.code is not None else mask.call(call)
    return "\n".join(lines + [shown, f"# -> {one_line(mask.observation(observation), observation_chars)}"])


def call_example_prose(benchmark, previous: Step | None, call: dict, observation: str) -> str:
    """One call in words: what came just before it, the parameters it was given, and how it went."""
    before = [(qualified_name(benchmark, c["name"]), o) for c, o in previous.call_observations()] if previous else []
    context = f"After {', '.join(name for name, _ in before)}, the agent " if before else "The agent "
    return context + _call_sentence(benchmark, call, observation, before)
