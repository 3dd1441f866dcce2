"""`amd groups BENCHMARK [--audit RUN...] [--json OUT]`: a benchmark's exclusion groups and the self-exclusion audit
of memory runs (amd.analysis.groups)."""

import contextlib

from amd.cli.arguments import key_values


def register(subparsers) -> None:
    groups = subparsers.add_parser("groups", help="the exclusion groups that join duplicate tasks of a benchmark, and "
                                                  "the self-exclusion audit of memory runs")
    groups.add_argument("benchmark")
    groups.add_argument("--benchmark-option", action="append", default=[], metavar="KEY=VALUE",
                        help="the benchmark's own options, as for amd run")
    groups.add_argument("--audit", nargs="+", default=[], metavar="RUN",
                        help="memory runs: count injections from the task itself, its task group, a duplicate")
    groups.add_argument("--json", help="also write the groups as JSON here")
    groups.set_defaults(handler=show_groups)


def show_groups(args) -> int:
    from amd.analysis.groups import audit, audit_line, summary, summary_lines, write_json
    from amd.benchmarks.base import create_benchmark
    from amd.benchmarks.duplicates import exclusion_groups
    from amd.core.schema import read_run

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
