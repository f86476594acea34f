"""Where AS2D's replay error comes from: a validation's speedup bias taken apart (docs/METHODS.md §7.9
Validation: does replay predict the device?).

AS2D's replay prices a window with the profile's co-scheduling ratios and a producer timeline
priced from the drafter's costs and overheads (`replay.reference.simulate_as2d`). A validation's
native decode keeps both lanes on its decode clock: each target forward's start `t_us` and length
`us`, the producer's start, forwards and publications. The window is replayed again through the
same two-lane simulation with inputs taken from the native runs, one kind at a time, cumulatively:

* **contention**: the target's ratios as the block's native runs of the configuration realised them, pooled,
  instead of the profile's (beside the producer, and alone after its span, `after_producer`): the estimator a
  profile's overheads decodes use (`decode_contention`: the target forwards that ran wholly beside the
  producer, their time over their solo work, the profile's price times `k`, the run's native solo speed
  against the profile from the target-only decode beside it; single-token steps and verifications each at
  their own where they had enough forwards). Pooled over the block, not per run: one run's `k` scatters as
  much as the contention does (0.85-1.31 x the profile's price over one validation's windows on this
  project's host), and a forward only partly beside the producer can make one run's per-width ratio
  anything, so a per-run substitution charges the run's own noise to the contention model;
* **publication**: besides, the producer as the native run realised it: a timeline on the native
  decode clock (each batch visible at its native publication time, the producer busy from its
  thread's start to its last forward or publication), with the producer's ratio 1 (its clock is
  already native's). The replays before it price the mean over the producer's pace scatter where
  the profile measured one; this one is the run's own pace, one timeline;
* **remains**: what replay still gets wrong with both: the target's own forward prices, the
  realignment searches, drift within the block, and the two-lane model itself.

Each part is a ratio of geometric means of replay over native, so that `total = contention x
publication x remains` (in log space a sum), each with the interval the validation's bias has: Student t
over the blocks' means, at the same level.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

import numpy as np

from specbench.core.fidelity import BIAS_LEVEL, ERROR_LEVEL, excess_terms, root_pct, t_halfwidths
from specbench.core.methods.configs import As2dConfig
from specbench.core.pricing import (
    CLASS_FORWARDS,
    DECODE_CLASSES,
    PRODUCER_CLASSES,
    PRODUCER_FIELDS,
    AfterProducer,
    CoSchedule,
    CostTable,
    DecodeContention,
)
from specbench.core.replay.reference import (
    ProducerLane,
    ProducerTimeline,
    expected_as2d,
    priced_lane,
    simulate_as2d,
)
from specbench.core.stats import Interval
from specbench.errors import SpecbenchError
from specbench.schemas.profiles import MAX_RHO, DeviceProfile
from specbench.schemas.traces import WindowTrace


class Part(str, Enum):
    """A factor of AS2D's speedup bias."""

    TOTAL = "total"
    """Replay as the validation prices it, over native."""
    CONTENTION = "contention"
    """What replaying with the target's realised co-scheduling ratios removes."""
    PUBLICATION = "publication"
    """What replaying, besides, with the producer's realised publications removes."""
    REMAINS = "remains"
    """The bias of the replay with both substitutions."""


PART_REPLAY = {Part.TOTAL: "as priced", Part.CONTENTION: "+ realised contention",
               Part.PUBLICATION: "+ realised publications", Part.REMAINS: ""}
"""The replay whose bias a part's row also shows: the one with the substitutions up to it."""


@dataclass(frozen=True)
class NativeLanes:
    """One native AS2D decode's lanes on its decode clock, as a validation's decode records keep them."""

    ops: Sequence[Mapping]
    """The decode's op log: each target forward's width, depth, `us` and start `t_us`."""
    producer: Mapping
    """The producer's timing record: started_us, step_start_us, step_us, publish_us, publish_count, publish_step."""
    solo_ops: Sequence[Mapping]
    """The op log of the target-only decode beside it in the same run: the target's solo speed then."""
    drafter_prompt: int | None = None
    """The drafter's prompt tokens (`n_prompt_drafter`): its forward s >= 1 runs at depth drafter_prompt + s - 1
    (None: not recorded; the producer's ratio is not measured from this run)."""
    window_id: str | None = None
    """The window decoded: decodes of one window give the producer's pace scatter (`pace_scatter`; None: not
    recorded, the run gives none)."""


