"""Does replay predict the device? The statistics of `specbench validate` (docs/METHODS.md §7.9 Validation: does
replay predict the device?).

A validation runs blocks. In a block every (window, configuration) is decoded twice, `Na`
then `Nb`, each a pass over the block's windows (`--repeats` passes of each, a run's value over
all of its), right after one profile refresh and right before another, and replay prices the
block from the mean of its two refreshes. An observation is one (block, window,
configuration) with three values of one metric: replay's and the two native runs'. The
metric is a speedup over target-only (the native one measured against the target-only
decode beside it) or a throughput in tokens/s.

Errors are in log space, in percent (100 × ln(x/y), within 0.1 point of the relative
error in percent for errors below 5%), so that a ratio and its inverse err alike:

* `F0`, the floor: the RMS of `ln Na − ln Nb` — what two native runs of one block disagree by;
* `F1`: the RMS of replay against each single run;
* the excess error `E = sqrt(max(0, F1² − F0²/2))`: a single run's own noise σ² enters `F1²`
  once, but `ln Na − ln Nb` holds two runs' noise, so `F0² = 2σ²`. Subtracting `F0²` itself
  would remove the noise twice and understate replay's error;
* the bias `b`: the geometric mean of replay over native (the mean of Na and Nb in log space).

Windows decoded in one block share the host's state, so they are not independent: the block
is the unit an interval counts. Each statistic is a mean over observations of one term
(`(ln Na − ln Nb)²` for F0², the mean squared error against the two runs for F1², their
difference for E², `ln replay − (ln Na + ln Nb)/2` for ln b), so each gets a Student t
interval over the blocks' own means of that term, with blocks − 1 degrees of freedom,
centred on the pooled value. A percentile bootstrap over whole blocks covers far less than
its level with few blocks: with two it is the range of the two block means, which holds the
true mean half the time, not 90%. The verdict is an equivalence test: "within ±X%" only when
the 90% interval of `b` lies inside ±X% and the upper 95% bound of `E` is below the error bound.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy import stats

from specbench.schemas.validation import ObservationRecord, SummaryRecord

BIAS_LEVEL = 0.90
"""Two-sided level of the bias interval (an equivalence test at 5% on each side)."""
ERROR_LEVEL = 0.95
"""One-sided level of the excess error's upper bound."""
MOST_BLOCKS_PROJECTED = 200
"""The largest validation `blocks_needed` looks for (beyond it: none would show the bounds in practice)."""

_F0, _F1, _E, _BIAS = range(4)
"""Columns of `_terms`: what F0², F1², E² and ln b are the means of."""


def _terms(logs: np.ndarray) -> np.ndarray:
    """(n, 4) per observation of an (n, 3) array of ln(replay), ln(Na), ln(Nb): (ln Na − ln Nb)², the
    mean squared log error of replay against the two runs, their difference F1² − F0²/2 (whose mean is E²:
    a run's noise σ² enters F1² once, F0² twice), and the log bias against the runs' log mean."""
    lr, la, lb = logs[:, 0], logs[:, 1], logs[:, 2]
    f0_sq = (la - lb) ** 2
    f1_sq = ((lr - la) ** 2 + (lr - lb) ** 2) / 2
    return np.stack([f0_sq, f1_sq, excess_terms(lr - la, lr - lb), lr - (la + lb) / 2], axis=1)


def excess_terms(error_a: np.ndarray, error_b: np.ndarray) -> np.ndarray:
    """Per observation, the term whose mean is E², from each run's log error (ln replay − ln N): F1² − F0²/2,
    which for errors x, y of the two runs is x·y. A run's noise is independent of the other's and leaves the
    product's mean; an error shared by both runs stays. A replay of each run on its own (a per-run substitution)
    is so judged against that run alone."""
    return error_a * error_b


def t_halfwidths(block_means: np.ndarray, level: float, one_sided: bool = False) -> np.ndarray:
    """Per column of a (blocks, m) array of per-block means (blocks >= 2): the half-width of a Student t
    interval for their mean at `level` (two-sided, or a one-sided bound), t(blocks − 1) × sd / √blocks."""
    return t_factor(block_means.shape[0], level, one_sided) * block_means.std(axis=0, ddof=1)


def t_factor(blocks: int, level: float, one_sided: bool = False) -> float:
    """t(blocks − 1) / √blocks at `level` (two-sided, or a one-sided bound): times the standard deviation of
    `blocks` block means, the half-width of a Student t interval for their mean."""
    quantile = level if one_sided else 1 - (1 - level) / 2
    return float(stats.t.ppf(quantile, blocks - 1)) / math.sqrt(blocks)


