"""`snakemake --lint`, less the one lint the workflow answers by design (`make lint` runs this file).

Snakemake asks every shell rule for a conda environment or a container. amd's jobs run `amd` from the environment
that runs Snakemake (the pip `.venv` of `make venv`, or a conda user's environment set up as docs/getting-started.md
says; .snakemake-workflow-catalog.yml: no conda, no container). environment.yml cannot build that on its own (its
pip section cannot install amd or the packages that must go in with --no-deps), so no rule names it: `--use-conda`
would give every job an environment without `amd`. Any other lint, or a lint run that fails, fails here.
"""

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BY_DESIGN = "Specify a conda environment or container for each rule."


def lint_problems(snakemake: str | Path) -> list[str]:
    """What `snakemake --lint` finds in the workflow besides BY_DESIGN; its whole output where it failed otherwise."""
    done = subprocess.run([str(snakemake), "--lint"], check=False, cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    output = done.stdout + done.stderr
    if done.returncode == 0 and "Congratulations" in output:
        return []
    titles = re.findall(r"^    \* (.+):$", output, flags=re.MULTILINE)
    if done.returncode != 1 or not titles:
        return [output.strip()]
    return [title for title in titles if title != BY_DESIGN]


if __name__ == "__main__":
    problems = lint_problems(Path(sys.executable).parent / "snakemake")
    print("\n".join(problems) or f"snakemake --lint: clean (but for the rules' missing conda environment: {__file__})")
    sys.exit(1 if problems else 0)
