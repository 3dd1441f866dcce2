"""One episode: the agent loop (multi-turn semantics of the official tool-use harnesses) and the memory hooks.

Per user turn the agent acts until it answers with no call; more than `max_steps_per_turn` steps in one turn, or
`max_steps` over the task, force-quits the task (scored as failed, as the official harness does). An episode whose
harness caps only the task (`caps_turns` False) gets `max_steps` for its turns too. An episode that follows its
official harness's turn loop (`official_turns`, BFCL's `harness=official`) has no task cap, allows
`max_steps_per_turn` executed steps and then the closing reply in each turn (bfcl-eval force-quits on the step
after the 20th), and ends a turn at a reply whose calls cannot all be decoded, as bfcl-eval's loop does. The
environment may end the task after a step (the agent called its completion function). Memory enters at three
points: the system prompt at start, each user turn, after an error (`amd.agent.hooks`); the agent shows it to its
model (the model agent: delimited and labelled as retrieved data, never instructions, unless told to show it bare).
"""

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from amd.agent.base import Agent
from amd.agent.hooks import Injection, MemoryHooks, TaskContext
from amd.benchmarks.base import Episode, counted_success
from amd.core.trajectory import (
    EpisodeRecord,
    InjectionRecord,
    MemoryQuery,
    Step,
    StepCaps,
    Turn,
    in_field_order,
)


@dataclass
class Limits:
    max_steps_per_turn: int = 20
    max_steps: int = 40


class _StepLimit(Exception):
    pass


class _ModelFailure(Exception):
    pass


def run_episode(agent: Agent, episode: Episode, limits: Limits, task: TaskContext,
                memory: MemoryHooks | None = None, on_step: Callable[[], None] | None = None) -> EpisodeRecord:
    """Run one task to the end and return the task part of its trajectory record; `on_step` is called after each
    model step (a run's progress counts them)."""
    started = time.monotonic()
    system = memory.task_start(task) if memory is not None else Injection()
    agent.begin(episode.tools, system.text, memory_first=system.first)
    turns: list[Turn] = []
    queries = list(system.queries)  # every retrieval query of the task, in order (a memory run's memory_queries)
    requests: list[int] = []  # HTTP requests sent per step
    status, error = "finished", None
    try:
        _run_turns(agent, episode, limits, task, memory, _Taken(turns, queries, requests, on_step))
    except _StepLimit as exc:
        status, error = "step_limit", str(exc)
    except _ModelFailure as exc:
        status, error = "model_error", str(exc)
    verdict = episode.score()
    steps = [step for turn in turns for step in turn["steps"]]
    record: EpisodeRecord = {
        "task_id": episode.task_id,
        "task_group": task.task_group,
        "instruction": episode.instruction,
        "system_memory": system.records,
        "turns": turns,
        "decoded_calls": verdict.decoded_calls,
        "success": counted_success(verdict.success, status, verdict.step_limit_scored),
        "checker": verdict.details,
        "status": status,
        "error": error,
        "n_steps": len(steps),
        "step_caps": step_caps(episode, limits),
        "tokens": {"prompt": sum(s["tokens"]["prompt"] for s in steps),
                   "completion": sum(s["tokens"]["completion"] for s in steps),
                   "cached_prompt": sum(s["tokens"]["cached_prompt"] for s in steps)},
        "model_requests": sum(requests),
        "wall_time_s": round(time.monotonic() - started, 3),
    }
    if system.details:
        record["memory_details"] = system.details
    if memory is not None:
        record["memory_queries"] = queries
    if verdict.user_calls:
        record["user_calls"] = verdict.user_calls
    return in_field_order(record)


def step_caps(episode: Episode, limits: Limits) -> StepCaps:
    """The caps as they apply to this episode (the record's `step_caps`): the task's (None in an official turn loop,
    which caps turns only) and a turn's executed steps (the task's cap where the harness caps only the task)."""
    return {"max_steps": None if episode.official_turns else limits.max_steps,
            "max_steps_per_turn": _turn_cap(episode, limits)}


