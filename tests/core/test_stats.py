"""The bootstrap interval of a pooled speedup, checked against a direct computation."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from specbench.core import stats

# Four windows: tokens, and seconds under configuration a and the baseline b.
TOKENS = np.array([40.0, 12.0, 25.0, 33.0])
SECONDS_A = np.array([0.50, 0.20, 0.30, 0.55])
SECONDS_B = np.array([0.80, 0.18, 0.45, 0.60])


def test_the_point_estimate_is_the_ratio_of_pooled_throughputs():
    expected = (TOKENS.sum() / SECONDS_A.sum()) / (TOKENS.sum() / SECONDS_B.sum())
    assert stats.pooled_ratio(TOKENS, SECONDS_A, TOKENS, SECONDS_B) == pytest.approx(expected, rel=1e-15)


def test_percentile_interval_matches_the_exhaustive_bootstrap():
    """Every one of the 4^4 paired resamples, each equally likely, gives the exact bootstrap
    distribution; scipy's Monte Carlo percentile interval must land on its quantiles."""
    n = len(TOKENS)
    ratios = np.sort([stats.pooled_ratio(TOKENS[list(i)], SECONDS_A[list(i)], TOKENS[list(i)], SECONDS_B[list(i)])
                      for i in itertools.product(range(n), repeat=n)])
    cdf = np.arange(1, len(ratios) + 1) / len(ratios)
    exact_low = ratios[np.searchsorted(cdf, 0.05)]
    exact_high = ratios[np.searchsorted(cdf, 0.95)]
    got = stats.pooled_ratio_interval(TOKENS, SECONDS_A, TOKENS, SECONDS_B, level=0.90, resamples=40000,
                                      method="percentile")
    spread = ratios[-1] - ratios[0]
    assert abs(got.low - exact_low) < 0.02 * spread and abs(got.high - exact_high) < 0.02 * spread


def test_bca_interval_brackets_the_point_estimate_and_is_reproducible():
    point = stats.pooled_ratio(TOKENS, SECONDS_A, TOKENS, SECONDS_B)
    first = stats.pooled_ratio_interval(TOKENS, SECONDS_A, TOKENS, SECONDS_B)
    again = stats.pooled_ratio_interval(TOKENS, SECONDS_A, TOKENS, SECONDS_B)
    assert first == again and first.low < point < first.high


def test_no_interval_without_spread():
    assert stats.pooled_ratio_interval(TOKENS[:1], SECONDS_A[:1], TOKENS[:1], SECONDS_B[:1]) is None
    assert stats.pooled_ratio_interval(TOKENS, SECONDS_A, TOKENS, 2 * SECONDS_A) is None  # every window 0.5x
    assert "95% paired bootstrap" in stats.describe()


SECONDS_C = np.array([0.30, 0.25, 0.50, 0.40])


def test_mean_pooled_ratio_of_one_configuration_is_the_pooled_ratio():
    assert stats.mean_pooled_ratio(TOKENS, SECONDS_A, TOKENS, SECONDS_B) == \
        stats.pooled_ratio(TOKENS, SECONDS_A, TOKENS, SECONDS_B)
    both = stats.mean_pooled_ratio(TOKENS, SECONDS_A, TOKENS, SECONDS_C, TOKENS, SECONDS_B)
    assert both == pytest.approx((TOKENS.sum() / SECONDS_A.sum() + TOKENS.sum() / SECONDS_C.sum()) / 2
                                 / (TOKENS.sum() / SECONDS_B.sum()), rel=1e-15)


def test_interval_of_a_mean_over_configurations_matches_the_exhaustive_bootstrap():
    """SD's mean over W: every configuration is resampled on the same windows as the baseline."""
    n = len(TOKENS)
    ratios = []
    for picked in itertools.product(range(n), repeat=n):
        i = list(picked)
        a = TOKENS[i].sum() / SECONDS_A[i].sum()
        c = TOKENS[i].sum() / SECONDS_C[i].sum()
        ratios.append((a + c) / 2 / (TOKENS[i].sum() / SECONDS_B[i].sum()))
    ratios = np.sort(ratios)
    cdf = np.arange(1, len(ratios) + 1) / len(ratios)
    got = stats.paired_interval(stats.mean_pooled_ratio, [TOKENS, SECONDS_A, TOKENS, SECONDS_C, TOKENS, SECONDS_B],
                                level=0.90, resamples=40000, method="percentile")
    # the exact distribution has jumps: each bound lies between its exact quantiles at +-1 % probability
    for bound, p in ((got.low, 0.05), (got.high, 0.95)):
        assert ratios[np.searchsorted(cdf, p - 0.01)] <= bound <= ratios[np.searchsorted(cdf, p + 0.01)]
    assert stats.paired_interval(stats.mean_pooled_ratio, [TOKENS[:1]] * 6) is None
