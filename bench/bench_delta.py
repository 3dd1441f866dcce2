"""The similarity distribution a per-embedder δ is chosen from: workflow and subtask retrieval on BFCL, and subtask
retrieval by AppWorld-style labels on a generated bank.

    .venv/bin/python bench/bench_delta.py [--embedder local:all-minilm-l6-v2] [--bank DIR] [--part bfcl|appworld]
                                          [--limit N]

BFCL: builds (or reuses) the bank of the oracle teacher's 200 BFCL trajectories with the `rules` writer and the
given embedder, then, as a student run under `self_excluded` would, compares every task's instruction with the
workflow entries and each of its own rule-segment labels (stand-ins for the student's decomposition labels) with
the subtask entries, over every entry of another group. A pair is related when both tasks call a common
function, unrelated when they share no app (BFCL class). Prints the quantiles of the similarity of related and
unrelated pairs and the threshold that best separates them (Youden's J = share of related pairs kept − share of
unrelated pairs kept), and the lowest threshold that lets at most 1 % of unrelated pairs through: the value written
into the config for that embedder. δ 0.30 / 0.45 are the AMD authors' values for text-embedding-3-small.

AppWorld (no AppWorld data needed): on AppWorld a subtask query is a label of at most five words from the student's
decomposition ("log in to venmo") and an entry is embedded by its one-sentence description ("Reads the Venmo
password from the supervisor app and logs in to get an access token."), as the paper and the release do. The bank
is generated from templates written here in the style of prompts/memory_segment_appworld.md and
prompts/decompose_appworld.md (GENERATED_APPS, SEGMENTS): 9 apps x 6 tasks, each segmented as a teacher would
(log in, collect a paged list, filter or count it, act on it, complete the task), and student labels for 3 new
tasks per app. A pair is related when the label names the entry's subtask in the same app (a password or login
label and the app's login segment; "complete the task" and any completion), unrelated when subtask and app both
differ. Besides the pair quantiles it prints, per δ, the share of label queries that find no entry at all at or
above it (what `amd score` reports as "found no entry") and the share whose best entry is a related one. The
templates are ours, so the figures say how a label-to-description similarity sits on an embedder's scale next to an
instruction-to-instruction one, not what a real teacher's bank gives.
"""

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
# δ keeps unrelated memory out of a small student's prompt, so it is chosen for precision: at most this share of
# unrelated pairs passes it. (Youden's J, the balanced choice, is printed beside it.)
MAX_UNRELATED_KEPT = 0.01


def build(bank: Path, embedder: str, limit: int | None = None) -> None:
    teacher = bank.parent / "oracle.jsonl"
    amd = [sys.executable, "-m", "amd.cli"]
    subprocess.run([*amd, "run", "bfcl", "--agent", "oracle", "--concurrency", "4", "--no-progress",
                    *(["--limit", str(limit)] if limit else []), "--out", str(teacher)], check=True)
    subprocess.run([*amd, "memory", "build", "--trajectories", str(teacher), "--embedder", embedder,
                    "--out", str(bank)], check=True)


def pair_similarities(bank, embedder, type_name, queries, functions):
    """Similarities of every query to every entry of another group, split into related pairs (the query's task
    and the entry's task call a common function) and unrelated ones (no common app); pairs that share an app but
    no function are left out as ambiguous."""
    entries, vectors = bank.entries[type_name], bank.vectors(type_name)
    related, unrelated = [], []
    for task_id, texts in queries.items():
        scores = embedder.embed(texts) @ vectors.T
        group = bank.manifest["task_groups"][task_id]
        for column, entry in enumerate(entries):
            source = entry["source_task_id"]
            if entry["source_group"] == group:
                continue
            if functions[task_id] & functions[source]:
                related += scores[:, column].tolist()
            elif not apps_of(functions[task_id]) & apps_of(functions[source]):
                unrelated += scores[:, column].tolist()
    return np.array(related), np.array(unrelated)


def apps_of(functions: set) -> set:
    return {name.partition(".")[0] for name in functions}


