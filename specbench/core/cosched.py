"""Co-scheduling ratios to a precision (docs/METHODS.md §4.3 Co-scheduling ratios), pure.

A cell (target width, KV depth) holds the runner's raw samples: target forwards alone and
together, drafter steps alone and together. Its ratios are the ratio of medians, together /
alone; their ~95% interval is a percentile bootstrap of that ratio (each side resampled on its
own, seeded). A cell's achieved precision is the larger relative half-width of its two
ratios' intervals, and the profile's repetition rule (core/repetitions.py, the one that stops
cost cells) says when a cell stops: its count is its target forwards per side.

`measure_to_rule` drives the measurement through a given `measure` (the runner's cosched job
in world/profiling.py): every cell the rule has not stopped gets the samples its interval
projects it to need (the half-width shrinking as 1/sqrt(n)), never past the maximum; a ratio
below 1 beyond its interval, or below 1 - RHO_SLACK (a lane faster beside the other: physically
impossible, so noise or a disturbed measurement) is measured once more from scratch, and what
stays below 1 comes back as a `BelowOne` for the profile's warnings.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from specbench.core.repetitions import INTERVAL_TAIL, RepetitionRule

RESAMPLES = 2000
"""Bootstrap resamples behind a ratio's interval."""
SEED = 0
"""The bootstrap's seed: the same samples give the same interval."""
RHO_SLACK = 0.25
"""How far below 1 a co-scheduling ratio may fall as noise at least: a ratio of two medians on a busy host
is noisier than either timing (split profiles on this project's host hold ratios near 0.92). A point
ratio further below 1 is measured again even when its interval, from few samples, reaches 1."""
MIN_STEP = 2
"""The fewest forwards per side a cell short of its precision takes in its next job."""
MEASURES = ("target_alone_us", "target_together_us", "drafter_alone_us", "drafter_together_us")
"""The runner's sample lists of a cosched record, in microseconds."""

Cell = tuple[int, int]
"""(target width, KV depth)."""


@dataclass(frozen=True)
class RatioEstimate:
    """A ratio of medians (together / alone) and its bootstrap interval."""

    ratio: float
    low: float
    """Lower end of the ~95% interval."""
    high: float
    """Upper end of the ~95% interval."""

    @property
    def precision(self) -> float:
        """Relative half-width of the interval (a fraction; infinity for a ratio <= 0)."""
        return (self.high - self.low) / 2.0 / self.ratio if self.ratio > 0 else math.inf

    def below_one(self) -> bool:
        """The whole interval lies below 1: the lane ran faster beside the other one."""
        return self.high < 1.0

    def implausible(self) -> bool:
        """Below 1 beyond its interval, or further below 1 than noise reaches (RHO_SLACK) whatever its
        interval: a cell to measure again."""
        return self.below_one() or self.ratio < 1.0 - RHO_SLACK


def reaches_one(ratio: float, precision: float) -> bool:
    """A ratio's interval reaches 1 as the profile records it: ratio × (1 + the cell's achieved precision). What
    the profile's loader accepts below its floor, and what the measurement warns of when a re-measured ratio fails
    it (`CellSamples.below_one`), so that a bootstrap interval skewed up to 1 around a low ratio, which the
    profile's symmetric record does not reach 1 with, is warned of rather than written and then refused."""
    return ratio * (1.0 + precision) >= 1.0


def ratio_of_medians(alone: Sequence[float], together: Sequence[float], resamples: int = RESAMPLES,
                     seed: int = SEED) -> RatioEstimate:
    """median(together) / median(alone) with a percentile bootstrap interval (INTERVAL_TAIL in each tail)."""
    a = np.asarray(alone, dtype=np.float64)
    t = np.asarray(together, dtype=np.float64)
    if not a.size or not t.size:
        raise ValueError("a ratio needs samples alone and together")
    rng = np.random.default_rng(seed)
    a_med = np.median(a[rng.integers(0, a.size, (resamples, a.size))], axis=1)
    t_med = np.median(t[rng.integers(0, t.size, (resamples, t.size))], axis=1)
    ratios = np.divide(t_med, a_med, out=np.full(resamples, np.inf), where=a_med > 0)
    low, high = np.quantile(ratios, [INTERVAL_TAIL, 1.0 - INTERVAL_TAIL])
    a_all = float(np.median(a))
    ratio = float(np.median(t)) / a_all if a_all > 0 else math.inf
    return RatioEstimate(ratio, float(low), float(high))


