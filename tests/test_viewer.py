"""`amd view`: the page of a run beside another (handmade schema-valid runs and a bank written by amd's own store),
its content, pairing, filters and escaping; then the page in a real headless browser (Debian's chromium): the DOM
after its script ran, with each filter, and a screenshot."""

import base64
import hashlib
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from amd.analysis.viewer import build_page, render, write_view
from amd.cli import main
from amd.core.errors import AmdError
from amd.core.schema import validate
from amd.memory.bank import BankContents, write_bank
from amd.memory.bank_schema import BANK_SCHEMA
from amd.memory.online import history_path

# Model text that tries to run: each must reach the page as text, never as markup.
ATTACK = ("</pre></div><script>document.body.setAttribute('data-pwned', 'yes')</script>"
          "<img src=x onerror=\"document.body.setAttribute('data-pwned', 'img')\">")
TASKS = ["banking/user_task_0", "banking/user_task_1", "banking/user_task_2"]
CHROMIUM = shutil.which("chromium")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="Debian's chromium is not installed: `apt-get install -y chromium` (.ci/run installs it "
                             "where it runs as root with apt-get); the page's unit tests above still run")
BROWSER_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def step(text, calls=(), observations=(), error=False, **extra):
    return {"model_text": text, "calls": [{"name": c.split("(")[0], "arguments": {}, "call": c} for c in calls],
            "observations": list(observations), "error": error, "tokens": {"prompt": 100, "completion": 10},
            **extra}


def record(task_id, success, steps, memory, system_memory=()):
    return validate({
        "schema": "amd.trajectory/1", "task_id": task_id, "benchmark": "agentdojo",
        "data_version": {"package": "agentdojo==test", "sha256": "0" * 64},
        "agent": {"spec": "local:qwen2.5-coder-1.5b", "kind": "model", "model": None, "params": {}},
        "memory": memory, "instruction": f"instruction of {task_id}",
        "turns": [{"user": f"instruction of {task_id}", "steps": steps}], "system_memory": list(system_memory),
        "decoded_calls": [], "success": success, "checker": {"utility": success}, "status": "finished",
        "error": None, "n_steps": len(steps), "tokens": {"prompt": 100 * len(steps), "completion": 10 * len(steps)},
        "wall_time_s": 2.5,
    })


@pytest.fixture
def runs(tmp_path):
    """A bank of two entries, a wf_st_fn run that read it and a zero-shot run over the same tasks: task 0 solved by
    both, task 1 only with memory (discordant), task 2 by neither; the memory run's model text attacks the page."""
    contents = BankContents(
        {"workflow": [{"id": "workflow:banking/user_task_5:0", "type": "workflow", "source_task_id": "banking/user_task_5",
                       "source_group": "banking/user_task_5", "query": "pay a bill",
                       "insight": "Read the bill with banking_client.read_file first. " + ATTACK}],
         "function": [{"id": "function:send_money:0", "type": "function", "source_task_id": "banking/user_task_6",
                       "source_group": "banking/user_task_6", "name": "send_money", "reasoning": "pay",
                       "example": "send_money(recipient='<IBAN>', amount=<AMOUNT>)"}]},
        {"workflow": "query", "function": "reasoning"})
    bank_dir = tmp_path / "bank"
    write_bank(bank_dir, {"schema": BANK_SCHEMA, "dim": 4, "types": {"workflow": {}, "function": {}}}, contents,
               {t: np.eye(1, 4, dtype=np.float32) for t in contents.entries})
    memory = {"config": "wf_st_fn", "method": "amd", "bank": str(bank_dir), "protocol": "self_excluded",
              "bank_sha256": hashlib.sha256((bank_dir / "manifest.json").read_bytes()).hexdigest()}
    workflow = {"type": "workflow", "entry_id": "workflow:banking/user_task_5:0",
                "source_task_id": "banking/user_task_5", "similarity": 0.8123, "query": "instruction"}
    hint = {"type": "function", "entry_id": "function:send_money:0", "source_task_id": "banking/user_task_6",
            "similarity": None, "query": "send_money"}
    refused = {"text": "send_money(recurring=True)", "reason": "unknown argument 'recurring'"}
    with_memory = [
        record(TASKS[0], True, [step('{"name": "read_file"}', ["read_file(file_path='bill.txt')"], ["Bill: 98.70"]),
                                step("Paid.")], memory, [workflow]),
        record(TASKS[1], True, [step("x", observations=['{"error": "rejected call"}'], error=True,
                                     rejected=[refused], injected_memory=[hint],
                                     memory_details={"fn_gate": {"withheld": []}}),
                                step(ATTACK)], memory, [workflow]),
        record(TASKS[2], False, [step(ATTACK, finish_reason="length")], memory),
    ]
    zero = {"config": "zero_shot", "bank": None}
    zero_shot = [record(TASKS[0], True, [step("Paid.")], zero), record(TASKS[1], False, [step("No.")], zero),
                 record(TASKS[2], False, [step("No.")], zero)]
    paths = {"memory": tmp_path / "memory.jsonl", "zero_shot": tmp_path / "zero_shot.jsonl", "bank": bank_dir}
    for name, records in (("memory", with_memory), ("zero_shot", zero_shot)):
        paths[name].write_text("".join(json.dumps(r) + "\n" for r in records))
    return paths


