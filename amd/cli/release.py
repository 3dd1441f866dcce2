"""`amd release sync --configfile F... | check DIR [--recheck]`: a config's outputs as a checksummed release folder
(amd.workflow.release)."""

import sys
from pathlib import Path

from amd.core.errors import AmdError
from amd.workflow.grid import Grid
from amd.workflow.plan import load_config
from amd.workflow.release import check, sync


def register(subparsers) -> None:
    release = subparsers.add_parser("release", help="a config's outputs as a checksummed release folder")
    commands = release.add_subparsers(dest="release_command", required=True)
    sync_parser = commands.add_parser("sync", help="copy the config's runs, banks, scores, tables and figures as "
                                                   "they grow into its release folder (the config's `release`)")
    sync_parser.add_argument("--configfile", nargs="+", required=True, help="the config files, as given to snakemake")
    sync_parser.set_defaults(handler=sync_from_args)
    check_parser = commands.add_parser("check", help="verify a release's checksums and rebuild its scores, tables "
                                                     "and figures from its run files (no model, no network)")
    check_parser.add_argument("folder", help="the release folder (holding MANIFEST.json)")
    check_parser.add_argument("--recheck", action="store_true",
                              help="also re-score every trajectory with its benchmark's own checker")
    check_parser.set_defaults(handler=check_from_args)


def sync_from_args(args) -> int:
    grid = Grid(load_config(args.configfile))
    if "release" not in grid.config:
        raise AmdError(f"{' '.join(args.configfile)}: the config names no `release` folder to sync into")
    manifest = sync(grid, args.configfile)
    size = sum(item["bytes"] for item in manifest["files"].values())
    print(f"amd release sync: {len(manifest['files'])} files, {size / 1e6:.2f} MB in {grid.config['release']}")
    for run, item in manifest["runs"].items():
        done = f"{item['records']} of {item['tasks']} tasks" if item["tasks"] else "not started (no task list yet)"
        print(f"amd release sync: {run}: {done}")
    return 0


def check_from_args(args) -> int:
    problems, notes = check(Path(args.folder), recheck=args.recheck)
    for line in notes:
        print(f"amd release check: {line}")
    for line in problems:
        print(f"amd release check: MISMATCH {line}", file=sys.stderr)
    print(f"amd release check: {args.folder}: " + (f"{len(problems)} problems" if problems else
                                                   "every checksum, score, table and figure matches"))
    return 1 if problems else 0
