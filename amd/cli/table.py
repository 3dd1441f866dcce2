"""`amd table NAME --runs F... --out X.csv X.md`: one of the paper's tables from run files (amd.analysis.tables)."""

from amd.core.errors import AmdError
from amd.core.vocabulary import output_names


def register(subparsers) -> None:
    table = subparsers.add_parser("table", help="make one of the paper's tables from run files")
    table.add_argument("name", choices=output_names("table"))
    table.add_argument("--runs", nargs="+", required=True, help="trajectory files (JSONL) of the runs to tabulate")
    table.add_argument("--out", nargs=2, required=True, metavar=("CSV", "MD"))
    table.add_argument("--note", default="", help="printed under the table (e.g. what the setting can show)")
    table.set_defaults(handler=make_table)


def make_table(args) -> int:
    from amd.analysis.runs import load_runs
    from amd.analysis.tables import build_table, write_table

    csv_path, md_path = args.out
    if not csv_path.endswith(".csv") or not md_path.endswith(".md"):
        raise AmdError(f"--out wants a .csv then a .md path, got {csv_path} {md_path}")
    table = build_table(args.name, load_runs(args.runs))
    write_table(args.name, table, csv_path, md_path, note=args.note)
    return 0
