"""`amd memory build|pool|show|query`: distill trajectories into a bank, pool several teachers' banks, inspect a
bank, try retrieval."""

import json
import textwrap
from collections import Counter
from typing import Any, NoReturn

from amd.cli.arguments import key_values, numbers
from amd.core.errors import AmdError
from amd.core.registry import EMBEDDERS, MEMORY_METHODS
from amd.core.text import printable
from amd.core.vocabulary import memory_types
from amd.memory.bank import check_bank_out, load_bank
from amd.memory.build import build_bank, reuse_bank
from amd.memory.embed import get_embedder
from amd.memory.pool import pool_banks
from amd.memory.writing import RULES

WRITER_DEFAULTS = {"max_tokens": 2048}  # a segmentation of a long trajectory needs more than the 512 of a step


def say(text: str) -> None:
    """A line of bank text on stdout, its control characters shown, not sent."""
    print(printable(text))


def register(subparsers) -> None:
    memory = subparsers.add_parser("memory", help="build, show and query memory banks")
    commands = memory.add_subparsers(dest="memory_command", required=True)

    build = commands.add_parser("build", help="distill trajectories into a memory bank")
    build.add_argument("--trajectories", nargs="+", required=True, help="trajectory JSONL files")
    build.add_argument("--method", default="amd", choices=MEMORY_METHODS.names(),
                       help="memory method (default amd, the paper's)")
    build.add_argument("--writer", default=RULES,
                       help="'rules' (deterministic, model-free) or a model spec such as openai:gpt-5-mini")
    build.add_argument("--writer-params", default="{}",
                       help=f"JSON params for the writer model (amd.llm.client: sampling and transport), over "
                            f"{json.dumps(WRITER_DEFAULTS)}; e.g. '{{\"temperature\": null}}' for models that refuse one")
    build.add_argument("--writer-concurrency", type=int, default=4, help="trajectories written at once")
    build.add_argument("--embedder", required=True,
                       help=", ".join(entry.meta["example"] for entry in EMBEDDERS.entries()))
    build.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                       help="a build option of the method, e.g. representation=wf=prose,st=code,fn=code for amd "
                            "(its default rendering, the paper's best when not given; both forms are stored)")
    build.add_argument("--benchmark-option", action="append", default=[], metavar="KEY=VALUE",
                       help="an option of the trajectories' benchmark, as given to `amd run` (e.g. where its data is)")
    build.add_argument("--delta", metavar="TYPE=VALUE,...",
                       help="the embedder's calibrated minimum similarity per memory type, e.g. wf=0.32,st=0.33, "
                            "over the one amd knows for it; recorded in the bank, and `amd run` uses it unless given "
                            "--delta")
    build.add_argument("--out", required=True, help="bank directory (replaced atomically)")
    build.add_argument("--reuse", metavar="DIR",
                       help="a copy of this build (a release's bank): put in place of the bank just built when it is "
                            "the same build (same manifest but for the vectors' checksums, vectors equal to float "
                            "rounding), so runs over it keep its manifest sha256; a missing DIR is not used")
    build.set_defaults(handler=run_build, check_output=check_bank_out)

    pool = commands.add_parser("pool", help="pool the banks of several teachers into one (provenance per entry)")
    pool.add_argument("--banks", nargs="+", required=True,
                      help="banks built by `amd memory build` from each teacher's trajectories (one method, embedder)")
    pool.add_argument("--teachers", nargs="+", required=True,
                      help="the teachers' names, one per bank in the same order; the order is the priority of "
                           "the dedup across teachers (a run's --memory-option prefer_teacher=NAME goes first)")
    pool.add_argument("--out", required=True, help="pooled bank directory (replaced atomically)")
    pool.set_defaults(handler=run_pool, check_output=check_bank_out)

    show = commands.add_parser("show", help="counts and a few entries of each type")
    show.add_argument("bank")
    show.add_argument("--n", type=int, default=2, help="entries shown per type")
    show.set_defaults(handler=run_show)

    query = commands.add_parser("query", help="what a query would retrieve, with similarities")
    query.add_argument("bank")
    query.add_argument("text")
    query.add_argument("--type", default=None, help="one memory type of the bank (default: all)")
    query.add_argument("--k", type=int, default=3)
    query.set_defaults(handler=run_query)


