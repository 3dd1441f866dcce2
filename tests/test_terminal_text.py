"""Text from a run file, a bank or a model never reaches a terminal or a page as control characters (issue 41, item
7): escape sequences in a trajectory's instruction and observations, or in a run's agent spec, are shown as `\\x1b`
by `amd memory show` / `query`, `amd score`, error lines, log lines and the bytes of `amd view`'s page."""

import logging
import re

from test_memory_fixtures import all_records, call, record, step, write_jsonl

from amd.cli import PrintableFormatter, main
from amd.core.text import printable, without_controls

# A window-title change, a screen clear, fake red text, a bell, a NUL, a C1 control and a right-to-left override.
HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x1b[31mFAKE OK\x1b[0m\x00\x9b\u202e"
SENT = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def hostile_task() -> dict:
    return record("multi_turn_base_906", [
        (f"Buy 100 shares of NVDA. {HOSTILE}", [
            step([call("get_stock_info", symbol="NVDA")], [f'{{"price": 220.34, "note": "{HOSTILE!r}"}}'.replace(
                "'", "")]),
            step([call("place_order", order_type="Buy", symbol="NVDA", price=220.34, amount=100)],
                 [f"Order placed {HOSTILE}"]),
        ]),
    ])


def test_the_helper_shows_every_control_character_and_keeps_lines():
    assert printable("a\x1b[2Jb\n\tc\u202e") == "a\\x1b[2Jb\n\tc\\u202e"
    assert printable("a\nb\tc", lines=False) == "a\\x0ab\\x09c"
    assert without_controls(f"ok{HOSTILE}\n") == "ok]0;pwned[2J[31mFAKE OK[0m\n"


def test_memory_show_and_query_show_hostile_bank_text_escaped(tmp_path, capsys):
    trajectories = write_jsonl(tmp_path / "t.jsonl", [hostile_task(), *all_records()])
    assert main(["memory", "build", "--trajectories", str(trajectories), "--embedder", "hash:32",
                 "--out", str(tmp_path / "bank")]) == 0
    capsys.readouterr()
    assert main(["memory", "show", str(tmp_path / "bank"), "--n", "9"]) == 0
    shown = capsys.readouterr().out
    assert "FAKE OK" in shown and "\\x1b[2J" in shown and not SENT.search(shown)
    assert main(["memory", "query", str(tmp_path / "bank"), "Buy 100 shares of NVDA", "--k", "9"]) == 0
    queried = capsys.readouterr().out
    assert "FAKE OK" in queried and "\\x1b]0;pwned\\x07" in queried and not SENT.search(queried)


def test_score_shows_a_hostile_agent_spec_escaped(tmp_path, capsys):
    run = write_jsonl(tmp_path / "run.jsonl", [record("multi_turn_base_1", [("Do it.", [])],
                                                      agent=f"vllm:m{HOSTILE}@http://127.0.0.1:1/v1")])
    assert main(["score", str(run)]) == 0
    out = capsys.readouterr().out
    assert "vllm:m\\x1b]0;pwned\\x07" in out and not SENT.search(out)


def test_error_lines_show_record_text_escaped(tmp_path, capsys):
    doubled = record(f"multi_turn_base_1{HOSTILE}", [("Do it.", [])])
    run = write_jsonl(tmp_path / "run.jsonl", [doubled, doubled])
    assert main(["score", str(run)]) == 2
    err = capsys.readouterr().err
    assert "written more than once (multi_turn_base_1\\x1b]0;pwned" in err and not SENT.search(err)


def test_log_lines_show_their_text_escaped(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(logging.root, "handlers", [])  # as in a fresh `amd` process: main installs its handler
    run = write_jsonl(tmp_path / "run.jsonl", [record("multi_turn_base_1", [("Do it.", [])])])
    assert main(["score", str(run)]) == 0
    handlers = [h for h in logging.root.handlers if isinstance(h.formatter, PrintableFormatter)]
    assert len(handlers) == 1
    logging.getLogger("amd.test").warning("observation: %s", HOSTILE)
    err = capsys.readouterr().err
    assert "observation: \\x1b]0;pwned" in err and not SENT.search(err)


def test_the_view_page_holds_no_control_character_bytes(tmp_path):
    run = write_jsonl(tmp_path / "run.jsonl", [hostile_task()])
    assert main(["view", str(run), "--out", str(tmp_path / "page.html")]) == 0
    page = (tmp_path / "page.html").read_bytes().decode("utf-8")
    assert "FAKE OK" in page and "\\x1b[2J" in page and not SENT.search(page)
