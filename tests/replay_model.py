"""A scripted "model" for BFCL (test double): answers each user turn with that turn's ground-truth calls as a
Python call list, and closes the turn after seeing the results. Its answers depend only on the conversation."""

from amd.benchmarks.base import create_benchmark

OBSERVATION_PREFIX = "Results of your calls:"


def ground_truth_answers(task_ids) -> dict:
    """(first user turn, this user turn) -> the model answer that performs this turn's ground truth."""
    benchmark, answers = create_benchmark("bfcl"), {}
    for task_id in task_ids:
        episode = benchmark.start(task_id)
        reference = episode.reference_turns()
        turn_index = 0
        while (user := episode.next_user_message(None)) is not None:
            calls = [proposal.source for proposal in reference[turn_index]]
            answers[(episode.instruction, user)] = f"[{', '.join(calls)}]" if calls else "Nothing to do."
            turn_index += 1
    return answers


def replay_model(answers: dict):
    """A ScriptedServer respond function replaying `answers`."""

    def respond(request):
        messages = request["messages"]
        first_user = next(m["content"] for m in messages if m["role"] == "user")
        last = messages[-1]["content"]
        if last.startswith(OBSERVATION_PREFIX):
            return "Done."
        return answers[(first_user, last)]

    return respond