def run_build(args) -> int:
    try:
        writer_params = json.loads(args.writer_params, parse_constant=_no_constant)
    except json.JSONDecodeError as error:
        raise AmdError(f"--writer-params is not JSON ({error.msg}): {args.writer_params!r}") from None
    if not isinstance(writer_params, dict):
        raise AmdError(f"--writer-params must be a JSON object, got {args.writer_params!r}")
    writer_params = {**WRITER_DEFAULTS, **writer_params}
    manifest = build_bank(args.trajectories, args.method, args.writer, args.embedder, args.out, writer_params,
                          key_values(args.option), args.writer_concurrency,
                          key_values(args.benchmark_option, "--benchmark-option"), numbers(args.delta, "--delta"))
    audit = f"; audit {json.dumps(manifest['audit'])}" if "audit" in manifest else ""
    flagged = manifest["instruction_like"]["count"]
    screened = f"; {flagged} entries read as instructions to the agent" if flagged else ""
    reused = " (the released copy of this build)" if args.reuse and reuse_bank(args.out, args.reuse) else ""
    say(f"bank {args.out} ({args.method}): {json.dumps(manifest['counts'])}{audit}{screened}{reused}")
    return 0


def _no_constant(name: str) -> NoReturn:
    """Python's JSON reads NaN and Infinity; strict JSON, and a sampling parameter, has neither."""
    raise AmdError(f"--writer-params: {name} is not a number a writer can use (strict JSON has no NaN or Infinity)")


def run_pool(args) -> int:
    manifest = pool_banks(args.banks, args.teachers, args.out)
    say(f"bank {args.out} ({manifest['method']['name']}, pooled from {', '.join(args.teachers)}): "
          f"{json.dumps(manifest['counts'])} stored, {json.dumps(manifest['pool']['default_counts'])} seen by default")
    return 0


def run_show(args) -> int:
    bank = load_bank(args.bank)
    manifest: dict[str, Any] = dict(bank.manifest)  # the method's own fields too
    say(f"bank {args.bank} (manifest sha256 {bank.manifest_sha256[:12]})")
    say(f"method {manifest['method']['name']} {manifest['method']['version']}, writer {manifest['writer']['spec']}, "
          f"embedder {manifest['embedder']} ({manifest['dim']}-dim), "
          f"agents {', '.join(a['spec'] for a in manifest['agents']) or '-'}")
    say(f"counts {json.dumps(manifest['counts'])}" + (f"; audit {json.dumps(manifest['audit'])}"
                                                        if "audit" in manifest else ""))
    if manifest.get("instruction_like", {}).get("count"):
        screened = manifest["instruction_like"]
        say(f"{screened['count']} of {screened['of']} entries read as instructions to the agent "
            f"({json.dumps(screened['by_mark'])}): {', '.join(screened['entries'])}")
    if "build_settings" in manifest:
        say(f"build settings {manifest['build_settings']}")
    for line in _audited_lines(manifest.get("audited")):
        say(line)
    if "pool" in manifest:
        by_teacher = Counter(manifest["pool"]["default_teacher"].values())
        say(f"pooled from {', '.join(manifest['pool']['teachers'])}; tasks seen by default from "
              + ", ".join(f"{name} {by_teacher[name]}" for name in manifest["pool"]["teachers"]))
    for type_name in manifest["types"]:
        for entry in bank.entries[type_name][: args.n]:
            say(f"\n[{entry['id']}]")
            say(textwrap.indent(_summary(entry, manifest["types"][type_name]["embedded"]), "  "))
    return 0


def _audited_lines(audited: dict | None) -> list[str]:
    """What the insight audit dropped and edited (a bank built before this was recorded says nothing)."""
    if audited is None:
        return []
    dropped, edited = audited["dropped"], audited["edited"]
    lines = [f"insight audit: {len(dropped)} insights dropped, {len(edited)} edited"]
    lines += [f"  dropped {item['source_task_id']}: {item['reason']}" for item in dropped]
    return lines + [f"  edited {item['id']}: {item['edit']}" for item in edited]


def run_query(args) -> int:
    bank = load_bank(args.bank)
    if args.type is not None and args.type not in bank.manifest["types"]:
        raise AmdError(f"--type {args.type!r}: the bank's types are {', '.join(bank.manifest['types'])}")
    vector = get_embedder(bank.manifest["embedder"]).embed_one(args.text)
    thresholds = {t.name: t.default_delta for t in memory_types().values()}
    for type_name in [args.type] if args.type else bank.manifest["types"]:
        say(f"== {type_name}")
        for entry, score in bank.search(type_name, vector, args.k, delta=None):
            delta = thresholds.get(type_name)
            mark = "  (below default delta)" if delta is not None and score < delta else ""
            say(f"{score:+.3f}  {entry['id']}{mark}")
            say(textwrap.indent(_summary(entry, bank.manifest["types"][type_name]["embedded"]), "        "))
    return 0


def _summary(entry: dict, embedded: str) -> str:
    """The embedded text and the entry's other short text fields, one line each."""
    lines = [f"{embedded}: {str(entry[embedded])[:160]}"]
    for key, value in entry.items():
        if key not in (embedded, "id", "type", "source_task_id", "source_group") and isinstance(value, str):
            lines.append(f"{key}: {' '.join(value.split())[:160]}")
    return "\n".join(lines[:5])