@dataclass(frozen=True)
class BlockContention:
    """The target's co-scheduling ratio as one block's native runs of an AS2D configuration realised it."""

    cosched: CoSchedule
    """The profile's ratios with the target's replaced by the realised ones (the producer's as priced)."""
    priced: float | None
    """The profile's ratio for the forwards behind `realised`, weighted by their time (None: no forward ran
    wholly beside the producer, and nothing is substituted)."""
    realised: float | None
    forwards: int


def _field(record: Mapping, key: str, what: str) -> Any:
    if key not in record:
        raise SpecbenchError(f"{what} has no '{key}' (the runner's lane timestamps are needed)")
    return record[key]


def producer_span_us(producer: Mapping) -> tuple[float, float]:
    """[start, end) of the producer's work on the decode clock: from its thread's start to its last
    forward's end or last publication, whichever is later (replay prices a step's host work as
    producer work too, so the gaps between forwards belong to the span)."""
    start = max(float(_field(producer, "started_us", "the producer record")), 0.0)
    ends = [float(v) for v in producer.get("step_us", [])] + [float(v) for v in producer.get("publish_us", [])]
    return start, max([start, *ends])


def solo_factor(solo_ops: Sequence[Mapping], costs: CostTable) -> float:
    """The native target's solo time over the profile's price, pooled over a target-only decode's forwards."""
    forwards = [op for op in solo_ops if op["model"] == "target"]
    if not forwards:
        raise SpecbenchError("the target-only decode beside the AS2D decode has no target forwards")
    priced = float(costs.costs(np.array([int(op["width"]) for op in forwards]),
                               np.array([float(op["depth"]) for op in forwards])).sum())
    return sum(float(op["us"]) for op in forwards) / (1e6 * priced)


def _target_forwards(native: NativeLanes) -> Iterator[tuple[float, float, int, float]]:
    """(start t_us, us, width, depth) of each target forward of the decode's op log."""
    for op in native.ops:
        if op["model"] == "target":
            yield float(_field(op, "t_us", "a target op")), float(op["us"]), int(op["width"]), float(op["depth"])


def _beside_producer(native: NativeLanes) -> Iterator[tuple[int, float, float, float]]:
    """(width, depth, us, overlap_us) of each target forward that overlapped the producer's span."""
    start, end = producer_span_us(native.producer)
    for t0, us, width, depth in _target_forwards(native):
        overlap = min(t0 + us, end) - max(t0, start)
        if overlap > 0:
            yield width, depth, us, overlap


def after_producer(runs: Sequence[NativeLanes], costs: CostTable) -> AfterProducer | None:
    """The target's forwards that began after the producer's span in native AS2D decodes (`AfterProducer`), by width:
    each forward's time and the host work after it (to the next target forward's plan, its alignment search left to
    `align_s`; the last forward's alone) against its solo work, the price (the forward and, but for the last, its host
    work) times the target-only decode's speed beside it (`solo_factor`). None when no forward ran after a span."""
    sums: dict[int, list[float]] = {}
    for run in runs:
        k = solo_factor(run.solo_ops, costs)
        _, end = producer_span_us(run.producer)
        targets = [op for op in run.ops if op["model"] == "target"]
        for op, following in zip(targets, [*targets[1:], None], strict=True):
            t0 = float(_field(op, "t_us", "a target op"))
            if t0 < end:
                continue
            width, us = int(op["width"]), float(op["us"])
            solo = costs.cost(width, float(op["depth"]))
            if following is not None:
                search = float(following.get("plan_us", 0.0)) if following.get("searched") else 0.0
                us = max(float(_field(following, "t_us", "a target op")) - search - t0, us)
                solo += costs.host(width)
            acc = sums.setdefault(width, [0.0, 0.0, 0])
            acc[0] += us / 1e6
            acc[1] += k * solo
            acc[2] += 1
    return AfterProducer({w: (v[0], v[1], int(v[2])) for w, v in sorted(sums.items())}) if sums else None


def block_contention(runs: Sequence[NativeLanes], costs: CostTable, cosched: CoSchedule) -> BlockContention:
    """The target's ratio the block's `runs` realised, pooled as a profile pools its overheads decodes
    (`decode_contention`), in place of `cosched`'s; the producer keeps its price (the decodes' ratio where the
    profile holds one, else the cells'). Nothing is replaced when no forward ran wholly beside the producer."""
    met = decode_contention(runs, costs, cosched)
    if met is None:
        return BlockContention(cosched, None, None, 0)
    met = producer_as(met, cosched.decode)
    return BlockContention(replace(cosched, decode=met), met.priced, met.realised, met.forwards)