def _block_logs(observations: Sequence[ObservationRecord]) -> tuple[np.ndarray, dict[int, np.ndarray]]:
    """The (n, 3) array of ln(replay), ln(Na), ln(Nb), and its rows per block (in block order)."""
    values = np.array([(o.replay, o.native_a, o.native_b) for o in observations], dtype=np.float64)
    if np.any(values <= 0) or not np.all(np.isfinite(values)):
        raise ValueError("fidelity needs positive finite values")
    logs = np.log(values)
    return logs, {b: logs[[o.block == b for o in observations]] for b in sorted({o.block for o in observations})}


def root_pct(mean_square: float) -> float:
    """100 × the root of a mean square of log errors (a negative one, E² below 0: 0)."""
    return 100 * math.sqrt(max(0.0, mean_square))


def fidelity_stats(observations: Sequence[ObservationRecord], bias_bound_pct: float, error_bound_pct: float,
                   past_allowance: int = 0) -> SummaryRecord:
    """The summary of one (device, configuration, metric)'s observations: F0, F1, E and the bias, their
    intervals over blocks (None with one block), and the verdict against the bounds (in percent), which names
    the `past_allowance` of its blocks kept past their drift allowance."""
    if not observations:
        raise ValueError("no observations")
    device, config, metric = observations[0].device, observations[0].config, observations[0].metric
    if any((o.device, o.config, o.metric) != (device, config, metric) for o in observations):
        raise ValueError("observations of more than one (device, configuration, metric)")
    logs, groups = _block_logs(observations)
    point = _terms(logs).mean(axis=0)
    f0_ends: tuple[float | None, float | None] = (None, None)
    f1_ends = bias_ends = f0_ends
    excess_upper: float | None = None
    needed: int | None = None
    if len(groups) >= 2:
        means = np.stack([_terms(rows).mean(axis=0) for rows in groups.values()])
        two, one = t_halfwidths(means, BIAS_LEVEL), t_halfwidths(means, ERROR_LEVEL, one_sided=True)
        spread = means.std(axis=0, ddof=1)
        needed = blocks_needed(float(point[_BIAS]), float(spread[_BIAS]), float(point[_E]), float(spread[_E]),
                               bias_bound_pct, error_bound_pct)
        f0_ends = (root_pct(point[_F0] - two[_F0]), root_pct(point[_F0] + two[_F0]))
        f1_ends = (root_pct(point[_F1] - two[_F1]), root_pct(point[_F1] + two[_F1]))
        excess_upper = root_pct(point[_E] + one[_E])
        bias_ends = (math.exp(point[_BIAS] - two[_BIAS]), math.exp(point[_BIAS] + two[_BIAS]))
    unjudged = SummaryRecord(device, config, metric, len(groups), len(observations), root_pct(point[_F0]), *f0_ends,
                             root_pct(point[_F1]), *f1_ends, root_pct(point[_E]), excess_upper, math.exp(point[_BIAS]),
                             *bias_ends, bias_bound_pct, error_bound_pct, verdict="", past_allowance=past_allowance,
                             blocks_needed=needed)
    return replace(unjudged, verdict=verdict(unjudged))


def blocks_needed(log_bias: float, bias_spread: float, excess_sq: float, excess_spread: float,
                  bias_bound_pct: float, error_bound_pct: float) -> int | None:
    """The fewest blocks whose intervals would show both bounds if the pooled log bias and E² (`excess_sq`) stayed
    as they are and the blocks' means of their terms scattered as these did (`*_spread`: their standard
    deviations over blocks): the bias's 90% interval inside ±`bias_bound_pct` and E's upper 95% bound below
    `error_bound_pct`. None when no count up to MOST_BLOCKS_PROJECTED would (a point itself at or beyond its
    bound cannot be shown by more blocks). A projection: the next blocks' spread and bias are the host's."""
    low, high = math.log(1 - bias_bound_pct / 100), math.log(1 + bias_bound_pct / 100)
    error_sq = (error_bound_pct / 100) ** 2
    if not (low < log_bias < high and excess_sq < error_sq):
        return None
    for n in range(2, MOST_BLOCKS_PROJECTED + 1):
        bias_half = t_factor(n, BIAS_LEVEL) * bias_spread
        error_half = t_factor(n, ERROR_LEVEL, one_sided=True) * excess_spread
        if low <= log_bias - bias_half and log_bias + bias_half <= high and excess_sq + error_half < error_sq:
            return n
    return None


def block_biases(observations: Sequence[ObservationRecord]) -> dict[int, float]:
    """Per block, the bias of its observations alone (geometric mean of replay/native over its windows and runs,
    as `fidelity_stats` pools them): an error the model makes holds in every block, the host's drift moves
    between them."""
    blocks = _block_logs(observations)[1]
    return {block: math.exp(float(_terms(logs)[:, _BIAS].mean())) for block, logs in blocks.items()}


