"""Memory builders, the placeholder audit, segment repair, the model writer path and the bank on disk."""

import json
import logging
import re

import pytest
from scripted_server import ScriptedServer
from test_memory_fixtures import (
    all_records,
    call,
    failed_task,
    file_and_message_task,
    long_math_task,
    record,
    reply,
    step,
    trading_task,
    twitter_task,
    write_jsonl,
)

from amd.benchmarks.base import create_benchmark
from amd.cli import main
from amd.core.errors import AmdError
from amd.memory.bank import load_bank
from amd.memory.build import build_bank
from amd.memory.placeholders import audit_insight, placeholder_for, trajectory_values
from amd.memory.steps import steps_of
from amd.methods.amd import writers
from amd.methods.amd.entries import build_entries, successful

PLACEHOLDER = re.compile(r"<[A-Z_]+>")
BFCL = create_benchmark("bfcl")


def trajectory_values_calls(rec: dict) -> list[dict]:
    return [c for turn in rec["turns"] for s in turn["steps"] for c in s["calls"]]


def concrete_values_left(text: str, rec: dict) -> list[str]:
    calls = [c for turn in rec["turns"] for s in turn["steps"] for c in s["calls"]]
    stripped = PLACEHOLDER.sub(" ", text)
    return [value for value, _ in trajectory_values(calls)
            if re.search(r"(?<![\w.])" + re.escape(value) + r"(?!\w)", stripped, re.IGNORECASE)]


# ---- builders ----------------------------------------------------------------------------------------------------

def test_only_successful_trajectories_reach_memory():
    kept = successful(all_records() + [file_and_message_task()])  # a duplicate success of task 901
    assert [r["task_id"] for r in kept] == ["multi_turn_base_901", "multi_turn_base_902", "multi_turn_base_903",
                                            "multi_turn_base_905"]


def test_segments_cover_every_step_without_overlap_and_at_most_six():
    for rec in successful(all_records()):
        steps = steps_of(rec)
        segments = writers.rules_segments(BFCL, steps)
        covered = [i for s in segments for i in range(s["start_step"], s["end_step"] + 1)]
        assert covered == list(range(len(steps))), rec["task_id"]
        assert 1 <= len(segments) <= 6
        assert all(1 <= len(s["label"].split()) <= 5 for s in segments)
    assert len(writers.rules_segments(BFCL, steps_of(long_math_task(turns=9)))) == 6


def test_workflow_insight_names_apps_in_call_order_with_placeholders_only():
    rec = file_and_message_task()
    insight = build_entries(rec, BFCL).workflow[0]["insight"]
    order = [insight.index(name) for name in ("GorillaFileSystem.ls", "GorillaFileSystem.mkdir",
                                               "GorillaFileSystem.mv", "MessageAPI.send_message")]
    assert order == sorted(order)
    assert len(insight.split()) <= 120
    assert concrete_values_left(insight, rec) == []
    assert "failed with" in insight  # the error observation became the failure pattern
    assert "USR999" not in insight


def test_rules_insight_has_the_data_flow_decision_rule():
    insight = build_entries(trading_task(), BFCL).workflow[0]["insight"]
    assert "from the result of TradingBot.get_watchlist" in insight
    assert "NVDA" not in insight and "220.34" not in insight


def test_entry_ids_are_stable_and_carry_their_source():
    first, second = build_entries(file_and_message_task(), BFCL), build_entries(file_and_message_task(), BFCL)
    entries = first.workflow + first.subtask + first.function
    assert [e["id"] for e in entries] == [e["id"] for e in second.workflow + second.subtask + second.function]
    assert len({e["id"] for e in entries}) == len(entries)
    assert {e["source_task_id"] for e in entries} == {"multi_turn_base_901"}