def producer_as(met: DecodeContention, old: DecodeContention | None) -> DecodeContention:
    """`met` with the producer's ratios `old` prices (none without `old`)."""
    return met if old is None else replace(met, **{name: getattr(old, name) for name in PRODUCER_FIELDS})


@dataclass(frozen=True)
class ProducerContention:
    """The producer's ratio as native AS2D decodes met it, pooled and by the class of target forward it ran
    beside (`producer_contention`)."""

    realised: float
    priced: float
    """The cells' `rho_drafter` for the same forwards, weighted by their overlap."""
    forwards: int
    single: float | None
    """Over the producer forwards that overlapped single-token steps most (None: fewer than CLASS_FORWARDS)."""
    single_forwards: int
    verify: float | None
    """Over those that overlapped verifications most (None: fewer than CLASS_FORWARDS)."""
    verify_forwards: int


def producer_contention(runs: Sequence[NativeLanes], drafter_costs: CostTable,
                        cosched: CoSchedule) -> ProducerContention | None:
    """The producer's co-scheduling ratio as native AS2D decodes met it (docs/METHODS.md §4.3 Co-scheduling
    ratios, "As a decode meets it"), pooled over every producer forward that overlapped a target forward, by
    processor sharing as replay prices it: a forward of `d` microseconds that overlapped the target for `o` of
    them did solo work `(d - o) + o / rho`, its solo work being the profile's CD(1, depth). Unlike the target's, a
    producer forward partly beside the target is kept: the target runs nearly without pause, so leaving out the
    forwards that straddle its boundaries would keep the shorter, less slowed ones. Each forward also counts
    towards the class (single-token step, verification) of the target forward it overlapped most, whose ratio
    replay prices beside that class. None with fewer than CLASS_FORWARDS such forwards, a run without its drafter
    prompt, or a ratio that is no slowdown a profile may hold (a pooled denominator <= 0, above MAX_RHO)."""
    sums = {True: [0.0, 0.0, 0], False: [0.0, 0.0, 0]}  # beside single-token steps? -> [overlap, solo, forwards]
    priced = 0.0
    for run in runs:
        if run.drafter_prompt is None:
            return None
        spans = list(_target_forwards(run))
        steps = zip(run.producer.get("step_start_us", []), run.producer.get("step_us", []), strict=True)
        for s, (start, end) in enumerate(steps):
            beside = [(min(end, t0 + us) - max(start, t0), width, depth) for t0, us, width, depth in spans
                      if t0 < end and start < t0 + us]
            if not beside:
                continue
            o = sum(part for part, _, _ in beside)
            acc = sums[max(beside)[1] == 1]
            acc[0] += o
            acc[1] += 1e6 * drafter_costs.cost(1, run.drafter_prompt + s) - (end - start - o)
            acc[2] += 1
            priced += sum(part * cosched.ratios(width, depth)[1] for part, width, depth in beside)
    overlap, solo, forwards = (sum(acc[i] for acc in sums.values()) for i in range(3))
    if forwards < CLASS_FORWARDS or solo <= 0 or overlap <= 0 or overlap / solo > MAX_RHO:
        return None

    def by_class(single: bool) -> tuple[float | None, int]:
        o, work, n = sums[single]
        ok = n >= CLASS_FORWARDS and work > 0 and 0 < o / work <= MAX_RHO
        return (o / work if ok else None), int(n)

    return ProducerContention(overlap / solo, priced / overlap, int(forwards), *by_class(True), *by_class(False))


def relative_pace(run: NativeLanes, costs: CostTable, drafter_costs: CostTable) -> float | None:
    """ln(the producer's forwards' time over their price) less ln(the target's forwards' time over theirs) in one
    native AS2D decode: how much slower the producer ran against the target than priced (None: no forward in a lane,
    or no drafter prompt recorded)."""
    targets = list(_target_forwards(run))
    steps = list(zip(run.producer.get("step_start_us", []), run.producer.get("step_us", []), strict=True))
    if run.drafter_prompt is None or not targets or not steps:
        return None
    producer_us = sum(float(end) - float(start) for start, end in steps)
    depths = run.drafter_prompt + np.arange(len(steps), dtype=np.float64)
    producer_price = 1e6 * float(drafter_costs.costs(np.ones(len(steps), dtype=np.int64), depths).sum())
    target_us = sum(us for _, us, _, _ in targets)
    target_price = 1e6 * float(costs.costs(np.array([w for _, _, w, _ in targets]),
                                           np.array([d for _, _, _, d in targets])).sum())
    if min(producer_us, producer_price, target_us, target_price) <= 0:
        return None
    return math.log(producer_us / producer_price) - math.log(target_us / target_price)