def verdict(summary: SummaryRecord) -> str:
    """In words, against the summary's own bounds: "within ±X%" when the equivalence test shows it, else what
    was shown and what stood in the way."""
    low, high, upper = summary.bias_low, summary.bias_high, summary.excess_upper_pct
    if low is None or high is None or upper is None:
        return f"not shown: {summary.blocks} block (an interval needs at least 2)" + _past_allowance(summary)
    bias_bound_pct, error_bound_pct = summary.bias_bound_pct, summary.error_bound_pct
    shown_bias = 100 * max(abs(low - 1), abs(high - 1))
    bias_ok = 1 - bias_bound_pct / 100 <= low and high <= 1 + bias_bound_pct / 100
    error_ok = upper < error_bound_pct
    if bias_ok and error_ok:
        return (f"within ±{bias_bound_pct:g}%: bias interval [{low:.3f}, {high:.3f}], excess error "
                f"< {upper:.1f}% (bound {error_bound_pct:g}%)") + _past_allowance(summary)
    why = []
    if not bias_ok:
        why.append(f"bias interval [{low:.3f}, {high:.3f}] crosses ±{bias_bound_pct:g}% (shown: ±{shown_bias:.1f}%)")
    if not error_ok:
        why.append(f"excess error up to {upper:.1f}% (bound {error_bound_pct:g}%)")
    return ("not shown: " + "; ".join(why) + f"; floor F0 = {summary.f0_pct:.1f}%" + _projection(summary)
            + _past_allowance(summary))


def _projection(summary: SummaryRecord) -> str:
    """What more blocks would show, at the bias and the blocks' spread measured so far."""
    if summary.blocks_needed is not None:
        return f"; at this bias and spread about {summary.blocks_needed} blocks would show both bounds"
    if not 1 - summary.bias_bound_pct / 100 < summary.bias < 1 + summary.bias_bound_pct / 100:
        return (f"; the bias {summary.bias:.3f} itself is at or beyond ±{summary.bias_bound_pct:g}%: more blocks "
                "would not show it")
    if summary.excess_pct >= summary.error_bound_pct:
        return (f"; E = {summary.excess_pct:.1f}% itself is at or beyond {summary.error_bound_pct:g}%: more blocks "
                "would not show it")
    return f"; at this spread more than {MOST_BLOCKS_PROJECTED} blocks would be needed"


def _past_allowance(summary: SummaryRecord) -> str:
    """The verdict's note of blocks pooled although the void rule judged them disturbed ("" when none)."""
    if not summary.past_allowance:
        return ""
    return (f"; {summary.past_allowance} of {summary.blocks} blocks kept past their drift allowance "
            "(--max-voids spent)")


@dataclass(frozen=True)
class BlockOrder:
    """The order a block decodes in: drafter groups in `groups` order, each group's methods in
    `methods[group]` order, each paired with a target-only decode, Na forward and Nb reversed."""

    block: int
    device: str
    groups: tuple[str, ...]
    methods: Mapping[str, tuple[str, ...]]
    seed: int


def block_order(seed: int, block: int, device: str, groups: Mapping[str, Sequence[str]]) -> BlockOrder:
    """A random order of groups and of each group's methods, reproducible from (seed, block, device)."""
    rng = random.Random(f"{seed}/{block}/{device}")  # a str seed is hashed with sha512: stable across runs
    names = sorted(groups)
    rng.shuffle(names)
    methods = {}
    for name in names:
        mine = list(groups[name])
        rng.shuffle(mine)
        methods[name] = tuple(mine)
    return BlockOrder(block, device, tuple(names), methods, seed)


def paired_slots(methods: Sequence[str], target: str) -> list[str]:
    """The decode slots of one run: target-only before each method, [t, m1, t, m2, ...]. Run
    forward (Na) each method follows its target-only decode; reversed (Nb, the runner's
    `alternate`) it precedes it: the pairs are ABBA."""
    out = []
    for method in methods:
        out += [target, method]
    return out


def run_order(slots: Sequence[str], reverse: bool) -> list[tuple[int, str]]:
    """A run's decodes of one window in the order they run, as (slot, configuration) with the slot numbered as
    in `slots` (Na's order): Na runs them as paired, Nb (`reverse`) the other way round."""
    ordered = list(enumerate(slots))
    return ordered[::-1] if reverse else ordered


def partner_slot(slot: int) -> int:
    """The target-only slot paired with the method in `slot` (odd) of `paired_slots`."""
    return slot - 1