@dataclass(frozen=True)
class CellSamples:
    """Every raw sample of one co-scheduling cell, over the jobs that measured it."""

    width: int
    depth: int
    samples_us: Mapping[str, tuple[float, ...]]
    """One of MEASURES -> its samples (microseconds), in the order taken."""
    records: tuple[dict, ...] = ()
    """The runner's records the samples came from (the profile's samples file keeps them)."""

    @classmethod
    def empty(cls, cell: Cell) -> CellSamples:
        return cls(cell[0], cell[1], {m: () for m in MEASURES})

    def add(self, record: Mapping) -> CellSamples:
        """These samples and a runner cosched record's."""
        got = record.get("samples") or {}
        return CellSamples(self.width, self.depth,
                           {m: self.samples_us[m] + tuple(float(v) for v in got.get(m) or ()) for m in MEASURES},
                           self.records + (dict(record),))

    @property
    def count(self) -> int:
        """Target forwards per side: the count the repetition rule judges."""
        return min(len(self.samples_us["target_alone_us"]), len(self.samples_us["target_together_us"]))

    def rho_target(self) -> RatioEstimate:
        return self._rho_target

    def rho_drafter(self) -> RatioEstimate | None:
        """None when no drafter step ran inside a together span."""
        return self._rho_drafter

    # Each bootstrap is taken once per (immutable) cell: the rule, the plausibility check and the profile's
    # record all read it, and with thousands of drafter samples one costs a noticeable fraction of a second.
    @cached_property
    def _rho_target(self) -> RatioEstimate:
        return ratio_of_medians(self.samples_us["target_alone_us"], self.samples_us["target_together_us"])

    @cached_property
    def _rho_drafter(self) -> RatioEstimate | None:
        if not self.samples_us["drafter_alone_us"] or not self.samples_us["drafter_together_us"]:
            return None
        return ratio_of_medians(self.samples_us["drafter_alone_us"], self.samples_us["drafter_together_us"])

    def achieved_precision(self) -> float:
        """The larger relative half-width of the two ratios' intervals (infinity without a drafter ratio)."""
        if not self.count:
            return math.inf
        drafter = self.rho_drafter()
        return max(self.rho_target().precision, math.inf if drafter is None else drafter.precision)

    def below_one(self) -> list[tuple[str, RatioEstimate]]:
        """The ratios (rho_target, rho_drafter) whose interval lies below 1, or does not reach 1 as the profile
        records it (`reaches_one`)."""
        ratios = [("rho_target", self.rho_target()), ("rho_drafter", self.rho_drafter())]
        achieved = self.achieved_precision()
        return [(name, r) for name, r in ratios
                if r is not None and (r.below_one() or not reaches_one(r.ratio, achieved))]

    def implausible(self) -> bool:
        """A ratio of this cell is implausible (`RatioEstimate.implausible`)."""
        return any(r is not None and r.implausible() for r in (self.rho_target(), self.rho_drafter()))


def cell_done(rule: RepetitionRule, cell: CellSamples) -> bool:
    """The profile's repetition rule applied to a co-scheduling cell."""
    return rule.stops(cell.count, cell.achieved_precision)


def next_count(rule: RepetitionRule, cell: CellSamples) -> int:
    """Target forwards per side the next job takes for a cell the rule has not stopped: the
    minimum at first, then what its interval projects it to need, n (achieved / precision)^2 in
    all (a half-width shrinks as 1/sqrt(n)), at least MIN_STEP more, never past the maximum.
    Each job reloads both models (and re-encodes a Whisper window), so a cell that cannot reach
    the precision goes to the maximum in one job rather than in several growing ones."""
    if not cell.count:
        return rule.min_repetitions
    left = rule.max_repetitions - cell.count
    achieved = cell.achieved_precision()
    if rule.precision is None or not math.isfinite(achieved):
        return max(1, left)
    projected = math.ceil(cell.count * (achieved / rule.precision) ** 2) - cell.count
    return max(1, min(max(MIN_STEP, projected), left))


@dataclass(frozen=True)
class BelowOne:
    """A ratio that stayed below 1 beyond its interval, or short of 1 as the profile records it (`reaches_one`),
    after a second measurement of its cell."""

    width: int
    depth: int
    ratio: str
    """rho_target or rho_drafter."""
    estimate: RatioEstimate
    cell: CellSamples
    """The cell's samples of the second measurement (the ones priced)."""


@dataclass(frozen=True)
class Measured:
    """What `measure_to_rule` found."""

    cells: Mapping[Cell, CellSamples]
    remeasured: tuple[Cell, ...] = ()
    """Cells measured a second time from scratch (an implausible ratio: `CellSamples.implausible`)."""
    below_one: tuple[BelowOne, ...] = ()
    """Ratios still below 1 after the second measurement: warnings, priced as measured."""
    jobs: int = 0
    """Runner jobs taken."""
    discarded: tuple[CellSamples, ...] = field(default=())
    """The first measurements of re-measured cells (kept in the samples file, not priced)."""


Measure = Callable[[Sequence[Cell], int, int], Sequence[Mapping]]
"""measure(cells, repetitions per side, job number) -> the runner's cosched records, one per cell."""


def _to_rule(measure: Measure, cells: Sequence[Cell], rule: RepetitionRule, job: int) -> tuple[dict, int]:
    got = {c: CellSamples.empty(c) for c in cells}
    pending = list(cells)
    while pending:
        # one job for the cells that have the same count: it takes the largest step any of them needs
        # (never past their maximum), so every cell of a job takes the same repetitions
        steps: dict[int, int] = {}
        for c in pending:
            steps[got[c].count] = max(steps.get(got[c].count, 0), next_count(rule, got[c]))
        for count, step in sorted(steps.items()):
            batch = [c for c in pending if got[c].count == count]
            records = {(int(r["width"]), int(r["depth"])): r for r in measure(batch, step, job)}
            job += 1
            missing = [c for c in batch if c not in records]
            if missing:
                raise ValueError(f"the cosched job returned no record for width {missing[0][0]} "
                                 f"at depth {missing[0][1]}")
            for c in batch:
                got[c] = got[c].add(records[c])
        pending = [c for c in pending if not cell_done(rule, got[c])]
    return got, job


def measure_to_rule(measure: Measure, cells: Sequence[Cell], rule: RepetitionRule) -> Measured:
    """Every cell measured until the rule stops it; a cell with an implausible ratio measured once
    more from scratch, and what stays below 1 (`CellSamples.below_one`) returned as warnings."""
    got, jobs = _to_rule(measure, cells, rule, 0)
    low = [c for c in cells if got[c].implausible()]
    if not low:
        return Measured(got, jobs=jobs)
    again, jobs = _to_rule(measure, low, rule, jobs)
    discarded = tuple(got[c] for c in low)
    got |= again
    below = tuple(BelowOne(c[0], c[1], name, estimate, got[c]) for c in low for name, estimate in got[c].below_one())
    return Measured(got, tuple(low), below, jobs, discarded)
