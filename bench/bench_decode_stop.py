"""How much decoding an early stop could save, read from finished student runs: for every step's reply, the share
of its completion tokens written after (a) the end of the reply's first complete JSON value, the last point where
stopping leaves the executed calls unchanged, and (b) the end of its first complete call, where stopping would drop
the calls the model wrote after it. Token counts per part are estimated from the reply's characters.

    .venv/bin/python bench/bench_decode_stop.py results/agentdojo/student-*/**/trajectories.jsonl
"""

import argparse
import json
import re
from pathlib import Path

from amd.benchmarks.parsing import parse_reply

JSON_START = re.compile(r"[\[{]")


def first_value_end(text: str) -> int | None:
    """Where the reply's first JSON value (object or list) ends, or None when it never closes."""
    match = JSON_START.search(text)
    if match is None:
        return None
    try:
        return json.JSONDecoder().raw_decode(text, match.start())[1]
    except ValueError:
        return None


def first_call_end(text: str) -> int | None:
    """Where the first complete {"name": ...} object ends, inside a list or not."""
    decoder, start = json.JSONDecoder(), 0
    while (match := JSON_START.search(text, start)) is not None:
        try:
            value, end = decoder.raw_decode(text, match.start())
        except ValueError:
            start = match.start() + 1
            continue
        if isinstance(value, dict) and "name" in value:
            return end
        start = match.start() + 1
    return None


def tokens_after(text: str, end: int | None, tokens: int) -> float:
    return 0.0 if end is None or len(text) - end <= 8 else tokens * (len(text) - end) / len(text)  # 8: a fence


def calls(text: str) -> list[str]:
    return [proposal.source for proposal in parse_reply(text, [])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+")
    parser.add_argument("--max-tokens", type=int, default=192, help="the runs' reply cap")
    args = parser.parse_args()
    steps = [step for path in args.files for line in Path(path).read_text().splitlines()
             for turn in json.loads(line)["turns"] for step in turn["steps"]]
    total = sum(step["tokens"]["completion"] for step in steps)
    capped = sum(step["tokens"]["completion"] >= args.max_tokens for step in steps)
    after_value = after_call = changed = 0.0
    for step in steps:
        text, tokens = step["model_text"], step["tokens"]["completion"]
        end = first_value_end(text)
        after_value += tokens_after(text, end, tokens)
        changed += end is not None and calls(text[:end]) != calls(text)
        after_call += tokens_after(text, first_call_end(text), tokens)
    print(f"{len(steps)} steps, {capped} at the {args.max_tokens}-token cap, {total} completion tokens")
    if not total:
        print("no completion tokens in these runs (a model run's files are what this reads): nothing to estimate")
        return
    print(f"(a) after the first complete JSON value: ~{after_value:.0f} tokens ({100 * after_value / total:.1f} %); "
          f"stopping there changes the calls of {changed:.0f} replies")
    print(f"(b) after the first complete call: ~{after_call:.0f} tokens ({100 * after_call / total:.1f} %); "
          "stopping there drops the calls written after it")


if __name__ == "__main__":
    main()
