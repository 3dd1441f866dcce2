"""`amd score FILE.jsonl [...] [--json OUT] [--recheck]`: success rate, mean steps and tokens of run files
(amd.analysis.score)."""


def register(subparsers) -> None:
    score = subparsers.add_parser("score", help="success rate, mean steps and tokens of run files")
    score.add_argument("files", nargs="+")
    score.add_argument("--json", help="also write the table as JSON here")
    score.add_argument("--recheck", action="store_true",
                       help="re-score every stored trajectory with the benchmark's own checker")
    score.set_defaults(handler=score_command)


def score_command(args) -> int:
    from amd.analysis.score import score_from_args

    return score_from_args(args)
