"""`amd view RUN.jsonl [--against OTHER.jsonl] [--bank BANK] --out RUN.html`: a run's page (amd.analysis.viewer)."""

from amd.core.errors import AmdError


def register(subparsers) -> None:
    view = subparsers.add_parser("view", help="one self-contained HTML page of a run's tasks: steps, calls, "
                                              "observations, injected memory, verdicts")
    view.add_argument("run", help="trajectory file (JSONL)")
    view.add_argument("--against", help="another run over the same tasks, shown beside it (e.g. its zero-shot run)")
    view.add_argument("--bank", help="the memory bank the run read: each injected entry's text is shown too")
    view.add_argument("--out", required=True, help="HTML path")
    view.set_defaults(handler=make_view)


def make_view(args) -> int:
    from amd.analysis.viewer import write_view

    if not args.out.endswith(".html"):
        raise AmdError(f"--out wants an .html path, got {args.out}")
    page = write_view(args.run, args.out, against_path=args.against, bank_dir=args.bank)
    print(f"amd view: {len(page['tasks'])} tasks -> {args.out}")
    return 0
