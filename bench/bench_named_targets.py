"""Wall time of each output asked for by name (the config's `on_demand` experiments), each built alone with
`snakemake --cores 2 TARGET` from an empty results/ and empty response and embedding caches (.amd/cache; the
assembled model weights stay), as on a fresh clone after `make venv model-1.5b`. Each target's results and caches
are moved to bench_out/named_targets/NAME/ afterwards (nothing is deleted), so results/ and those caches must be
absent or empty to start. Prints minutes and the load average before and after: other work inflates wall times.

    .venv/bin/python bench/bench_named_targets.py [NAME ...]    # default: every on-demand output of the config
"""

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from amd.workflow.grid import Grid
from amd.workflow.plan import load_config

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "results"
CACHES = [REPO / ".amd/cache/responses", REPO / ".amd/cache/embeddings"]  # a user's earlier runs would fill them


def load() -> str:
    return " / ".join(f"{value:.2f}" for value in os.getloadavg())


def build(name: str, grid: Grid) -> tuple[float, int]:
    target = grid.output_paths(name)[-1]
    command = [str(Path(sys.executable).parent / "snakemake"), "--cores", "2", target]
    started = time.monotonic()
    done = subprocess.run(command, check=False, cwd=REPO, capture_output=True, text=True)
    minutes = (time.monotonic() - started) / 60
    kept = REPO / "bench_out" / "named_targets" / name
    shutil.rmtree(kept, ignore_errors=True)
    kept.mkdir(parents=True)
    (kept / "snakemake.log").write_text(done.stdout + done.stderr, encoding="utf-8")
    shutil.move(RESULTS, kept / "results")
    for cache in CACHES:
        if cache.exists():
            shutil.move(cache, kept / cache.name)
    RESULTS.mkdir()
    (RESULTS / ".gitkeep").touch()
    return minutes, done.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="outputs to build (default: every on-demand output)")
    os.chdir(REPO)
    grid = Grid(load_config([]))
    names = parser.parse_args().names or sorted(grid.on_demand())
    if any(path.name != ".gitkeep" for path in RESULTS.glob("*")) or any(cache.exists() for cache in CACHES):
        sys.exit(f"results/ or {', '.join(str(cache) for cache in CACHES)} not empty: move them away first (each "
                 "target is timed from scratch)")
    print("| output | experiments | minutes | exit | load before | load after |\n|---|---|---|---|---|---|")
    for name in names:
        before = load()
        minutes, code = build(name, grid)
        print(f"| {name} | {', '.join(grid.on_demand().get(name, []))} | {minutes:.1f} | {code} | {before} | "
              f"{load()} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
