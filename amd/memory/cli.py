"""`amd memory build|show|query`: distill trajectories into a bank, inspect it, try retrieval."""

import json
import textwrap

from amd.errors import AmdError
from amd.memory.bank import RULES_WRITER, TYPES, build_bank, load_bank
from amd.memory.embed import get_embedder
from amd.memory.hooks import DEFAULT_DELTA
from amd.memory.render import parse_representation

WRITER_DEFAULTS = {"max_tokens": 2048}  # a segmentation of a long trajectory needs more than the 512 of a step


def register(subparsers) -> None:
    memory = subparsers.add_parser("memory", help="build, show and query memory banks")
    commands = memory.add_subparsers(dest="memory_command", required=True)

    build = commands.add_parser("build", help="distill successful trajectories into a memory bank")
    build.add_argument("--trajectories", nargs="+", required=True, help="trajectory JSONL files")
    build.add_argument("--writer", default=RULES_WRITER,
                       help="'rules' (deterministic, model-free) or a model spec such as openai:gpt-5-mini")
    build.add_argument("--writer-params", default="{}",
                       help=f"JSON params for the writer model (amd.llm.client: sampling and transport), over "
                            f"{json.dumps(WRITER_DEFAULTS)}; e.g. '{{\"temperature\": null}}' for models that refuse one")
    build.add_argument("--writer-concurrency", type=int, default=4, help="trajectories written at once")
    build.add_argument("--embedder", required=True,
                       help="local:all-minilm-l6-v2, openai:text-embedding-3-small, or hash:DIM (tests only)")
    build.add_argument("--representation", default="",
                       help="the bank's default rendering, e.g. wf=prose,st=code,fn=code (the paper's best, used "
                            "when not given); both forms are stored")
    build.add_argument("--out", required=True, help="bank directory (replaced atomically)")
    build.set_defaults(handler=run_build)

    show = commands.add_parser("show", help="counts and a few entries of each type")
    show.add_argument("bank")
    show.add_argument("--n", type=int, default=2, help="entries shown per type")
    show.set_defaults(handler=run_show)

    query = commands.add_parser("query", help="what a query would retrieve, with similarities")
    query.add_argument("bank")
    query.add_argument("text")
    query.add_argument("--type", choices=TYPES, default=None, help="one memory type (default: all)")
    query.add_argument("--k", type=int, default=3)
    query.set_defaults(handler=run_query)


def run_build(args) -> int:
    try:
        writer_params = json.loads(args.writer_params)
    except json.JSONDecodeError as error:
        raise AmdError(f"--writer-params is not JSON ({error.msg}): {args.writer_params!r}") from None
    if not isinstance(writer_params, dict):
        raise AmdError(f"--writer-params must be a JSON object, got {args.writer_params!r}")
    writer_params = {**WRITER_DEFAULTS, **writer_params}
    manifest = build_bank(args.trajectories, args.writer, args.embedder, args.out, writer_params,
                          parse_representation(args.representation), args.writer_concurrency)
    print(f"bank {args.out}: {json.dumps(manifest['counts'])}; audit {json.dumps(manifest['audit'])}")
    return 0


def run_show(args) -> int:
    bank = load_bank(args.bank)
    manifest = bank.manifest
    print(f"bank {args.bank} (manifest sha256 {bank.manifest_sha256[:12]})")
    print(f"writer {manifest['writer']['spec']}, embedder {manifest['embedder']} ({manifest['dim']}-dim), "
          f"agents {', '.join(a['spec'] for a in manifest['agents']) or '-'}")
    print(f"counts {json.dumps(manifest['counts'])}; audit {json.dumps(manifest['audit'])}")
    for memory_type in TYPES:
        for entry in bank.entries[memory_type][: args.n]:
            print(f"\n[{entry['id']}]")
            print(textwrap.indent(_summary(entry), "  "))
    return 0


def run_query(args) -> int:
    bank = load_bank(args.bank)
    vector = get_embedder(bank.manifest["embedder"]).embed_one(args.text)
    for memory_type in [args.type] if args.type else TYPES:
        print(f"== {memory_type}")
        if memory_type == "function":
            hits = _function_hits(bank, vector, args.text, args.k)
        else:
            hits = bank.search(memory_type, vector, args.k, delta=-1.0)
        for entry, score in hits:
            mark = "" if score >= DEFAULT_DELTA.get(memory_type, -1.0) else "  (below default delta)"
            print(f"{score:+.3f}  {entry['id']}{mark}")
            print(textwrap.indent(_summary(entry), "        "))
    return 0


def _function_hits(bank, vector, text, k):
    """Function memory is looked up by name: records of a function named `text`, else rank all by reasoning."""
    rows = bank.by_name.get(text) or range(len(bank.entries["function"]))
    scored = sorted(((bank.entries["function"][r], float(bank.reasoning[r] @ vector)) for r in rows),
                    key=lambda pair: -pair[1])
    return scored[:k]


def _summary(entry: dict) -> str:
    if entry["type"] == "workflow":
        return f"query: {entry['query'][:160]}\ninsight: {entry['insight']}"
    if entry["type"] == "subtask":
        return f"{entry['label']} (steps {entry['start_step']}-{entry['end_step']}): {entry['description']}"
    return f"{entry['call'][:160]}\n-> {entry['observation'][:160]}"