class Elements(HTMLParser):
    """Every start tag with its attributes, and the text inside each <script>."""

    def __init__(self, html: str):
        super().__init__()
        self.tags, self.scripts, self._in_script = [], [], False
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts.append(data)

    def named(self, tag):
        return [attrs for name, attrs in self.tags if name == tag]


def test_each_task_shows_both_runs_side_by_side_zero_shot_first_with_the_pairs(runs):
    page = build_page(runs["memory"], runs["zero_shot"], runs["bank"])
    assert [column["label"] for column in page["columns"]] == ["zero_shot (against)", "wf_st_fn (this run)"]
    assert page["paired"] == {"tasks": 3, "both": 1, "neither": 1,
                              "only": [("zero_shot (against)", 0), ("wf_st_fn (this run)", 1)]}
    assert [(t["task_id"], t["verdicts"], t["failed"], t["discordant"]) for t in page["tasks"]] == [
        (TASKS[0], [True, True], False, False), (TASKS[1], [False, True], False, True),
        (TASKS[2], [False, False], True, False)]
    html = render(page)
    assert "Paired over 3 tasks: solved by both 1," in html and "by neither 1." in html
    assert html.index("zero_shot (against)</h3>") < html.index("wf_st_fn (this run)</h3>")


def test_steps_calls_refusals_errors_and_injected_memory_with_source_and_similarity(runs):
    html = render(build_page(runs["memory"], runs["zero_shot"], runs["bank"]))
    assert "<pre class=\"call\">read_file(file_path=&#39;bill.txt&#39;)</pre>" in html
    assert "<pre class=\"observation\">Bill: 98.70</pre>" in html
    assert "refused: send_money(recurring=True) — unknown argument &#39;recurring&#39;" in html
    assert '<div class="step error">' in html and "finish length" in html
    assert "in the system prompt: <code>workflow:banking/user_task_5:0</code>" in html
    assert "from task <code>banking/user_task_5</code>" in html and "similarity 0.812" in html
    assert "after the error: <code>function:send_money:0</code>" in html and "similarity —" in html
    # the bank's entry text, from the bank the run read
    assert "<dt>insight</dt><dd><pre>Read the bill with banking_client.read_file first." in html
    assert "send_money(recipient=&#39;&lt;IBAN&gt;&#39;, amount=&lt;AMOUNT&gt;)" in html
    without_bank = render(build_page(runs["memory"], runs["zero_shot"]))
    assert "<dt>insight</dt>" not in without_bank and "amd view --bank BANK shows it" in without_bank


