"""How many samples a profile cell takes (docs/METHODS.md §4.2 Forward costs: CT, CD and the all-rows table).

A profile cell measured to a precision P takes samples until the half-width of a
distribution-free ~95% confidence interval of its median is at most P x the median (between a
minimum and a maximum count): the interval is [x(l), x(n + 1 - l)] of the n sorted samples, l
the 2.5% quantile of Binomial(n, 1/2), at least 1 (the sign-test interval; below 6 samples it
is the range, covering 1 - 2^(1 - n)). The runner's sweep (specbench/native/src/timing.h)
applies the same rule, with the same floating-point operations, and tests check the two agree.

No numpy: `profile --help` reads the defaults from here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

DEFAULT_PRECISION = 0.02
"""`profile --precision`: the median's ~95% interval within 2% of it."""
MIN_REPETITIONS = 5
"""Fewest samples behind a median (fixed or to a precision)."""
DEFAULT_MAX_REPETITIONS = 30
"""`profile --max-repetitions`: most samples a cell takes chasing the precision."""
MAX_PRECISION_REPETITIONS = 1000
"""The runner's bound on --max-repetitions (Binomial(n, 1/2) probabilities stay normal doubles)."""
OVERHEADS_WINDOWS = 3
"""`profile --overheads-windows`: copies of the overheads window, each decoded twice by target-only, by AS2D
and by SD (docs/METHODS.md §4.4 Overheads)."""
MAX_OVERHEADS_WINDOWS = 50
"""The most `--overheads-windows` takes (each copy is six decodes of 48 tokens)."""
INTERVAL_TAIL = 0.025
"""Probability in each tail of the median's interval (a ~95% interval)."""


@dataclass(frozen=True)
class RepetitionRule:
    """How many timed samples a profile cell takes: a fixed count, or samples until the median is
    known to `precision` (docs/METHODS.md §4.2 Forward costs: CT, CD and the all-rows table)."""

    min_repetitions: int = MIN_REPETITIONS
    """Samples every cell takes; with no precision, the fixed count."""
    max_repetitions: int = MIN_REPETITIONS
    """Most samples a cell takes (equal to min_repetitions for a fixed count)."""
    precision: float | None = None
    """Relative half-width of the median's ~95% interval to reach (a fraction, e.g. 0.02); None: a fixed count."""

    def __post_init__(self) -> None:
        if self.min_repetitions < MIN_REPETITIONS:
            raise ValueError(f"at least {MIN_REPETITIONS} repetitions are needed for a median and spread "
                             f"(got {self.min_repetitions})")
        if self.precision is None:
            if self.max_repetitions != self.min_repetitions:
                raise ValueError("a fixed count has max_repetitions == min_repetitions")
            return
        if not 0 < self.precision < 1:
            raise ValueError(f"precision {self.precision!r}: expected a fraction of the median in (0, 1), e.g. 0.02")
        if not self.min_repetitions <= self.max_repetitions <= MAX_PRECISION_REPETITIONS:
            raise ValueError(f"max repetitions {self.max_repetitions}: expected between the minimum "
                             f"({self.min_repetitions}) and {MAX_PRECISION_REPETITIONS}")

    @classmethod
    def fixed(cls, repetitions: int) -> RepetitionRule:
        return cls(repetitions, repetitions)

    def done(self, samples: Sequence[float]) -> bool:
        """True once a cell with these samples (in the order taken) stops."""
        return self.stops(len(samples), lambda: achieved_precision(samples))

    def stops(self, n: int, achieved: Callable[[], float | None]) -> bool:
        """True once a cell of n samples stops: at the maximum, or from the minimum on once
        `achieved()` (its precision, asked only then; None: none exists) reaches the precision.
        Cost cells judge their median's interval, co-scheduling cells their ratio's
        (core/cosched.py): one rule."""
        if n >= self.max_repetitions:
            return True
        if n < self.min_repetitions or self.precision is None:
            return False
        return reaches(achieved(), self.precision)

    def stop_count(self, samples: Sequence[float]) -> int:
        """How many of `samples` (in the order taken) the rule takes before it stops; len(samples)
        when it would take more than were given."""
        for n in range(1, len(samples) + 1):
            if self.done(samples[:n]):
                return n
        return len(samples)

    def describe(self) -> str:
        """The rule in words (a profile's notes, the demo's output)."""
        if self.precision is None:
            return f"{self.min_repetitions} repetitions"
        return (f"repetitions until the median's ~95% interval is within +/-{100 * self.precision:g}% "
                f"({self.min_repetitions}..{self.max_repetitions})")


def median_interval_rank(n: int) -> int:
    """The 1-based rank l of the lower end of the median's interval over n samples (the upper end
    is n + 1 - l): the INTERVAL_TAIL quantile of Binomial(n, 1/2), at least 1. The runner's
    `median_interval_rank` runs the same operations."""
    if n < 1:
        raise ValueError("no samples")
    pmf = math.ldexp(1.0, -n)
    cdf, k = pmf, 0
    while cdf < INTERVAL_TAIL and k < n:
        pmf = pmf * float(n - k) / float(k + 1)
        k += 1
        cdf += pmf
    return max(k, 1)


def achieved_precision(samples: Sequence[float]) -> float:
    """Half-width of the median's interval / the median (a fraction): 0 for an interval of no width,
    infinity when the median is <= 0 and the interval has a width."""
    ordered = sorted(samples)
    n = len(ordered)
    if not n:
        raise ValueError("no samples")
    rank = median_interval_rank(n)
    median = float(ordered[n // 2]) if n % 2 else 0.5 * (ordered[n // 2 - 1] + ordered[n // 2])
    half = float(ordered[n - rank] - ordered[rank - 1]) / 2.0
    if half == 0.0:
        return 0.0
    return half / median if median > 0 else math.inf


def reaches(achieved: float | None, precision: float) -> bool:
    """True when an achieved precision (None: none exists) is within the requested one."""
    return achieved is not None and achieved <= precision