def _turn_cap(episode: Episode, limits: Limits) -> int:
    """A turn's cap on executed steps: the turn's, or the task's where the harness caps only the task."""
    return limits.max_steps_per_turn if episode.caps_turns else limits.max_steps


@dataclass
class _Taken:
    """What a task's turns leave, as they go: the turns (the record's), the retrieval queries and each step's
    requests; `on_step` hears of each step."""

    turns: list[Turn]
    queries: list[MemoryQuery]
    requests: list[int]
    on_step: Callable[[], None] | None = None


def _run_turns(agent: Agent, episode: Episode, limits: Limits, task: TaskContext, memory: MemoryHooks | None,
               taken: _Taken) -> None:
    total_steps = 0
    last_reply = None
    official = episode.official_turns
    per_turn = _turn_cap(episode, limits)
    requests_per_turn = per_turn + 1 if official else per_turn  # official: the reply after the last executed step
    while (user := episode.next_user_message(last_reply)) is not None:
        task.turn = user
        injected = memory.user_turn(task, user) if memory is not None else Injection()
        agent.add_user(user, injected.text, memory_in_system=injected.in_system)
        turn: Turn = {"user": user, "steps": [], "injected_memory": _records(injected)}
        taken.turns.append(turn)
        taken.queries += injected.queries
        for _ in range(requests_per_turn):
            if not official and total_steps >= limits.max_steps:
                raise _StepLimit(f"more than {limits.max_steps} steps in the task")
            total_steps += 1
            step, reply_text, finished = _run_step(agent, episode, task, memory, taken, official)
            turn["steps"].append(step)
            if taken.on_step is not None:
                taken.on_step()
            if step["model_error"]:
                raise _ModelFailure(step["model_error"])
            if finished:
                return
            if reply_text is not None:
                last_reply = reply_text
                break
        else:
            raise _StepLimit(f"more than {per_turn} steps in turn {len(taken.turns)}")


def _run_step(agent: Agent, episode: Episode, task: TaskContext, memory: MemoryHooks | None, taken: _Taken,
              official: bool = False) -> tuple[Step, str | None, bool]:
    """One model step. Returns the step record, the reply text when the turn ended (a reply with no call, or under
    `official` one with a call that cannot be decoded, recorded as refused and never run), and whether the
    environment ended the episode (task complete, conversation closed)."""
    reply = agent.act()
    taken.requests.append(reply.requests)
    step: Step = {
        "model_text": reply.text,
        "calls": [],
        "rejected": [],
        "observations": [],
        "error": False,
        "tokens": {"prompt": reply.prompt_tokens, "completion": reply.completion_tokens,
                   "cached_prompt": reply.cached_prompt_tokens},
        "cached": reply.cached,
        "injected_memory": [],
        "model_error": reply.error,
        "finish_reason": reply.finish_reason,
    }
    if reply.error is not None:
        return step, None, False
    if not reply.proposals:
        return step, reply.text, False
    if official and any(proposal.malformed for proposal in reply.proposals):
        step["rejected"] = [{"text": p.source, "reason": p.malformed or "in a reply with an undecodable call"}
                            for p in reply.proposals]
        return step, reply.text, False
    outcome = episode.execute(reply.proposals)
    step["calls"] = [{"name": call.name, "arguments": call.arguments, "call": call.call} for call in outcome.calls]
    step["rejected"], step["observations"], step["error"] = outcome.rejected, outcome.observations, outcome.error
    if outcome.code is not None:
        step["code"] = outcome.code
    task.calls += [call.call for call in outcome.calls]
    hint = Injection()
    if memory is not None and outcome.error and outcome.failing_functions:
        hint = memory.after_error(task, outcome.failing_functions)
        step["injected_memory"] = _records(hint)
        taken.queries += hint.queries
        if hint.details:
            step["memory_details"] = hint.details
    agent.observe(reply.proposals, outcome, hint.text)
    return step, None, outcome.finished


def _records(injection: Injection) -> list[InjectionRecord]:
    """An injection's records as the trajectory holds them (each with the fields its method's spec adds)."""
    return cast(list[InjectionRecord], injection.records)