def test_an_online_run_shows_the_entries_it_added_and_what_its_method_records(runs, tmp_path):
    """Entries an online run added come from its history (AMD's spec: run_entries); the method's own injection fields
    (online, rank_penalty) are shown as they are."""
    added = {"id": "online:workflow:banking/user_task_0:0", "type": "workflow", "source_task_id": TASKS[0],
             "source_group": TASKS[0], "query": "q", "insight": "learnt while running"}
    run = tmp_path / "online.jsonl"
    record = json.loads(runs["memory"].read_text().splitlines()[1])
    record["system_memory"] = [{"type": "workflow", "entry_id": added["id"], "source_task_id": TASKS[0],
                                "similarity": 0.5, "online": True, "rank_penalty": 0.1}]
    run.write_text(json.dumps(record) + "\n")
    history_path(run).write_text(json.dumps({"header": True}) + "\n" + json.dumps({"added": [added]}) + "\n")
    html = render(build_page(run, bank_dir=runs["bank"]))
    assert "similarity 0.500, online true, rank_penalty 0.1" in html
    assert "<dt>insight</dt><dd><pre>learnt while running</pre></dd>" in html


def test_model_text_cannot_inject_markup_or_script(runs):
    html = render(build_page(runs["memory"], runs["zero_shot"], runs["bank"]))
    elements = Elements(html)
    assert len(elements.named("script")) == 1 and not elements.named("img")
    assert "data-pwned" not in "".join(elements.scripts)
    assert html.count("&lt;script&gt;document.body.setAttribute(&#39;data-pwned&#39;, &#39;yes&#39;)") == 4
    # the page loads nothing and runs only its own script and style, by their hashes
    (policy,) = [m["content"] for m in elements.named("meta") if m.get("http-equiv") == "Content-Security-Policy"]
    script_hash = base64.b64encode(hashlib.sha256(elements.scripts[0].encode()).digest()).decode()
    assert policy.startswith("default-src 'none';") and f"script-src 'sha256-{script_hash}';" in policy
    assert not [attrs for _, attrs in elements.tags if "src" in attrs]
    assert all(attrs["href"].startswith("#") for attrs in elements.named("a"))


def test_filters_mark_failed_and_discordant_tasks_and_without_a_pair_only_failed(runs):
    html = render(build_page(runs["memory"], runs["zero_shot"], runs["bank"]))
    sections = [attrs for attrs in Elements(html).named("section")]
    assert [(s["data-failed"], s["data-discordant"]) for s in sections] == [
        ("false", "false"), ("false", "true"), ("true", "false")]
    assert 'href="#filter=discordant"' in html
    alone = render(build_page(runs["zero_shot"]))
    assert 'href="#filter=discordant"' not in alone and 'href="#filter=failed"' in alone
    assert [s["data-failed"] for s in Elements(alone).named("section")] == ["false", "true", "true"]


def test_a_task_only_one_run_has_is_shown_as_not_run_by_the_other(runs, tmp_path):
    partial = tmp_path / "partial.jsonl"
    partial.write_text(runs["zero_shot"].read_text().splitlines()[0] + "\n")
    page = build_page(runs["memory"], partial)
    assert page["paired"]["tasks"] == 1 and [t["verdicts"] for t in page["tasks"]][1:] == [[None, True],
                                                                                          [None, False]]
    assert render(page).count("not in this run") == 2


def test_runs_that_cannot_be_paired_and_a_bank_no_run_read_are_refused(runs, tmp_path):
    other = tmp_path / "other.jsonl"
    other.write_text(runs["zero_shot"].read_text().replace("banking/", "slack/"))
    with pytest.raises(AmdError, match="no task in common"):
        build_page(runs["memory"], other)
    with pytest.raises(AmdError, match=r"--bank .*: no run read this bank .*zero_shot.jsonl: no bank"):
        build_page(runs["zero_shot"], bank_dir=runs["bank"])


