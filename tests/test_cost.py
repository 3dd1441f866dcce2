"""Cost per run (amd.analysis.cost): tokens of every role (agent, memory method, user simulator, the bank's writer) and US
dollars from data/prices.csv, on handmade schema-valid runs and bank manifests; `amd score` prints them."""

import hashlib
import json

import pytest

from amd.analysis.cost import PRICE_FILE, price_table, run_cost
from amd.cli import main
from amd.core.schema import validate
from amd.memory.online import history_path

MINI = "openai:gpt-5-mini"


def record(task_id, spec, tokens, memory=None, **extra):
    return validate({
        "schema": "amd.trajectory/1", "task_id": task_id, "benchmark": "bfcl",
        "data_version": {"package": "bfcl-eval==test", "sha256": "0" * 64},
        "agent": {"spec": spec, "kind": "model", "model": None, "params": {}},
        "memory": memory or {"config": "zero_shot", "bank": None}, "instruction": "do it",
        "turns": [{"user": "do it", "steps": [{"model_text": "x", "calls": [], "observations": [], "error": False}]}],
        "decoded_calls": [], "success": True, "checker": extra.pop("checker", {}), "status": "finished",
        "error": None, "n_steps": 1, "tokens": tokens, "wall_time_s": 1.0, **extra,
    })


def bank(path, writer, usage=None, **manifest) -> dict:
    """A bank folder holding only its manifest (all the cost reads); returns the run's memory field for it."""
    path.mkdir(parents=True)
    body = {"writer": {"spec": writer}, **({"writer_usage": usage} if usage else {}), **manifest}
    raw = json.dumps(body).encode()
    (path / "manifest.json").write_bytes(raw)
    return {"config": "wf_st_fn", "bank": str(path), "bank_sha256": hashlib.sha256(raw).hexdigest()}


def write(path, records) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def test_every_price_names_its_date_and_source():
    prices = price_table()
    assert MINI in prices and all(p.date and p.source and p.input > 0 and p.output > 0 for p in prices.values())
    assert PRICE_FILE.name == "prices.csv"


def test_every_role_is_priced_cached_prompt_tokens_at_the_cached_price(tmp_path):
    price = price_table()[MINI]
    memory = bank(tmp_path / "bank", MINI, {"replies": 4, "prompt": 40_000, "completion": 8_000, "cached_prompt": 0})
    records = [
        record("t0", MINI, {"prompt": 100_000, "completion": 2_000, "cached_prompt": 60_000}, memory,
               memory_calls={"replies": 1, "requests": 1, "prompt": 3_000, "completion": 500},
               user_calls={"spec": "openai:gpt-5.5", "replies": 2, "requests": 2, "prompt": 5_000,
                           "completion": 300}),
        record("t1", MINI, {"prompt": 50_000, "completion": 1_000}, memory),
    ]
    cost = run_cost(records, tmp_path / "run.jsonl")
    by_role = {part["role"]: part for part in cost["parts"]}
    assert by_role["agent"]["prompt"] == 150_000 and by_role["agent"]["cached_prompt"] == 60_000
    agent = (90_000 * price.input + 60_000 * price.cached_input + 3_000 * price.output) / 1e6
    assert by_role["agent"]["usd"] == pytest.approx(agent)
    assert by_role["memory"]["usd"] == pytest.approx((3_000 * price.input + 500 * price.output) / 1e6)
    big = price_table()["openai:gpt-5.5"]
    assert by_role["user"]["spec"] == "openai:gpt-5.5"
    assert by_role["user"]["usd"] == pytest.approx((5_000 * big.input + 300 * big.output) / 1e6)
    assert by_role["writer"]["usd"] == pytest.approx((40_000 * price.input + 8_000 * price.output) / 1e6)
    assert cost["tokens"] == 153_000 + 3_500 + 5_300 + 48_000
    assert cost["usd"] == pytest.approx(sum(part["usd"] for part in cost["parts"])) and not cost["notes"]


def test_models_served_here_cost_nothing_but_their_tokens_count(tmp_path):
    memory = bank(tmp_path / "bank", "rules")
    records = [record("t0", "local:qwen2.5-coder-1.5b", {"prompt": 7_000, "completion": 90}, memory),
               record("t1", "local:qwen2.5-coder-1.5b", {"prompt": 3_000, "completion": 10}, memory)]
    cost = run_cost(records, tmp_path / "run.jsonl")
    assert cost == {"tokens": 10_100, "usd": 0.0, "notes": [], "parts": [
        {"role": "agent", "spec": "local:qwen2.5-coder-1.5b", "prompt": 10_000, "completion": 100,
         "cached_prompt": 0, "known": True, "tokens": 10_100, "usd": 0.0},
        {"role": "writer", "spec": "rules", "prompt": 0, "completion": 0, "cached_prompt": 0, "known": True,
         "tokens": 0, "usd": 0.0}]}
    vllm = run_cost([record("t0", "vllm:Qwen/Qwen3-4B@http://gpu:8000/v1", {"prompt": 5, "completion": 5})], "r")
    assert vllm["usd"] == 0.0 and vllm["tokens"] == 10


