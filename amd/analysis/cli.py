"""`amd table NAME --runs F... --out X.csv X.md`, `amd figure NAME --runs F... --out X.pdf`,
`amd view RUN.jsonl [--against OTHER.jsonl] [--bank BANK] --out RUN.html` (amd.analysis.viewer) and
`amd groups BENCHMARK [--audit RUN...] [--json OUT]` (amd.analysis.groups)."""

from amd.core.errors import AmdError
from amd.core.vocabulary import output_names


def register(subparsers) -> None:
    table = subparsers.add_parser("table", help="make one of the paper's tables from run files")
    table.add_argument("name", choices=output_names("table"))
    table.add_argument("--runs", nargs="+", required=True, help="trajectory files (JSONL) of the runs to tabulate")
    table.add_argument("--out", nargs=2, required=True, metavar=("CSV", "MD"))
    table.add_argument("--note", default="", help="printed under the table (e.g. what the setting can show)")
    table.set_defaults(handler=make_table)

    figure = subparsers.add_parser("figure", help="make one of the paper's figures from run files")
    figure.add_argument("name", choices=output_names("figure"))
    figure.add_argument("--runs", nargs="+", required=True, help="trajectory files (JSONL) of the runs to plot")
    figure.add_argument("--out", required=True, help="PDF path")
    figure.add_argument("--note", default="", help="printed under the figure")
    figure.set_defaults(handler=make_figure)

    view = subparsers.add_parser("view", help="one self-contained HTML page of a run's tasks: steps, calls, "
                                              "observations, injected memory, verdicts")
    view.add_argument("run", help="trajectory file (JSONL)")
    view.add_argument("--against", help="another run over the same tasks, shown beside it (e.g. its zero-shot run)")
    view.add_argument("--bank", help="the memory bank the run read: each injected entry's text is shown too")
    view.add_argument("--out", required=True, help="HTML path")
    view.set_defaults(handler=make_view)

    groups = subparsers.add_parser("groups", help="the exclusion groups that join duplicate tasks of a benchmark, and "
                                                  "the self-exclusion audit of memory runs")
    groups.add_argument("benchmark")
    groups.add_argument("--benchmark-option", action="append", default=[], metavar="KEY=VALUE",
                        help="the benchmark's own options, as for amd run")
    groups.add_argument("--audit", nargs="+", default=[], metavar="RUN",
                        help="memory runs: count injections from the task itself, its task group, a duplicate")
    groups.add_argument("--json", help="also write the groups as JSON here")
    groups.set_defaults(handler=show_groups)


def make_table(args) -> int:
    from amd.analysis.runs import load_runs
    from amd.analysis.tables import build_table, write_table

    csv_path, md_path = args.out
    if not csv_path.endswith(".csv") or not md_path.endswith(".md"):
        raise AmdError(f"--out wants a .csv then a .md path, got {csv_path} {md_path}")
    table = build_table(args.name, load_runs(args.runs))
    write_table(args.name, table, csv_path, md_path, note=args.note)
    return 0


def make_figure(args) -> int:
    from amd.analysis.figures import write_figure
    from amd.analysis.runs import load_runs

    write_figure(args.name, load_runs(args.runs), args.out, note=args.note)
    return 0


def make_view(args) -> int:
    from amd.analysis.viewer import write_view

    if not args.out.endswith(".html"):
        raise AmdError(f"--out wants an .html path, got {args.out}")
    page = write_view(args.run, args.out, against_path=args.against, bank_dir=args.bank)
    print(f"amd view: {len(page['tasks'])} tasks -> {args.out}")
    return 0


def show_groups(args) -> int:
    import contextlib

    from amd.analysis.groups import audit, audit_line, summary, summary_lines, write_json
    from amd.benchmarks.base import create_benchmark
    from amd.benchmarks.duplicates import exclusion_groups
    from amd.core.schema import read_run
    from amd.memory.cli import key_values

    options = key_values(args.benchmark_option, "--benchmark-option")
    with contextlib.closing(create_benchmark(args.benchmark, **options)) as benchmark:
        found = exclusion_groups(benchmark)
    described = summary(args.benchmark, found)
    print("\n".join(summary_lines(described)))
    for path in args.audit:
        records = read_run(path)
        print(audit_line(path, records, audit(records, found)))
    if args.json:
        write_json(args.json, described)
    return 0