def test_the_command_writes_one_self_contained_page(runs, tmp_path, capsys):
    out = tmp_path / "view.html"
    assert main(["view", str(runs["memory"]), "--against", str(runs["zero_shot"]), "--bank", str(runs["bank"]),
                 "--out", str(out)]) == 0
    assert "3 tasks ->" in capsys.readouterr().out and out.read_text().startswith("<!DOCTYPE html>")
    assert main(["view", str(runs["memory"]), "--out", str(tmp_path / "view.txt")]) == 2
    assert "--out wants an .html path" in capsys.readouterr().err


# ---- in a real browser -----------------------------------------------------------------------------------------


def chromium(tmp_path, *args) -> subprocess.CompletedProcess:
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    done = subprocess.run([CHROMIUM, *BROWSER_FLAGS, f"--user-data-dir={profile}", *args], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


@pytest.fixture
def page_file(runs, tmp_path) -> Path:
    out = tmp_path / "view.html"
    write_view(runs["memory"], out, runs["zero_shot"], runs["bank"])
    return out


@needs_chromium
@pytest.mark.parametrize("filter_name, visible", [("all", TASKS), ("failed", TASKS[2:]), ("discordant", TASKS[1:2])])
def test_in_chromium_each_filter_shows_its_tasks_and_injected_text_never_runs(page_file, tmp_path, filter_name,
                                                                              visible):
    dom = chromium(tmp_path, "--dump-dom", f"{page_file.as_uri()}#filter={filter_name}").stdout
    elements = Elements(dom)
    body = elements.named("body")[0]
    assert body["data-filter"] == filter_name and "data-pwned" not in body  # the script ran; the attack did not
    shown = [re.search(r'id="task-(\d+)"', tag).group(1) for tag in re.findall(r"<section [^>]*>", dom)
             if "hidden" not in tag]
    assert [TASKS[int(index)] for index in shown] == visible
    assert f"{len(visible)} of 3 tasks shown" in dom
    pressed = [a["data-show"] for a in elements.named("a") if a.get("aria-pressed") == "true"]
    assert pressed == [filter_name]


@needs_chromium
def test_in_chromium_the_page_renders_to_a_screenshot_of_text_and_colour(page_file, tmp_path):
    from PIL import Image

    shot = tmp_path / "view.png"
    chromium(tmp_path, "--window-size=1280,900", f"--screenshot={shot}", page_file.as_uri())
    image = Image.open(shot).convert("RGB")
    assert image.size == (1280, 900)
    pixels = np.asarray(image).reshape(-1, 3)
    dark = (pixels.sum(axis=1) < 200).mean()  # text
    assert 0.005 < dark < 0.5 and len(np.unique(pixels, axis=0)) > 50  # not blank, not one colour
    green = ((pixels[:, 1] > 100) & (pixels[:, 0] < 60) & (pixels[:, 2] < 90)).sum()  # "solved" in the index
    assert green > 50


def test_a_success_the_step_cap_ended_is_shown_as_not_strict(runs, tmp_path):
    """AgentDojo checks a capped episode as it stands: the page shows its verdict and, beside it, the strict one."""
    records = [json.loads(line) for line in runs["memory"].read_text().splitlines()]
    records[1] |= {"status": "step_limit", "error": "more than 20 steps in the task"}
    capped = tmp_path / "capped.jsonl"
    capped.write_text("".join(json.dumps(r) + "\n" for r in records))
    page = build_page(capped)
    assert (page["runs"][0]["solved"], page["runs"][0]["strict"]) == (2, 1)
    assert [side["strict"] for task in page["tasks"] for side in task["sides"]] == [True, False, False]
    html = render(page)
    assert "strict: solved, ended by the agent" in html and "strict: failed, ended by a cap" in html
    assert "<td>1 / 3</td>" in html and "(not strict)" in html
