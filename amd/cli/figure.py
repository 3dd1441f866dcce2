"""`amd figure NAME --runs F... --out X.pdf`: one of the paper's figures from run files (amd.analysis.figures)."""

from amd.core.vocabulary import output_names


def register(subparsers) -> None:
    figure = subparsers.add_parser("figure", help="make one of the paper's figures from run files")
    figure.add_argument("name", choices=output_names("figure"))
    figure.add_argument("--runs", nargs="+", required=True, help="trajectory files (JSONL) of the runs to plot")
    figure.add_argument("--out", required=True, help="PDF path")
    figure.add_argument("--note", default="", help="printed under the figure")
    figure.set_defaults(handler=make_figure)


def make_figure(args) -> int:
    from amd.analysis.figures import write_figure
    from amd.analysis.runs import load_runs

    write_figure(args.name, load_runs(args.runs), args.out, note=args.note)
    return 0