def report(name: str, related: np.ndarray, unrelated: np.ndarray,
           meaning: tuple[str, str] = ("a common function", "no common app")) -> None:
    quantiles = (0.1, 0.25, 0.5, 0.75, 0.9)
    print(f"\n{name}: {len(related)} related pairs ({meaning[0]}), {len(unrelated)} unrelated ({meaning[1]})")
    if not len(related) or not len(unrelated):
        print("  too few tasks for both kinds of pair (--limit): nothing to compare")
        return
    for label, values in (("related", related), ("unrelated", unrelated)):
        shown = "  ".join(f"q{int(q * 100)} {np.quantile(values, q):.3f}" for q in quantiles)
        print(f"  {label:10s} {shown}")
    grid = np.round(np.arange(0.0, 1.0, 0.01), 2)
    j = [(related >= t).mean() - (unrelated >= t).mean() for t in grid]
    best = grid[int(np.argmax(j))]
    print(f"  best separating threshold {best:.2f} (Youden's J {max(j):.3f}: keeps {(related >= best).mean():.0%} "
          f"of related pairs, {(unrelated >= best).mean():.1%} of unrelated ones)")
    strict = next(t for t in grid if (unrelated >= t).mean() <= MAX_UNRELATED_KEPT)
    print(f"  chosen: lowest threshold keeping at most {MAX_UNRELATED_KEPT:.0%} of unrelated pairs: {strict:.2f} "
          f"(keeps {(related >= strict).mean():.0%} of related)")
    for delta in (0.30, 0.45):
        print(f"  at δ {delta:.2f}: keeps {(related >= delta).mean():.0%} of related, "
              f"{(unrelated >= delta).mean():.1%} of unrelated")


def bfcl_part(bank_dir: Path, embedder_spec: str, limit: int | None = None) -> None:
    from amd.benchmarks.base import create_benchmark
    from amd.memory.bank import load_bank
    from amd.memory.embed import get_embedder

    if not bank_dir.exists():
        bank_dir.parent.mkdir(parents=True, exist_ok=True)
        build(bank_dir, embedder_spec, limit)
    bank = load_bank(bank_dir)
    embedder = get_embedder(bank.manifest["embedder"])
    benchmark = create_benchmark("bfcl")
    functions = {task: set() for task in bank.manifest["task_ids"]}
    for entry in bank.entries["function"]:
        functions[entry["source_task_id"]].add(f"{benchmark.function_info(entry['name']).app}.{entry['name']}")
    instructions = {e["source_task_id"]: [e["query"]] for e in bank.entries["workflow"]}
    labels = {}
    for entry in bank.entries["subtask"]:
        labels.setdefault(entry["source_task_id"], []).append(entry["label"])
    print(f"BFCL: embedder {embedder.spec}; bank of {len(instructions)} tasks")
    report("workflow (query: the task instruction)",
           *pair_similarities(bank, embedder, "workflow", instructions, functions))
    report("subtask (queries: the task's segment labels)",
           *pair_similarities(bank, embedder, "subtask", labels, functions))


# ---- AppWorld-style labels against a generated bank ----------------------------------------------------------------

