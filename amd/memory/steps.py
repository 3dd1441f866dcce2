"""Walking a trajectory record step by step, and rendering calls with their observations."""

from dataclasses import dataclass

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

    def call_observations(self) -> list[tuple[dict, str]]:
        """Executed calls paired with their observations (rejected calls come after them and are left out)."""
        observations = self.data.get("observations", [])
        return [(call, observations[i] if i < len(observations) else "") for i, call in enumerate(self.calls)]

    def rejected_observations(self) -> list[tuple[dict, str]]:
        observations = self.data.get("observations", [])[len(self.calls):]
        return list(zip(self.data.get("rejected", []), observations))


def steps_of(record: dict) -> list[Step]:
    steps = []
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
    return head.startswith(('{"error"', "error", "{'error'")) or "error during execution" in head


def render_steps_code(steps: list[Step]) -> str:
    """Call lines with `# -> observation` comments; a `# user:` comment where a user turn starts."""
    lines = []
    for step in steps:
        if step.first_of_turn:
            lines.append(f"# user: {one_line(step.user, 200)}")
        for call, observation in step.call_observations():
            lines.append(call["call"])
            lines.append(f"# -> {one_line(observation)}")
        for rejected, observation in step.rejected_observations():
            lines.append(f"# rejected: {one_line(rejected.get('text', ''), 200)}")
            lines.append(f"# -> {one_line(observation)}")
    return "\n".join(lines)


def render_steps_prose(steps: list[Step]) -> str:
    """The same content as sentences, for the prose representation."""
    sentences = []
    for step in steps:
        if step.first_of_turn:
            sentences.append(f'The user asked: "{one_line(step.user, 200)}".')
        for call, observation in step.call_observations():
            arguments = ", ".join(f"{key} set to {value!r}" for key, value in call["arguments"].items())
            with_args = f" with {arguments}" if arguments else ""
            sentences.append(f"The agent called {call['name']}{with_args}, which returned: {one_line(observation)}.")
    return " ".join(sentences)


def call_example_code(user: str, previous: Step | None, call: dict, observation: str) -> str:
    """One call as code, with its user turn and the preceding step of the same turn as context."""
    lines = [f"# user: {one_line(user, 200)}"]
    for before, before_observation in previous.call_observations() if previous else []:
        lines.append(f"# before: {before['call']} -> {one_line(before_observation, 150)}")
    return "\n".join(lines + [call["call"], f"# -> {one_line(observation)}"])


def call_example_prose(user: str, previous: Step | None, call: dict, observation: str) -> str:
    sentences = [f'The user asked: "{one_line(user, 200)}".']
    for before, before_observation in previous.call_observations() if previous else []:
        sentences.append(f"Before, {before['name']} returned: {one_line(before_observation, 150)}.")
    arguments = ", ".join(f"{key} set to {value!r}" for key, value in call["arguments"].items())
    with_args = f" with {arguments}" if arguments else ""
    sentences.append(f"Then {call['name']} was called{with_args}, which returned: {one_line(observation)}.")
    return " ".join(sentences)
