"""Handmade BFCL-like trajectories for the memory tests (built by hand to follow amd/core/trajectory.schema.json),
and tests that keep the fixtures valid."""

import json

from amd.core.schema import validate


def call(name: str, **arguments) -> dict:
    text = f"{name}({', '.join(f'{k}={v!r}' for k, v in arguments.items())})"
    return {"name": name, "arguments": arguments, "call": text}


def step(calls: list[dict], observations: list[str], text: str = "") -> dict:
    return {"model_text": text or json.dumps([c["call"] for c in calls]), "calls": calls,
            "observations": observations, "error": any('"error"' in o for o in observations)}


def reply(text: str = "Done.") -> dict:
    return {"model_text": text, "calls": [], "observations": [], "error": False}


def record(task_id: str, turns: list[tuple[str, list[dict]]], success: bool = True, agent: str = "oracle") -> dict:
    steps = [s for _, turn_steps in turns for s in turn_steps]
    return {
        "schema": "amd.trajectory/1", "task_id": task_id, "benchmark": "bfcl",
        "data_version": {"package": "bfcl-eval==2026.3.23", "sha256": "0" * 64},
        "agent": {"spec": agent, "kind": "oracle" if agent == "oracle" else "model", "model": None, "params": {}},
        "memory": {"config": "zero_shot", "bank": None},
        "instruction": turns[0][0],
        "turns": [{"user": user, "steps": turn_steps} for user, turn_steps in turns],
        "decoded_calls": [[[c["call"] for c in s["calls"]] for s in turn_steps if s["calls"]]
                          for _, turn_steps in turns],
        "success": success, "checker": {"valid": success}, "status": "finished", "error": None,
        "n_steps": len(steps), "tokens": {"prompt": 0, "completion": 0}, "wall_time_s": 1.0,
    }


def file_and_message_task() -> dict:
    """Two apps, two turns, one error step (a wrong receiver id) that the agent recovers from."""
    return record("multi_turn_base_901", [
        ("Move 'final_report.pdf' into a new folder called 'archive_2024'.", [
            step([call("ls")], ['{"current_directory_content": ["final_report.pdf", "notes.txt"]}']),
            step([call("mkdir", dir_name="archive_2024")], ["None"]),
            step([call("mv", source="final_report.pdf", destination="archive_2024")],
                 ['{"result": "final_report.pdf moved to archive_2024"}']),
            reply("The report is in archive_2024."),
        ]),
        ("Tell my colleague (user id USR003) that 'the report is archived'.", [
            step([call("send_message", receiver_id="USR999", message="the report is archived")],
                 ['{"error": "Receiver ID USR999 not found."}']),
            step([call("send_message", receiver_id="USR003", message="the report is archived")],
                 ['{"sent_status": true, "message_id": {"new_id": 67410}, "message": "Message sent"}']),
            reply("Message sent."),
        ]),
    ])


def trading_task() -> dict:
    """The price passed to place_order is read from get_stock_info's observation (a data-flow decision)."""
    return record("multi_turn_base_902", [
        ("Buy 100 shares of the first stock on my watchlist at its current price.", [
            step([call("get_watchlist")], ['{"watchlist": ["NVDA", "ALPH"]}']),
            step([call("get_stock_info", symbol="NVDA")], ['{"price": 220.34, "percent_change": 0.34}']),
            step([call("place_order", order_type="Buy", symbol="NVDA", price=220.34, amount=100)],
                 ['{"order_id": 12446, "order_type": "Buy", "status": "Pending"}']),
            reply("Order placed."),
        ]),
    ])


def twitter_task() -> dict:
    return record("multi_turn_base_903", [
        ("Log in to Twitter as john_doe with password secret123 and post 'Quarterly results are out'.", [
            step([call("authenticate_twitter", username="john_doe", password="secret123")],
                 ['{"authentication_status": true}']),
            step([call("post_tweet", content="Quarterly results are out", tags=["#finance"])],
                 ['{"id": 3, "username": "john_doe", "content": "Quarterly results are out"}']),
            reply(),
        ]),
    ])


def failed_task() -> dict:
    """Unsuccessful: nothing of it may reach memory."""
    return record("multi_turn_base_904", [
        ("Delete the file temp_draft.txt.", [
            step([call("rm", file_name="temp_draft_wrong.txt")], ['{"error": "rm: cannot remove"}']),
            reply("I could not delete it."),
        ]),
    ], success=False)


def long_math_task(turns: int = 8) -> dict:
    """More user turns than the six-segment limit."""
    return record("multi_turn_base_905", [
        (f"Add {10 + i} and {20 + i}, then report the result.", [
            step([call("add", a=10 + i, b=20 + i)], [f'{{"result": {30 + 2 * i}}}']),
            reply(f"The sum is {30 + 2 * i}."),
        ]) for i in range(turns)
    ])


def all_records() -> list[dict]:
    return [file_and_message_task(), trading_task(), twitter_task(), failed_task(), long_math_task()]


def write_jsonl(path, records: list[dict]):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_fixtures_are_valid_trajectories():
    for fixture in all_records():
        validate(fixture, where=fixture["task_id"])


def test_fixtures_cover_the_cases_the_memory_tests_need():
    records = all_records()
    assert [r["success"] for r in records].count(False) == 1
    assert any(s["error"] for r in records if r["success"] for t in r["turns"] for s in t["steps"])
    assert max(len(r["turns"]) for r in records) > 6