# app -> (its name in prose, the paged list a task collects, filters/counts of it (student label, what the teacher's
# description says it keeps), actions on it (student label, the teacher's description of the action))
GENERATED_APPS = {
    "venmo": ("Venmo", "transactions", [("sum amounts sent to maria", "were sent to the named friend last month"),
                                         ("find pending payment requests", "are payment requests still pending"),
                                         ("count transactions this year", "were made in the current year")],
              [("send payment to friend", "Sends the payment to the friend"),
               ("approve pending requests", "Approves each pending payment request")]),
    "spotify": ("Spotify", "playlists", [("find road trip playlist", "are named like the requested playlist"),
                                         ("find most played song", "hold the song with the most plays"),
                                         ("count songs by artist", "contain songs by the requested artist")],
                [("add playlist songs to queue", "Adds every song of the playlist to the queue"),
                 ("like the found songs", "Likes each of the selected songs")]),
    "gmail": ("Gmail", "emails", [("find emails from manager", "were sent by the user's manager"),
                                  ("find unread invoice emails", "are unread and mention an invoice"),
                                  ("count emails from last week", "arrived during the previous week")],
              [("reply to the email", "Sends a reply to the selected email thread"),
               ("forward attachments to wife", "Forwards the attachments of each selected email")]),
    "phone": ("Phone", "text messages", [("find messages from mom", "were sent by the contact named mom"),
                                         ("find alarm for tomorrow", "set an alarm for the next morning"),
                                         ("count missed calls", "are missed calls from the past day")],
              [("text the address to bob", "Sends a text message with the address to the contact"),
               ("delete old messages", "Deletes each of the selected messages")]),
    "simple_note": ("SimpleNote", "notes", [("find grocery list note", "have a title like the grocery list"),
                                            ("find notes tagged work", "carry the work tag"),
                                            ("count notes edited today", "were edited today")],
                    [("append items to note", "Appends the new items to the content of the note"),
                     ("delete duplicate notes", "Deletes the notes that duplicate another")]),
    "todoist": ("Todoist", "tasks", [("find overdue tasks", "are past their due date"),
                                     ("find tasks in project", "belong to the requested project"),
                                     ("count completed tasks", "were completed this week")],
                [("mark tasks as done", "Marks each selected task as completed"),
                 ("reschedule tasks to friday", "Moves the due date of each selected task")]),
    "splitwise": ("Splitwise", "expenses", [("find dinner expenses", "are labelled as dinner"),
                                            ("sum what roommate owes", "are shared with the roommate"),
                                            ("count unsettled expenses", "are not settled yet")],
                  [("settle up with roommate", "Records a settlement of the balance with the roommate"),
                   ("add expense to group", "Adds the new expense to the group with an equal split")]),
    "amazon": ("Amazon", "orders", [("find last month orders", "were placed during the previous month"),
                                    ("find undelivered orders", "have not been delivered yet"),
                                    ("sum spending on books", "contain books")],
               [("return the damaged item", "Starts a return for the selected order item"),
                ("reorder the coffee beans", "Places a new order with the same product")]),
    "file_system": ("file system", "files", [("find photos from vacation", "are photos taken during the vacation"),
                                             ("find largest file", "is the largest in the folder"),
                                             ("count pdf files", "have the pdf extension")],
                    [("move photos to archive", "Moves each selected file into the archive folder"),
                     ("compress the old files", "Compresses the selected files into one archive")]),
}
# Each subtask kind: the teacher's description templates (one is picked per generated task) and the student label.
SEGMENTS = {
    "login": (["Reads the {app} password from the supervisor app and logs in to get an access token.",
               ("Looks up the {app} password among the supervisor's account passwords and logs in, keeping the "
                "access token."),
               "Obtains an {app} access token by logging in with the password stored in the supervisor app."],
              ["get {key} password", "log in to {key}"]),
    "collect": (["Pages through the user's {app} {items} until an empty page and keeps them all in one list.",
                 ("Collects every page of the user's {app} {items} by increasing page_index until nothing comes "
                  "back."),
                 "Fetches all of the user's {items} from {app}, page by page, into a single list."],
                ["collect {key} {items}"]),
    "filter": (["Keeps only the {items} that {criterion} and computes the requested value from them.",
                "Filters the collected {items} down to those that {criterion}.",
                "Selects the {items} that {criterion}, reading the fields of each API response."],
               ["{criterion_label}"]),
    "act": (["{action} with the {app} API and checks that each call succeeded.",
             "{action}, one {app} API call per item, and checks the responses.",
             "{action} through the {app} API, using the ids gathered before."],
            ["{action_label}"]),
    "complete": (["Marks the task complete with the supervisor app, passing the answer when one is asked.",
                  "Calls apis.supervisor.complete_task to finish the task, with the computed answer.",
                  "Finishes the task through the supervisor app's complete_task API."],
                 ["complete the task", "complete task with answer"]),
}
BANK_TASKS_PER_APP = 6
QUERY_TASKS_PER_APP = 3