def pace_scatter(runs: Sequence[NativeLanes], costs: CostTable, drafter_costs: CostTable) -> tuple[float, int] | None:
    """(sigma, degrees of freedom): how far the producer's pace scatters against the target's from one decode of a
    window to the next (docs/METHODS.md §5.2 The two-lane AS2D simulation, "The pace scatter"): the pooled
    standard deviation of `relative_pace` within each window's decodes, its degrees of freedom the decodes less the
    windows. Within a window, so that what a window's own drafts and widths do to the pace stays out, and a price
    off by a constant factor cancels. None with fewer than 2 degrees of freedom."""
    by_window: dict[str, list[float]] = {}
    for run in runs:
        pace = relative_pace(run, costs, drafter_costs)
        if run.window_id is not None and pace is not None:
            by_window.setdefault(run.window_id, []).append(pace)
    squares, freedom = 0.0, 0
    for paces in by_window.values():
        mean = sum(paces) / len(paces)
        squares += sum((p - mean) ** 2 for p in paces)
        freedom += len(paces) - 1
    return None if freedom < 2 else (math.sqrt(squares / freedom), freedom)


def decode_contention(runs: Sequence[NativeLanes], costs: CostTable, cosched: CoSchedule,
                      drafter_costs: CostTable | None = None) -> DecodeContention | None:
    """The target's ratio as native AS2D decodes met it, pooled over every run's target forwards that ran
    wholly inside the producer's span (their time over their solo work, the profile's price times the
    target-only decodes' speed), and per width class (single-token steps, verifications) where the class
    had CLASS_FORWARDS of them, against the ratio `cosched` prices for the same forwards (docs/METHODS.md
    §4.3 Co-scheduling ratios, "As a decode meets it"). A forward half beside the producer is left out: its
    solo part, slowed by anything else, would be charged to the overlap, which a short decode on a loaded
    device can drive towards a zero denominator. None when no forward ran wholly beside the producer, or
    when the ratio is no slowdown a profile may hold; a ratio below 1 is priced as 1 and kept in
    `below_one` (a lane runs no faster beside the other). With `drafter_costs`, the producer's ratio
    beside it (`producer_contention`), the same way, and the producer's pace scatter (`pace_scatter`). Always, the
    target's ratio alone after the producer's span (`after_producer`)."""
    sums = {True: [0.0, 0.0, 0], False: [0.0, 0.0, 0]}  # single-token? -> [time, solo work, forwards]
    priced = 0.0
    for run in runs:
        k = solo_factor(run.solo_ops, costs)
        for width, depth, us, overlap in _beside_producer(run):
            if overlap < us:
                continue
            acc = sums[width == 1]
            acc[0] += us
            acc[1] += k * 1e6 * costs.cost(width, depth)
            acc[2] += 1
            priced += us * cosched.ratios(width, depth)[0]
    spent, solo, forwards = (sum(acc[i] for acc in sums.values()) for i in range(3))
    if spent <= 0 or solo <= 0 or not 0 < spent / solo <= MAX_RHO:
        return None
    below_one: dict[str, float] = {}

    def floored(name: str, ratio: float) -> float:
        if ratio < 1.0:
            below_one[name] = ratio
        return max(ratio, 1.0)

    def by_class(single: bool) -> tuple[float | None, int]:
        time, work, n = sums[single]
        ok = n >= CLASS_FORWARDS and work > 0 and 0 < time / work <= MAX_RHO
        return (floored(DECODE_CLASSES[0 if single else 1], time / work) if ok else None), int(n)

    pooled = floored("realised", spent / solo)
    decode = DecodeContention(pooled, priced / spent, int(forwards), *by_class(True), *by_class(False))
    pace = None if drafter_costs is None else pace_scatter(runs, costs, drafter_costs)
    if pace is not None:
        decode = replace(decode, pace_sigma=pace[0], pace_pairs=pace[1])
    decode = replace(decode, after=after_producer(runs, costs))
    met = None if drafter_costs is None else producer_contention(runs, drafter_costs, cosched)
    if met is not None:  # floored before below_one is handed over
        producer = floored("producer", met.realised)
        single, verify = ((None if r is None else floored(name, r))
                          for name, r in zip(PRODUCER_CLASSES, (met.single, met.verify), strict=True))
        decode = replace(decode, producer=producer, producer_priced=met.priced,
                         producer_forwards=met.forwards, producer_single=single,
                         producer_single_forwards=met.single_forwards, producer_verify=verify,
                         producer_verify_forwards=met.verify_forwards)
    return replace(decode, below_one=below_one)