def test_function_memory_has_every_executed_call_with_context_doc_and_reasoning():
    rec = file_and_message_task()
    functions = build_entries(rec, BFCL).function
    worked = [c["call"] for t in rec["turns"] for s in t["steps"] for c, o in zip(s["calls"], s["observations"])
              if "error" not in o]
    assert [f["call"] for f in functions] == worked and len(worked) < len(trajectory_values_calls(rec))
    mv = next(f for f in functions if f["name"] == "mv")
    assert mv["app"] == "GorillaFileSystem" and "source" in mv["doc"]["parameters"]["properties"]
    assert "# user: Move 'final_report.pdf'" in mv["code"] and "# before: mkdir(dir_name='archive_2024')" in mv["code"]
    assert "# -> " in mv["code"] and mv["reasoning"].startswith(rec["instruction"])
    [retry] = [f for f in functions if f["name"] == "send_message"]  # the failed attempt is no example
    assert "Receiver ID USR999 not found" in retry["code"]  # but it is the context of the call that worked


def test_subtask_example_renders_calls_with_observations_in_both_forms():
    segment = build_entries(trading_task(), BFCL).subtask[0]
    assert "place_order(order_type='Buy', symbol='NVDA', price=220.34, amount=100)" in segment["code"]
    assert '# -> {"order_id": 12446' in segment["code"]
    assert "called TradingBot.place_order setting order_type, symbol, price, amount" in segment["prose"]
    assert segment["label"] == "place order"


def test_prose_memory_describes_without_call_syntax_values_or_observations():
    """Paper Table 4: the natural-language form is a description; only the code form holds calls and results."""
    for rec in successful(all_records()):
        result = build_entries(rec, BFCL)
        calls = trajectory_values_calls(rec)
        observations = [o for t in rec["turns"] for st in t["steps"] for o in st["observations"]]
        for entry in result.subtask + result.function:
            prose = entry["prose"]
            assert not re.search(r"\w\(", prose), prose  # no call syntax
            assert not any(len(o) > 8 and o[:40] in prose for o in observations), prose
            assert concrete_values_left(prose, rec) == [], prose
        assert any(c["call"] in entry["code"] for entry in result.subtask for c in calls)


def test_prose_says_where_a_value_came_from_and_which_call_failed():
    prose = build_entries(trading_task(), BFCL).subtask[0]["prose"]
    assert "taking symbol from the result of TradingBot.get_watchlist" in prose
    message = build_entries(file_and_message_task(), BFCL)
    assert any("MessageAPI.send_message" in e["prose"] and "it failed with an error" in e["prose"]
               for e in message.subtask)


# ---- placeholder audit ---------------------------------------------------------------------------------------------

def test_audit_repairs_planted_values_with_typed_placeholders():
    rec = file_and_message_task()
    calls = [c for t in rec["turns"] for s in t["steps"] for c in s["calls"]]
    planted = ("Use GorillaFileSystem.mv to move final_report.pdf into archive_2024, then MessageAPI.send_message "
               "to USR003 saying the report is archived.")
    result = audit_insight(planted, calls, ["GorillaFileSystem.mv", "MessageAPI.send_message"])
    assert not result.rejected and result.repaired == 4
    assert "<FILE_PATH>" in result.text and "<ID>" in result.text and "<TEXT>" in result.text
    assert "USR003" not in result.text and "final_report.pdf" not in result.text
    assert "GorillaFileSystem.mv" in result.text  # function names survive


def test_placeholders_know_ibans_urls_and_id_arguments():
    assert placeholder_for("GB29NWBK60161331926819", "recipient") == "<IBAN>"
    assert placeholder_for("www.dora-website.com", "url") == "<URL>"
    assert placeholder_for("https://example.org/a", "") == "<URL>"
    assert placeholder_for("13", "file_id") == "<ID>" and placeholder_for(7, "id") == "<ID>"
    assert placeholder_for("Alice", "recipient") == "<NAME>" and placeholder_for("notes.txt", "file_path") == "<FILE_PATH>"
    assert placeholder_for("USR003", "receiver_id") == "<ID>" and placeholder_for("USR003", "") == "<ID>"


def test_audit_rejects_overlong_or_functionless_insights():
    calls = [call("add", a=10, b=20)]
    assert audit_insight("word " * 121 + "MathAPI.add", calls, ["MathAPI.add"]).rejected
    no_function = audit_insight("Add 10 and 20 then report.", calls, ["MathAPI.add"])
    assert no_function.rejected and no_function.repaired == 2 and "<NUMBER>" in no_function.text
    as_written = audit_insight("Add 10 and 20 then report.", calls, ["MathAPI.add"], repair=False)  # audit=none
    assert not as_written.rejected and as_written.text == "Add 10 and 20 then report." and as_written.repaired == 0
    assert audit_insight("word " * 121, calls, [], repair=False).rejected  # the word limit is the insights option's