PROBE_SPREADS = 3.0
"""`validate --probe-spreads`: a window's probes may move this many spreads from the block's reference. A probe
that nothing moved deviates from its group's level by about one spread (a robust standard deviation), and from
the reference (a median of 4 or more refresh probes, itself off by about 0.6 spread) by about 1.2; a move
counts only when both probes around a window moved the same way, which normal noise does beyond 3 spreads about
once in 3000 windows (a block of some tens of windows: one block in tens, or fewer). A slowdown that lasts a
window (a throttled phone, a competing process) moves both its probes by as much as it slows the forwards."""
ROBUST_SIGMA = 1.4826
"""The median absolute deviation of normal samples times this is their standard deviation."""


@dataclass(frozen=True)
class Drift:
    """A block's decisive move: the window whose probes moved most from the block's reference for its allowance."""

    move_pct: float
    allowance_pct: float
    where: str
    """The model and the window, e.g. "drafter small in decode:small after w3" ("none": no window)."""

    @property
    def voids(self) -> bool:
        return self.move_pct > self.allowance_pct


def probe_spread_pct(groups: Sequence[Sequence[float]]) -> float:
    """The scatter of probes taken under one condition, in percent: 1.4826 x the median over every probe of
    its relative deviation from its own group's median (a shift between groups does not widen it); 0
    without probes."""
    deviations = [abs(v / float(np.median(g)) - 1) for g in groups for v in g]
    return 100 * ROBUST_SIGMA * float(np.median(deviations)) if deviations else 0.0


def sustained_moves_pct(reference: float, probes: Sequence[float]) -> list[float]:
    """Per window of a decode job (between two consecutive probes): how far both probes around it moved
    from `reference` the same way, the smaller of the two moves, in percent (0 when they moved apart:
    one disturbed probe is noise, a slowdown that lasts the window moves both)."""
    moves = [v / reference - 1 for v in probes]
    return [100 * min(abs(a), abs(b)) if a * b > 0 else 0.0 for a, b in zip(moves, moves[1:], strict=False)]


def model_drift(refresh: Sequence[float], jobs: Mapping[str, Sequence[tuple[float, str]]], threshold_pct: float,
                spreads: float) -> Drift:
    """One model's decisive window in a block (docs/METHODS.md §7.9 Validation: does replay predict the
    device?). `refresh`: its probes around the block's refreshes, whose median is the reference (the speed
    the replay's prices were measured at); `jobs`: per decode job, its probes in order, each with the
    position it was taken at. Allowance: the larger of `threshold_pct` and `spreads` x `probe_spread_pct`
    of the refresh probes and each job's probes as groups."""
    if not refresh:
        return Drift(0.0, threshold_pct, "none")
    reference = float(np.median(refresh))
    allowance = max(threshold_pct, spreads * probe_spread_pct([refresh, *([v for v, _ in p] for p in jobs.values())]))
    worst = Drift(0.0, allowance, "none")
    for job, probes in jobs.items():
        for move, (_, where) in zip(sustained_moves_pct(reference, [v for v, _ in probes]), probes[1:], strict=True):
            if move > worst.move_pct:
                worst = Drift(move, allowance, f"{job} {where}")
    return worst


@dataclass(frozen=True)
class OpTiming:
    config: str
    """The configuration whose decode ran the forward."""
    model: str
    width: int
    depth: int
    us: float
    """What the forward took in the native decode."""
    priced_us: float
    """What the block's refreshed profile charges for that width at that depth (the forward alone)."""
    host_us: float | None = None
    """The decode's host work after it (`pricing.timed_forwards`; None: the runner recorded no op starts)."""


def op_comparison(ops: Sequence[OpTiming], depth_bins: Sequence[int]) -> list[dict]:
    """Per configuration × model × width × depth bin ([bins[i], bins[i+1]) ...): forwards, the
    decode's mean and median time, the profile's mean price, and mean decode / mean price."""
    edges = sorted(depth_bins)
    groups: dict[tuple[str, str, int, int], list[OpTiming]] = {}
    for op in ops:
        low = max([e for e in edges if e <= op.depth], default=edges[0])
        groups.setdefault((op.config, op.model, op.width, low), []).append(op)
    rows = []
    for (config, model, width, low), mine in sorted(groups.items()):
        us = np.array([o.us for o in mine])
        priced = np.array([o.priced_us for o in mine])
        rows.append({"config": config, "model": model, "width": width, "depth_from": low, "forwards": len(mine),
                     "decode_mean_us": float(us.mean()), "decode_median_us": float(np.median(us)),
                     "profile_us": float(priced.mean()), "decode_over_profile": float(us.mean() / priced.mean())})
    return rows