def producer_at_one(cosched: CoSchedule) -> CoSchedule:
    """`cosched` with the producer's ratio 1 at every width and depth (a timeline on the native clock has nothing
    to stretch); the target's priced as `cosched` prices it, a decode's ratio included."""
    ones = {w: np.ones(len(cosched.depths)) for w in cosched.rho_drafter}
    decode = None if cosched.decode is None else replace(cosched.decode, producer=None, producer_single=None,
                                                         producer_verify=None)
    return replace(cosched, rho_drafter=ones, decode=decode)


def native_lane(native: NativeLanes, batch: int, cosched: CoSchedule) -> ProducerLane:
    """The producer as the native run realised it, for `simulate_as2d`: a timeline on the decode clock
    (the lanes' work advances with their time when the producer's ratio is 1) whose batches are
    visible at the native publication times, starting at the producer thread's start."""
    producer = native.producer
    start, end = producer_span_us(producer)
    publish_us = [float(v) for v in _field(producer, "publish_us", "the producer record")]
    counts = [int(v) for v in _field(producer, "publish_count", "the producer record")]
    steps = [int(v) for v in _field(producer, "publish_step", "the producer record")]
    if not len(publish_us) == len(counts) == len(steps):
        raise SpecbenchError("the producer record's publish_us, publish_count and publish_step differ in length")
    n = counts[-1] if counts else 0
    if counts != [min((i + 1) * batch, n) for i in range(len(counts))]:
        raise SpecbenchError(f"the producer record's publish_count {counts} is not batches of {batch}")
    starts = np.array([float(v) for v in producer.get("step_start_us", [])])
    cum = np.concatenate([[0.0], np.maximum(starts - start, 0.0), [end - start]]) / 1e6
    timeline = ProducerTimeline(cum, (np.array(publish_us) - start) / 1e6, np.array(steps, dtype=np.int64), batch, n)
    return ProducerLane(timeline, start / 1e6, cosched)


@dataclass(frozen=True)
class Substituted:
    """One native run's substitutions into one window's AS2D replay."""

    contention_s: float
    """Replay's decode seconds with the block's realised contention."""
    publication_s: float
    """... and the run's producer timeline besides."""


def substituted_replays(trace: WindowTrace, cap: int, profile: DeviceProfile, config: As2dConfig,
                        native: NativeLanes, contended: BlockContention) -> Substituted:
    """Replay a window with its block's realised contention (`block_contention`; at the mean over the pace scatter
    where the profile measured one, as the validation prices it), then also with one native run's publications
    (that run's own pace: one timeline): `simulate_as2d` with substituted inputs (module docstring)."""
    priced = priced_lane(trace, profile, config)
    contention = replace(priced, cosched=contended.cosched)
    publication = native_lane(native, config.batch, producer_at_one(contended.cosched))
    return Substituted(expected_as2d(trace, cap, profile, config, lane=contention)[0].decode_s,
                       simulate_as2d(trace, cap, profile, config, lane=publication)[0].decode_s)


@dataclass(frozen=True)
class WindowReplays:
    """One (block, window) of an AS2D configuration: native's speedups and replay's under each substitution."""

    block: int
    window_id: str
    native: tuple[float, float]
    """Na's and Nb's speedups over the target-only decode beside each."""
    priced: float
    """Replay's speedup as the validation prices it."""
    contention: tuple[float, float]
    """Replay's speedup with Na's, then Nb's realised contention."""
    publication: tuple[float, float]
    """Replay's speedup with Na's, then Nb's realised contention and publications."""


