"""One episode: the agent loop with the official BFCL turn semantics and the memory hooks.

Per user turn the agent acts until it answers with no call; more than `max_steps_per_turn` steps in one turn, or
`max_steps` over the task, force-quits the task (scored as failed, as the official harness does). Memory enters at
three points: the system prompt at start (proactive), each user turn (per-turn variant), after an error (reactive).
"""

import time
from dataclasses import dataclass

from amd.agent.hooks import MemoryHooks


@dataclass
class Limits:
    max_steps_per_turn: int = 20
    max_steps: int = 40


class _StepLimit(Exception):
    pass


class _ModelFailure(Exception):
    pass


def run_episode(agent, episode, limits: Limits, memory: MemoryHooks | None = None) -> dict:
    """Run one task to the end and return the task part of its trajectory record."""
    started = time.monotonic()
    system_text, system_records = ("", [])
    if memory is not None:
        system_text, system_records = memory.proactive(episode.task_id, episode.instruction, _decomposer(agent))
    agent.begin(episode.tools, system_text)
    turns: list[dict] = []
    status, error = "finished", None
    try:
        _run_turns(agent, episode, limits, memory, turns)
    except _StepLimit as exc:
        status, error = "step_limit", str(exc)
    except _ModelFailure as exc:
        status, error = "model_error", str(exc)
    verdict = episode.score()
    steps = [step for turn in turns for step in turn["steps"]]
    return {
        "task_id": episode.task_id,
        "instruction": episode.instruction,
        "system_memory": system_records,
        "turns": turns,
        "decoded_calls": verdict.decoded_calls,
        "success": bool(verdict.success) and status == "finished",
        "checker": verdict.details,
        "status": status,
        "error": error,
        "n_steps": len(steps),
        "tokens": {"prompt": sum(s["tokens"]["prompt"] for s in steps),
                   "completion": sum(s["tokens"]["completion"] for s in steps)},
        "model_requests": sum(s.pop("_requests") for s in steps),
        "wall_time_s": round(time.monotonic() - started, 3),
    }


def _run_turns(agent, episode, limits, memory, turns) -> None:
    total_steps = 0
    last_reply = None
    while (user := episode.next_user_message(last_reply)) is not None:
        turn_text, turn_records = ("", [])
        if memory is not None:
            turn_text, turn_records = memory.per_turn(episode.task_id, user)
        agent.add_user(user, turn_text)
        turn = {"user": user, "steps": [], "injected_memory": turn_records}
        turns.append(turn)
        for _ in range(limits.max_steps_per_turn):
            if total_steps >= limits.max_steps:
                raise _StepLimit(f"more than {limits.max_steps} steps in the task")
            total_steps += 1
            step, reply_text = _run_step(agent, episode, memory)
            turn["steps"].append(step)
            if step["model_error"]:
                raise _ModelFailure(step["model_error"])
            if reply_text is not None:
                last_reply = reply_text
                break
        else:
            raise _StepLimit(f"more than {limits.max_steps_per_turn} steps in turn {len(turns)}")


def _run_step(agent, episode, memory) -> tuple[dict, str | None]:
    """One model step. Returns the step record and, when the turn ended (a reply with no call), the reply text."""
    reply = agent.act()
    step = {
        "model_text": reply.text,
        "calls": [],
        "rejected": [],
        "observations": [],
        "error": False,
        "tokens": {"prompt": reply.prompt_tokens, "completion": reply.completion_tokens},
        "cached": reply.cached,
        "injected_memory": [],
        "model_error": reply.error,
        "finish_reason": reply.finish_reason,
        "_requests": reply.requests,
    }
    if reply.error is not None:
        return step, None
    if not reply.proposals:
        return step, reply.text
    outcome = episode.execute(reply.proposals)
    step.update(calls=[vars(call) for call in outcome.calls], rejected=outcome.rejected,
                observations=outcome.observations, error=outcome.error)
    hint = ""
    if memory is not None and outcome.error and outcome.failing_functions:
        hint, step["injected_memory"] = memory.reactive(episode.task_id, episode.instruction,
                                                        outcome.failing_functions)
    agent.observe(reply.proposals, outcome, hint)
    return step, None


def _decomposer(agent):
    chat = agent.decompose_chat()
    if chat is None:
        return lambda instruction: [instruction]
    from amd.memory.decompose import decompose_instruction

    return lambda instruction: decompose_instruction(chat, instruction)