# ---- segment repair --------------------------------------------------------------------------------------------------

def test_repair_strips_fences_fixes_overlaps_and_gaps(caplog):
    text = ("Here you go:\n```json\n[{\"start_step\": 0, \"end_step\": 3, \"label\": \"a\", \"description\": \"x\"},"
            " {\"start_step\": 2, \"end_step\": 4, \"label\": \"b\", \"description\": \"y\"},"
            " {\"start_step\": 7, \"end_step\": 9, \"label\": \"c\", \"description\": \"z\"}]\n```\nHope it helps")
    with caplog.at_level(logging.INFO, logger="amd.memory"):
        segments = writers.repair_segments(text, 10, "t")
    assert [(s["start_step"], s["end_step"]) for s in segments] == [(0, 3), (4, 6), (7, 9)]
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "overlap" in messages and "gap" in messages and "stripped" in messages


def test_repair_merges_down_to_six_and_stretches_coverage(caplog):
    items = [{"start_step": i, "end_step": i, "label": "l", "description": "d"} for i in range(1, 9)]
    with caplog.at_level(logging.WARNING, logger="amd.memory"):
        segments = writers.repair_segments(json.dumps(items), 10, "t")
    assert len(segments) == 6 and segments[0]["start_step"] == 0 and segments[-1]["end_step"] == 9
    assert any("merged" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("text", ["not json at all", '{"start_step": 0}', "[]", '[{"label": "x"}]'])
def test_unusable_segment_answers_give_none_with_a_log_line(text, caplog):
    with caplog.at_level(logging.WARNING, logger="amd.memory"):
        assert writers.repair_segments(text, 5, "t") is None
    assert caplog.records and all(r.name == "amd.memory" for r in caplog.records)


# ---- model writer ------------------------------------------------------------------------------------------------------

def writer_server(segment_answer, insight_answer):
    """Answers the segmentation prompt with segment_answer(n_steps), the workflow prompt with insight_answer."""
    def respond(request):
        prompt = request["messages"][-1]["content"]
        n_steps = re.search(r"The run has (\d+) steps", prompt)
        return segment_answer(int(n_steps.group(1))) if n_steps else insight_answer(prompt)
    return ScriptedServer(respond)


def two_segments(n):
    half = max(n // 2, 1) - 1
    items = [{"start_step": 0, "end_step": half, "label": "prepare the inputs", "description": "Looks things up."}]
    if half + 1 <= n - 1:
        items.append({"start_step": half + 1, "end_step": n - 1, "label": "apply the change",
                      "description": "Makes the change and checks it."})
    return json.dumps(items)


def planted_insight(prompt):
    functions = re.search(r"in order \(app.function_name\):\n(.*)\n", prompt).group(1)
    return f"Call {functions} for USR003 with final_report.pdf and 100 shares; check the result has no error."


def test_model_writer_builds_valid_entries_and_counts_repairs(tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", all_records())
    with writer_server(two_segments, planted_insight) as server:
        manifest = build_bank([path], "amd", f"vllm:scripted@{server.url}", "hash:64", tmp_path / "bank")
    bank = load_bank(tmp_path / "bank")
    assert manifest["writer"]["kind"] == "model" and manifest["writer"]["spec"].startswith("vllm:scripted@")
    assert {s["label"] for s in bank.entries["subtask"]} <= {"prepare the inputs", "apply the change"}
    assert [e["source_task_id"] for e in bank.entries["workflow"]] == manifest["successful_task_ids"]  # in order
    for entry in bank.entries["workflow"]:
        rec = next(r for r in all_records() if r["task_id"] == entry["source_task_id"])
        assert entry["insight"].startswith("Call ") and concrete_values_left(entry["insight"], rec) == []
    # USR003 and final_report.pdf appear in task 901's calls, 100 in task 902's: both insights were repaired.
    assert manifest["audit"]["insights_repaired"] == 2 and manifest["audit"]["values_replaced"] == 3
    assert sorted(item["edit"] for item in manifest["audited"]["edited"]) == ["1 values replaced", "2 values replaced"]


def test_the_audit_reports_what_it_dropped_and_edited_and_audit_none_keeps_insights_as_written(tmp_path, capsys):
    """One insight names no function (amd's audit drops it), one carries a value of its own task (edited); the
    paper's way (audit=none) keeps both as the writer wrote them."""
    def insight(prompt):
        planted = planted_insight(prompt)
        return planted if "TradingBot" in planted else "Move the file for USR003; check the result has no error."

    path = write_jsonl(tmp_path / "t.jsonl", [file_and_message_task(), trading_task()])
    with writer_server(two_segments, insight) as server:
        audited = build_bank([path], "amd", f"vllm:scripted@{server.url}", "hash:64", tmp_path / "audited")
        written = build_bank([path], "amd", f"vllm:scripted@{server.url}", "hash:64", tmp_path / "as_written",
                             options={"audit": "none"})
    file_task, trading = file_and_message_task()["task_id"], trading_task()["task_id"]
    assert audited["audited"]["dropped"] == [{"source_task_id": file_task, "reason": "names no app.function_name"}]
    assert [item["id"] for item in audited["audited"]["edited"]] == [f"workflow:{trading}:0"]
    assert written["audited"] == {"dropped": [], "edited": []} and written["build_settings"].endswith("audit=none")
    insights = [entry["insight"] for entry in load_bank(tmp_path / "as_written").entries["workflow"]]
    assert len(insights) == 2 and "USR003" in insights[0] and "100 shares" in insights[1]
    assert main(["memory", "show", str(tmp_path / "audited")]) == 0
    shown = capsys.readouterr().out
    assert "insight audit: 1 insights dropped, 1 edited" in shown
    assert f"dropped {file_task}: names no app.function_name" in shown and f"edited workflow:{trading}:0" in shown


def test_model_writer_malformed_answers_fall_back_to_rules_with_a_log_line(tmp_path, caplog):
    path = write_jsonl(tmp_path / "t.jsonl", [trading_task()])
    with (caplog.at_level(logging.WARNING, logger="amd.memory"),
          writer_server(lambda n: "I cannot split this.", lambda p: "") as server):
        manifest = build_bank([path], "amd", f"vllm:scripted@{server.url}", "hash:64", tmp_path / "bank")
    bank = load_bank(tmp_path / "bank")
    rules = build_entries(trading_task(), BFCL)
    assert [s["label"] for s in bank.entries["subtask"]] == [s["label"] for s in rules.subtask]
    assert bank.entries["workflow"][0]["insight"] == rules.workflow[0]["insight"]
    assert manifest["audit"]["writer_fallbacks"] == 1
    messages = [r.getMessage() for r in caplog.records]
    assert any("rule segments" in m for m in messages) and any("rules insight" in m for m in messages)


# ---- bank on disk ------------------------------------------------------------------------------------------------------

def test_manifest_records_sources_agents_counts_and_rules_writer(tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", all_records())
    manifest = build_bank([path], "amd", "rules", "hash:32", tmp_path / "bank")
    on_disk = json.loads((tmp_path / "bank" / "manifest.json").read_text())
    assert on_disk == manifest
    assert manifest["writer"]["kind"].startswith("rules") and manifest["embedder"] == "hash:32"
    assert manifest["sources"][0]["records"] == 5 and manifest["sources"][0]["successful"] == 4
    assert len(manifest["sources"][0]["sha256"]) == 64
    assert "multi_turn_base_904" in manifest["task_ids"] and "multi_turn_base_904" not in manifest["successful_task_ids"]
    bank = load_bank(tmp_path / "bank")
    assert manifest["counts"] == {t: len(bank.entries[t]) for t in ("workflow", "subtask", "function")}
    assert all(e["source_task_id"] != "multi_turn_base_904" for t in bank.entries for e in bank.entries[t])


def test_student_memory_manifest_names_the_student(tmp_path):
    students = [record("multi_turn_base_7", [("Add 10 and 20.", [step([call("add", a=10, b=20)], ['{"result": 30}']),
                                                                  reply()])], agent="vllm:qwen3-4b@http://h:1/v1"),
                record("multi_turn_base_8", [("Add 1 and 2.", [reply("3")])], success=False,
                       agent="vllm:qwen3-4b@http://h:1/v1")]
    manifest = build_bank([write_jsonl(tmp_path / "s.jsonl", students)], "amd", "rules", "hash:16", tmp_path / "bank")
    assert [a["spec"] for a in manifest["agents"]] == ["vllm:qwen3-4b@http://h:1/v1"]
    assert manifest["counts"]["workflow"] == 1


def test_a_crashed_build_leaves_the_previous_bank_intact(tmp_path, monkeypatch):
    path = write_jsonl(tmp_path / "t.jsonl", all_records())
    build_bank([path], "amd", "rules", "hash:32", tmp_path / "bank")
    before = {p.name: p.read_bytes() for p in (tmp_path / "bank").iterdir()}

    def crash(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr("amd.memory.bank.faiss.write_index", crash)
    with pytest.raises(RuntimeError):
        build_bank([write_jsonl(tmp_path / "u.jsonl", [twitter_task()])], "amd", "rules", "hash:32", tmp_path / "bank")
    assert {p.name: p.read_bytes() for p in (tmp_path / "bank").iterdir()} == before
    monkeypatch.undo()
    build_bank([tmp_path / "u.jsonl"], "amd", "rules", "hash:32", tmp_path / "bank")
    assert load_bank(tmp_path / "bank").manifest["counts"]["workflow"] == 1
    assert not (tmp_path / "bank.tmp").exists()


def test_bad_inputs_are_one_line_errors(tmp_path):
    with pytest.raises(AmdError, match="no such trajectory file"):
        build_bank([tmp_path / "missing.jsonl"], "amd", "rules", "hash:8", tmp_path / "bank")
    with pytest.raises(AmdError, match="not a memory bank"):
        load_bank(tmp_path)
    with pytest.raises(AmdError, match="unknown embedder"):
        build_bank([write_jsonl(tmp_path / "t.jsonl", [failed_task()])], "amd", "rules", "hash", tmp_path / "bank")


def test_writer_params_go_over_the_writer_defaults_and_null_leaves_temperature_out(tmp_path, capsys):
    from amd.cli import main

    path = write_jsonl(tmp_path / "t.jsonl", [trading_task()])
    with writer_server(two_segments, planted_insight) as server:
        assert main(["memory", "build", "--trajectories", str(path), "--writer", f"vllm:scripted@{server.url}",
                     "--writer-params", '{"temperature": null}', "--embedder", "hash:16",
                     "--out", str(tmp_path / "bank")]) == 0
        bodies = [request.body for request in server.chat_requests()]
        assert bodies and all("temperature" not in b and b["max_tokens"] == 2048 for b in bodies)
    assert main(["memory", "build", "--trajectories", str(path), "--writer", "rules", "--writer-params", "[1]",
                 "--embedder", "hash:16", "--out", str(tmp_path / "other")]) == 2
    assert "amd: error: --writer-params must be a JSON object, got '[1]'" in capsys.readouterr().err
    assert not (tmp_path / "other").exists()


def test_memory_cli_builds_shows_and_queries(tmp_path, capsys):
    import argparse

    from amd.cli.memory import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))

    def run(*argv):
        args = parser.parse_args(["memory", *argv])
        return args.handler(args)

    path = write_jsonl(tmp_path / "t.jsonl", all_records())
    assert run("build", "--trajectories", str(path), "--embedder", "hash:64", "--out", str(tmp_path / "b")) == 0
    assert '"workflow": 4' in capsys.readouterr().out
    assert run("show", str(tmp_path / "b"), "--n", "1") == 0
    shown = capsys.readouterr().out
    assert "writer rules" in shown and "[workflow:multi_turn_base_901:0]" in shown and "[function:" in shown
    assert run("query", str(tmp_path / "b"), "Buy 100 shares of the first stock on my watchlist at its current "
               "price.", "--type", "workflow", "--k", "2") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "== workflow" and lines[1].startswith("+1.000  workflow:multi_turn_base_902:0")
