"""Confidence intervals for pooled ratios over windows (docs/METHODS.md §7.1 Pooled throughput and speedups).

A pooled speedup is a ratio of two pooled throughputs measured on the same windows:
(sum tokens_a / sum seconds_a) / (sum tokens_b / sum seconds_b). Its interval comes from a
paired bootstrap over windows (`scipy.stats.bootstrap`, BCa): a resample draws windows with
replacement and keeps each window's measurements together, so the per-window correlation
between the configurations (long windows are long for both) is preserved. A statistic of
more than two configurations (SD's mean over W) is bootstrapped the same way, all of its
configurations drawn on the same windows. The seed is fixed, so a report prints the same
interval every time it is built.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

LEVEL = 0.95
RESAMPLES = 2000
SEED = 20261201
METHOD = "BCa"


@dataclass(frozen=True)
class Interval:
    low: float
    high: float

    def __str__(self) -> str:
        return f"[{self.low:.3g}, {self.high:.3g}]"


def describe(level: float = LEVEL, resamples: int = RESAMPLES, method: str = METHOD) -> str:
    """The line a table prints under its intervals."""
    return (f"intervals: {level:.0%} paired bootstrap over windows ({method}, {resamples} resamples, "
            f"scipy.stats.bootstrap, seed {SEED})")


def pooled_sd(parts: Iterable[tuple[float, int]]) -> tuple[float, int]:
    """(standard deviation, degrees of freedom) of several measurements of one spread, each (sd, its degrees of
    freedom), pooled as variances: the root of their mean weighted by degrees of freedom."""
    squares, freedom = 0.0, 0
    for sd, dof in parts:
        squares += dof * sd ** 2
        freedom += dof
    return math.sqrt(squares / freedom), freedom


def pooled_ratio(tokens_a, seconds_a, tokens_b, seconds_b, axis: int = -1):
    """(pooled throughput of a) / (pooled throughput of b), along `axis`."""
    return (np.sum(tokens_a, axis=axis) / np.sum(seconds_a, axis=axis)) / \
        (np.sum(tokens_b, axis=axis) / np.sum(seconds_b, axis=axis))


def mean_pooled_ratio(*data, axis: int = -1):
    """The mean over configurations of their pooled throughputs, over the pooled throughput of a
    baseline: `data` = tokens_1, seconds_1, ..., tokens_k, seconds_k, tokens_b, seconds_b."""
    *pairs, tokens_b, seconds_b = data
    throughputs = [np.sum(t, axis=axis) / np.sum(s, axis=axis) for t, s in zip(pairs[::2], pairs[1::2], strict=False)]
    return np.mean(throughputs, axis=0) / (np.sum(tokens_b, axis=axis) / np.sum(seconds_b, axis=axis))


def pooled_ratio_interval(tokens_a, seconds_a, tokens_b, seconds_b, level: float = LEVEL,
                          resamples: int = RESAMPLES, method: str = METHOD) -> Interval | None:
    """The paired bootstrap interval of `pooled_ratio`; None when it has no spread to
    resample (fewer than two windows, or every resample gives the same ratio)."""
    data = [np.asarray(x, dtype=np.float64) for x in (tokens_a, seconds_a, tokens_b, seconds_b)]
    if len(data[0]) < 2 or np.ptp(_per_window(*data)) == 0:
        return None
    return paired_interval(pooled_ratio, data, level, resamples, method)


def paired_interval(statistic: Callable, data: Sequence, level: float = LEVEL, resamples: int = RESAMPLES,
                    method: str = METHOD) -> Interval | None:
    """The paired bootstrap interval of `statistic(*data, axis=-1)`, every array of `data`
    holding one value per window in the same window order; None with fewer than two windows
    or when the resamples have no spread (scipy then gives no finite interval)."""
    data = [np.asarray(x, dtype=np.float64) for x in data]
    if len(data[0]) < 2:
        return None
    # no spread, or a resample of only degenerate windows (0 / 0): answered by None below
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        result = stats.bootstrap(data, statistic, paired=True, vectorized=True, confidence_level=level,
                                 n_resamples=resamples, method=method.lower(), rng=np.random.default_rng(SEED))
    low, high = result.confidence_interval
    if not (np.isfinite(low) and np.isfinite(high)):
        return None
    return Interval(float(low), float(high))


def _per_window(tokens_a, seconds_a, tokens_b, seconds_b) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return (tokens_a / seconds_a) / (tokens_b / seconds_b)