@dataclass(frozen=True)
class PartBias:
    part: Part
    factor: float
    """Geometric mean over the windows of this part's ratio (TOTAL: replay as priced over native)."""
    interval: Interval | None
    """Its 90% Student t interval over the blocks' means (None with one block)."""
    replay_bias: float | None
    """The bias of the replay with the substitutions up to this part (None for REMAINS, which is the last one's)."""
    replay_interval: Interval | None
    excess_pct: float | None = None
    """The excess error E of that replay (`excess_errors`; None for REMAINS)."""
    excess_upper_pct: float | None = None
    """Its one-sided 95% upper bound (None with one block)."""


_PARTS = {Part.TOTAL: (1, 0, 0), Part.CONTENTION: (1, -1, 0), Part.PUBLICATION: (0, 1, -1), Part.REMAINS: (0, 0, 1)}
"""Each part on the mean log biases of the three replays (priced, + contention, + publications)."""
_REPLAY = {Part.TOTAL: 0, Part.CONTENTION: 1, Part.PUBLICATION: 2}


def excess_errors(run_errors: np.ndarray, blocks: Sequence[int]) -> list[tuple[float, float | None]]:
    """Per replay, the excess error E and its upper bound (percent) as `fidelity.fidelity_stats` takes them, from
    an (n, replays, 2) array of each run's log error (ln replay − ln N, for Na then Nb; a per-run substitution
    replays each run on its own, `fidelity.excess_terms`). Where a substitution takes a run's own realised input,
    F0 is measured on what that replay leaves of each run, so the noise it explains leaves both F1 and F0."""
    terms = excess_terms(run_errors[:, :, 0], run_errors[:, :, 1])
    point = terms.mean(axis=0)
    groups = sorted(set(blocks))
    upper: list[float | None] = [None] * terms.shape[1]
    if len(groups) >= 2:
        means = np.stack([terms[[b == g for b in blocks]].mean(axis=0) for g in groups])
        upper = [root_pct(u) for u in point + t_halfwidths(means, ERROR_LEVEL, one_sided=True)]
    return [(root_pct(p), u) for p, u in zip(point, upper, strict=True)]


def decompose(windows: Sequence[WindowReplays]) -> list[PartBias]:
    """The parts of the speedup bias, each with the validation's bias interval: Student t over the blocks'
    mean log values (`fidelity.t_halfwidths`), centred on the mean over every window."""
    if not windows:
        raise ValueError("no windows")
    values = np.array([(*w.native, w.priced, *w.contention, *w.publication) for w in windows], dtype=np.float64)
    if np.any(values <= 0) or not np.all(np.isfinite(values)):
        raise ValueError("a decomposition needs positive finite speedups")
    logs = np.log(values)
    native = (logs[:, 0] + logs[:, 1]) / 2
    # per window, replay and run: as priced against both runs, then each substitution's replay of each run
    errors = np.stack([logs[:, [2, 2]], logs[:, 3:5], logs[:, 5:7]], axis=1) - logs[:, None, 0:2]
    excess = excess_errors(errors, [w.block for w in windows])
    # per window, each replay's log bias; a per-run substitution is the mean of Na's and Nb's
    bias = np.stack([logs[:, 2] - native, (logs[:, 3] + logs[:, 4]) / 2 - native,
                     (logs[:, 5] + logs[:, 6]) / 2 - native], axis=1)
    blocks = sorted({w.block for w in windows})
    point = bias.mean(axis=0)
    # a part is a fixed combination of the three replays' log biases: its block means are that of theirs
    means = np.stack([bias[[w.block == b for w in windows]].mean(axis=0) for b in blocks])

    def interval(weights: tuple[int, ...]) -> Interval | None:
        if len(blocks) < 2:
            return None
        combined = np.array(weights, dtype=np.float64)
        half = float(t_halfwidths((means @ combined)[:, None], BIAS_LEVEL)[0])
        centre = float(point @ combined)
        return Interval(math.exp(centre - half), math.exp(centre + half))

    out = []
    for part, weights in _PARTS.items():
        replay = _REPLAY.get(part)
        unit = tuple(int(i == replay) for i in range(3))
        out.append(PartBias(part, math.exp(float(point @ np.array(weights, dtype=np.float64))), interval(weights),
                            None if replay is None else math.exp(float(point[replay])),
                            None if replay is None else interval(unit),
                            *((None, None) if replay is None else excess[replay])))
    return out
