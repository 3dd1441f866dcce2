"""What every table and figure reports beside a success rate, in one place (docs/results.md, "What a table or
figure reports beside a rate", says the same).

- **95 % interval**: the Wilson score interval (Wilson 1927) of successes over n task attempts. A cell averaged
  over seeds pools its runs: n = every task attempt of every seed (tasks x seeds), successes likewise. Seeds repeat
  the same tasks, so pooling treats repeated attempts of a task as independent: the interval is about these tasks,
  and narrower than one about the population the tasks were drawn from.
- **std**: the sample standard deviation of the runs' rates, only where a cell has two runs or more.
- **pass^k** (τ-bench, Yao et al. 2024, arXiv 2406.12045): for a task tried n times with c successes,
  C(c, k) / C(n, k), the chance that k of its attempts drawn at random all succeed; averaged over the tasks.
"""

from math import comb, sqrt
from statistics import NormalDist

from amd.core.errors import AmdError

Z95 = NormalDist().inv_cdf(0.975)  # 1.95996...
INTERVAL_NOTE = ("[95 % CI]: the Wilson score interval over n task attempts (the `_n` column: a run's tasks, or tasks x "
                 "runs where a cell averages seeds, each attempt counted as independent).")
STD_NOTE = "std: the standard deviation over the cell's runs (seeds); a dash with one run."
PASS_K_NOTE = ("pass^k (τ-bench's convention, Yao et al. 2024, arXiv 2406.12045): per task with n runs of which c "
               "succeed, C(c,k)/C(n,k), averaged over the tasks that have at least k runs; a dash where a cell has "
               "fewer than k runs.")


def wilson(successes: int, attempts: int) -> tuple[float, float]:
    """The 95 % Wilson score interval of `successes` out of `attempts`, in percent."""
    if attempts < 1 or not 0 <= successes <= attempts:
        raise AmdError(f"a success rate needs 0 <= successes <= attempts and attempts >= 1, got {successes} of "
                       f"{attempts}")
    p, n, z2 = successes / attempts, attempts, Z95 ** 2
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z95 * sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    # at p = 0 (p = 1) the bound is 0 (1) exactly, which float arithmetic misses by an ulp
    return (0.0 if successes == 0 else 100.0 * (centre - half)), (100.0 if successes == n else 100.0 * (centre + half))


def interval_columns(rate: str, successes, attempts) -> dict:
    """`RATE_ci_low`, `RATE_ci_high` (percent) and `RATE_n` of the rate named `rate`; None with no attempts."""
    low, high = wilson(int(successes), int(attempts)) if attempts else (None, None)
    return {f"{rate}_ci_low": low, f"{rate}_ci_high": high, f"{rate}_n": int(attempts) if attempts else None}


def interval_of(rate: str) -> tuple[str, str, str]:
    """The names of the interval columns of the rate named `rate`."""
    return f"{rate}_ci_low", f"{rate}_ci_high", f"{rate}_n"


def pass_hat_k(verdicts_by_task: dict, k: int) -> float | None:
    """pass^k in percent over the tasks with at least k verdicts (`verdicts_by_task`: task -> list of bools, one
    per run); None where no task has k."""
    if k < 1:
        raise AmdError(f"pass^k needs k >= 1, got {k}")
    tried = [verdicts for verdicts in verdicts_by_task.values() if len(verdicts) >= k]
    if not tried:
        return None
    return 100.0 * sum(comb(sum(v), k) / comb(len(v), k) for v in tried) / len(tried)