def generated_task(key: str, n: int) -> list[dict]:
    """Task n of an app: its subtasks, each with the teacher's description and the student's labels."""
    app, items, filters, actions = GENERATED_APPS[key]
    criterion_label, criterion = filters[n % len(filters)]
    action_label, action = actions[n % len(actions)]
    values = {"app": app, "key": key.replace("_", " "), "items": items, "criterion": criterion,
              "criterion_label": criterion_label, "action": action, "action_label": action_label}
    kinds = ["login", "collect", "filter", *(["act"] if n % 2 == 0 else []), "complete"]  # half the tasks act
    return [{"kind": kind, "app": None if kind == "complete" else key,
             "description": SEGMENTS[kind][0][n % 3].format(**values),
             "labels": [label.format(**values) for label in SEGMENTS[kind][1]]} for kind in kinds]


def appworld_pairs(embedder) -> tuple[np.ndarray, np.ndarray, list[np.ndarray], int]:
    """Related and unrelated (label, description) similarities, each query's similarities to the whole bank, and
    the bank's size."""
    bank = [segment for key in GENERATED_APPS for n in range(BANK_TASKS_PER_APP) for segment in generated_task(key, n)]
    queries = [(label, segment) for key in GENERATED_APPS
               for n in range(BANK_TASKS_PER_APP, BANK_TASKS_PER_APP + QUERY_TASKS_PER_APP)
               for segment in generated_task(key, n) for label in segment["labels"]]
    vectors = embedder.embed([segment["description"] for segment in bank])
    scores = embedder.embed([label for label, _ in queries]) @ vectors.T
    related, unrelated = [], []
    for row, (_, asked) in enumerate(queries):
        for column, entry in enumerate(bank):
            if entry["kind"] == asked["kind"] and entry["app"] == asked["app"]:
                related.append(scores[row, column])
            elif entry["kind"] != asked["kind"] and entry["app"] != asked["app"]:
                unrelated.append(scores[row, column])
    rows = [(scores[row], [entry["kind"] == asked["kind"] and entry["app"] == asked["app"] for entry in bank])
            for row, (_, asked) in enumerate(queries)]
    return np.array(related), np.array(unrelated), rows, len(bank)


def appworld_part(embedder_spec: str, config_delta: float) -> None:
    from amd.memory.embed import get_embedder

    embedder = get_embedder(embedder_spec)
    related, unrelated, rows, size = appworld_pairs(embedder)
    print(f"\nAppWorld-style: embedder {embedder.spec}; generated bank of {size} subtask entries "
          f"({len(GENERATED_APPS)} apps x {BANK_TASKS_PER_APP} tasks), {len(rows)} label queries")
    report("subtask (queries: labels of at most 5 words; entries: one-sentence descriptions)", related, unrelated,
           ("the same subtask in the same app", "another subtask in another app"))
    print("  per δ: queries that find no entry at or above it (amd score's 'found no entry'), and whose best "
          "entry is a related one")
    for delta in sorted({config_delta, 0.30, 0.45, *np.round(np.arange(0.1, 0.6, 0.1), 2)}):
        none = np.mean([scores.max() < delta for scores, _ in rows])
        right = np.mean([scores.max() >= delta and related_to[int(scores.argmax())] for scores, related_to in rows])
        print(f"    δ {delta:.2f}: {none:.0%} find none, {right:.0%} find a related one first")


def default_subtask_delta(embedder: str) -> float:
    """The subtask δ the default config (config/base.yaml under config/config.yaml) gives `embedder`; else the
    authors' 0.45."""
    from amd.workflow.config import active_config

    embedders = active_config({}).get("embedders", {}).values()
    return next((entry.get("delta", {}).get("st") for entry in embedders if entry["spec"] == embedder), None) or 0.45


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", default="local:all-minilm-l6-v2")
    parser.add_argument("--bank", help="where the bank of the oracle's BFCL trajectories is (built there if absent)")
    parser.add_argument("--part", choices=("bfcl", "appworld"), help="one part only (default: both)")
    parser.add_argument("--limit", type=int, help="the oracle's first N BFCL tasks only (default: all 200)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("AMD_CACHE_DIR", str(Path(tmp) / "cache"))
        config_delta = default_subtask_delta(args.embedder)
        if args.part != "appworld":
            bfcl_part(Path(args.bank or Path(tmp) / "bank"), args.embedder, args.limit)
        if args.part != "bfcl":
            appworld_part(args.embedder, config_delta)


if __name__ == "__main__":
    main()
