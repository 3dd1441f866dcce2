"""The statistics beside every success rate (amd.analysis.stats), against values worked out by hand."""

import pytest

from amd.analysis.stats import interval_columns, pass_hat_k, wilson
from amd.core.errors import AmdError

Z2 = 1.959964 ** 2  # z for a two-sided 95 % interval, squared: 3.841459


def test_wilson_5_of_13_by_hand():
    # p = 5/13 = 0.384615, z²/n = 0.295497; centre = (p + z²/2n) / (1 + z²/n) = 0.532364 / 1.295497 = 0.410934;
    # half = z·sqrt(p(1-p)/n + z²/4n²) / (1 + z²/n) = 1.959964 · sqrt(0.018207 + 0.005683) / 1.295497 = 0.233839
    low, high = wilson(5, 13)
    assert low == pytest.approx(17.7095, abs=1e-3) and high == pytest.approx(64.4773, abs=1e-3)


@pytest.mark.parametrize("n", [1, 4, 13, 200])
def test_wilson_at_none_and_all_solved_has_a_closed_form(n):
    # p = 0: centre = half = (z²/2n) / (1 + z²/n), so the interval is [0, z²/(n + z²)]; p = 1 mirrors it
    assert wilson(0, n) == pytest.approx((0.0, 100 * Z2 / (n + Z2)), abs=1e-4)
    assert wilson(n, n) == pytest.approx((100 * n / (n + Z2), 100.0), abs=1e-4)


def test_wilson_is_symmetric_and_holds_the_rate():
    for successes in range(14):
        low, high = wilson(successes, 13)
        mirror_low, mirror_high = wilson(13 - successes, 13)
        assert low == pytest.approx(100 - mirror_high) and high == pytest.approx(100 - mirror_low)
        assert low <= 100 * successes / 13 <= high


def test_wilson_refuses_impossible_counts():
    for successes, attempts in [(0, 0), (5, 4), (-1, 3)]:
        with pytest.raises(AmdError, match="0 <= successes <= attempts"):
            wilson(successes, attempts)


def test_interval_columns_name_the_rate_and_leave_no_attempts_blank():
    assert interval_columns("success", 0, 4) == {"success_ci_low": 0.0, "success_ci_high": pytest.approx(48.9891, abs=1e-3),
                                                 "success_n": 4}
    assert interval_columns("grid_success", 0, 0) == {"grid_success_ci_low": None, "grid_success_ci_high": None,
                                                      "grid_success_n": None}


def test_pass_hat_k_by_hand():
    verdicts = {"a": [True, True, False], "b": [True, True, True], "c": [False, False, False], "d": [True]}
    # pass^1 over all four: (2/3 + 1 + 0 + 1) / 4; pass^2 over the three with 3 runs: a C(2,2)/C(3,2) = 1/3, b 1, c 0;
    # pass^3: a 0 (C(2,3) = 0), b 1, c 0; pass^4: no task has 4 runs
    assert pass_hat_k(verdicts, 1) == pytest.approx(100 * (2 / 3 + 1 + 0 + 1) / 4)
    assert pass_hat_k(verdicts, 2) == pytest.approx(100 * (1 / 3 + 1 + 0) / 3)
    assert pass_hat_k(verdicts, 3) == pytest.approx(100 / 3)
    assert pass_hat_k(verdicts, 4) is None
    with pytest.raises(AmdError, match="k >= 1"):
        pass_hat_k(verdicts, 0)