def test_an_unpriced_hosted_model_leaves_the_dollars_unknown_and_says_where_to_add_it(tmp_path):
    cost = run_cost([record("t0", "openai:some-new-model", {"prompt": 10, "completion": 1})], tmp_path / "r")
    assert cost["usd"] is None and cost["tokens"] == 11
    (note,) = cost["notes"]
    assert note == ("agent: no price for openai:some-new-model in prices.csv: add its row (USD per million tokens, "
                    "with date and source)")


def test_a_model_reached_with_a_key_of_its_own_costs_what_its_model_costs(tmp_path):
    keyed = run_cost([record("t0", f"{MINI}#key=TEAM_KEY", {"prompt": 1_000_000, "completion": 0})], tmp_path / "r")
    assert keyed["usd"] == pytest.approx(price_table()[MINI].input) and not keyed["notes"]


def test_a_bank_that_is_missing_or_was_rebuilt_leaves_the_writer_unknown(tmp_path):
    memory = bank(tmp_path / "bank", MINI, {"replies": 1, "prompt": 10, "completion": 1})
    runs = [record("t0", "local:qwen2.5-coder-1.5b", {"prompt": 1, "completion": 1}, memory)]
    (tmp_path / "bank" / "manifest.json").write_text(json.dumps({"writer": {"spec": MINI}, "rebuilt": True}))
    rebuilt = run_cost(runs, tmp_path / "r")
    assert rebuilt["usd"] is None and rebuilt["tokens"] is None and "was rebuilt after the run" in rebuilt["notes"][0]
    gone = run_cost([record("t0", "local:qwen2.5-coder-1.5b", {"prompt": 1, "completion": 1},
                            memory | {"bank": str(tmp_path / "elsewhere")})], tmp_path / "r")
    assert gone["usd"] is None and "is not here" in gone["notes"][0]


def test_a_pooled_bank_costs_what_its_members_writers_took(tmp_path):
    first = bank(tmp_path / "a", MINI, {"replies": 1, "prompt": 1_000_000, "completion": 0})
    second = bank(tmp_path / "b", "rules")
    members = {name: {"bank": memory["bank"], "bank_sha256": memory["bank_sha256"]}
               for name, memory in (("a", first), ("b", second))}
    pool = bank(tmp_path / "pool", "openai:gpt-5-mini + rules", pool={"members": members})
    cost = run_cost([record("t0", "local:qwen2.5-coder-1.5b", {"prompt": 0, "completion": 0}, pool)], "r")
    writers = [(part["spec"], part["usd"]) for part in cost["parts"] if part["role"] == "writer"]
    assert writers == [(MINI, pytest.approx(price_table()[MINI].input)), ("rules", 0.0)]


def test_an_online_run_counts_its_writer_model_from_the_history(tmp_path):
    run = tmp_path / "run.jsonl"
    memory = bank(tmp_path / "bank", "rules") | {"online": {"writer": MINI, "dedup": 0.95, "decay": 0.05}}
    events = [{"task_id": "t0", "writer": {"calls": 2, "prompt_tokens": 900, "completion_tokens": 100}},
              {"task_id": "t1"}]  # a failed task distils nothing
    history_path(run).write_text("".join(json.dumps(e) + "\n" for e in [{"header": 1}, *events]))
    cost = run_cost([record("t0", "local:qwen2.5-coder-1.5b", {"prompt": 0, "completion": 0}, memory)], run)
    online = [part for part in cost["parts"] if part["spec"] == MINI]
    assert [(part["role"], part["tokens"]) for part in online] == [("writer", 1_000)]


def test_a_user_simulator_run_recorded_before_its_tokens_were_counted_is_unknown(tmp_path):
    cost = run_cost([record("t0", "local:qwen2.5-coder-1.5b", {"prompt": 1, "completion": 1},
                            checker={"user_model": MINI})], tmp_path / "r")
    assert cost["usd"] is None and cost["tokens"] is None
    assert cost["notes"] == ["user: t0 was recorded before amd counted the user simulator's tokens"]


def test_amd_score_prints_tokens_per_role_and_dollars(tmp_path, capsys):
    memory = bank(tmp_path / "bank", MINI, {"replies": 2, "prompt": 1_000_000, "completion": 0})
    run = write(tmp_path / "run.jsonl", [
        record("t0", "local:qwen2.5-coder-1.5b", {"prompt": 400, "completion": 20}, memory,
               memory_calls={"replies": 1, "requests": 1, "prompt": 50, "completion": 5})])
    unpriced = write(tmp_path / "unpriced.jsonl", [record("t0", "openai:nobody", {"prompt": 1, "completion": 1})])
    assert main(["score", run, unpriced, "--json", str(tmp_path / "s.json")]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = lines[0].split()
    assert header[-5:] == ["memory_tokens", "user_tokens", "writer_tokens", "total_tokens", "usd"]
    assert lines[2].split()[-5:] == ["55", "0", "1000000", "1000475", str(round(price_table()[MINI].input, 4))]
    assert lines[3].split()[-1] == "—" and "unpriced.jsonl: cost: agent: no price for openai:nobody" in lines[4]
    rows = json.loads((tmp_path / "s.json").read_text())
    assert rows[0]["usd"] == price_table()[MINI].input and rows[1]["usd"] is None
    assert [part["role"] for part in rows[0]["cost"]] == ["agent", "memory", "writer"]
