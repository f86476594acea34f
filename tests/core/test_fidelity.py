"""The statistics of `specbench validate` (core/fidelity.py), on cases computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.validation_coverage import simulated_validation
from specbench.core import fidelity
from specbench.core.fidelity import block_biases, fidelity_stats, verdict
from specbench.schemas.validation import Metric, ObservationRecord


def observation(block: int, window_id: str, replay: float, native_a: float, native_b: float) -> ObservationRecord:
    """An observation of one device, configuration and metric: the statistics see only these five values."""
    return ObservationRecord("local@split", "sd[W=5]", Metric.SPEEDUP, block, window_id, replay, native_a, native_b)


def test_point_statistics_by_hand():
    # one block: replay 1.1 against runs 1.0 and 1.2
    s = fidelity_stats([observation(0, "w", 1.1, 1.0, 1.2)], 3, 5)
    f0 = 100 * abs(math.log(1.0 / 1.2))
    f1 = 100 * math.sqrt((math.log(1.1) ** 2 + math.log(1.1 / 1.2) ** 2) / 2)
    assert s.f0_pct == pytest.approx(f0) and s.f1_pct == pytest.approx(f1)
    assert s.excess_pct == pytest.approx(math.sqrt(max(0.0, f1 ** 2 - f0 ** 2 / 2)))
    assert s.bias == pytest.approx(1.1 / math.sqrt(1.2))  # geometric mean of replay / native
    assert s.bias_low is None and s.bias_high is None and s.excess_upper_pct is None
    assert verdict(s).startswith("not shown: 1 block") and s.verdict == verdict(s)


def test_replay_that_equals_a_noisy_native_has_no_excess_error():
    """Replay at the true value, native runs true × noise: E removes the noise (F0²/2), not twice it."""
    rng = np.random.default_rng(3)
    obs = [observation(b, f"w{i}", 1.0, *np.exp(rng.normal(0, 0.05, 2))) for b in range(20) for i in range(10)]
    s = fidelity_stats(obs, 3, 5)
    assert s.f0_pct == pytest.approx(100 * 0.05 * math.sqrt(2), rel=0.1)
    assert s.excess_pct < 1.0 and s.f1_pct == pytest.approx(5.0, rel=0.1)


def test_each_blocks_bias_is_its_observations_pooled_alone():
    """Block 0: replay 1.1 against runs 1.0 and 1.0, and 1.2 against 1.0 and 1.2; block 1: 0.9 against 1.0 and
    1.0. Each block's bias is the geometric mean over its windows and runs, as the pooled bias is over all."""
    obs = [observation(0, "a", 1.1, 1.0, 1.0), observation(0, "b", 1.2, 1.0, 1.2), observation(1, "c", 0.9, 1.0, 1.0)]
    biases = block_biases(obs)
    assert list(biases) == [0, 1]
    assert biases[0] == pytest.approx(math.exp((math.log(1.1) + math.log(1.2) - math.log(1.2) / 2) / 2))
    assert biases[1] == pytest.approx(0.9)
    pooled = fidelity_stats(obs, 3, 5).bias
    assert pooled == pytest.approx((biases[0] ** 2 * biases[1]) ** (1 / 3))  # weighted by observations


def test_the_bias_interval_is_students_t_over_the_blocks_biases():
    """Block 0: one window at replay/native 1.1; block 1: three at 0.9. The blocks' log biases are ln 1.1 and
    ln 0.9; the interval is centred on the pooled bias (weighted by observations) and is t(1) at 95% times
    their standard deviation over √2: with two blocks, 6.31 standard errors each side."""
    obs = [observation(0, "a", 1.1, 1.0, 1.0)] + [observation(1, w, 0.9, 1.0, 1.0) for w in "bcd"]
    s = fidelity_stats(obs, 3, 5)
    centre = (math.log(1.1) + 3 * math.log(0.9)) / 4
    half = 6.313751514675 * abs(math.log(1.1) - math.log(0.9)) / math.sqrt(2) / math.sqrt(2)
    assert s.bias == pytest.approx(math.exp(centre))
    assert s.bias_low == pytest.approx(math.exp(centre - half))
    assert s.bias_high == pytest.approx(math.exp(centre + half))
    assert s.verdict.startswith("not shown: bias interval")


def test_the_excess_errors_bound_is_t_over_the_blocks_mean_squares():
    """E² is the mean of F1² − F0²/2 per observation: its one-sided 95% bound is t over the blocks' means of it."""
    obs = [observation(0, "a", 1.3, 1.0, 1.2), observation(0, "b", 1.1, 1.0, 1.0),
           observation(1, "c", 1.25, 1.1, 1.0), observation(2, "d", 0.8, 1.0, 0.9)]

    def term(o: ObservationRecord) -> float:
        lr, la, lb = math.log(o.replay), math.log(o.native_a), math.log(o.native_b)
        return ((lr - la) ** 2 + (lr - lb) ** 2) / 2 - (la - lb) ** 2 / 2

    per_block = [np.mean([term(o) for o in obs if o.block == b]) for b in range(3)]
    upper = np.mean([term(o) for o in obs]) + 2.919985580 * np.std(per_block, ddof=1) / math.sqrt(3)
    assert fidelity_stats(obs, 3, 5).excess_upper_pct == pytest.approx(100 * math.sqrt(upper))


@pytest.mark.parametrize("blocks", [2, 4])
def test_the_bias_interval_covers_the_true_bias_at_its_level(blocks):
    """Simulated validations whose replay is right on average: each block shares a host offset (sd 4%), each run
    its own noise (sd 8%). The 90% interval holds the true bias (1) in about 90% of them; the range of the blocks'
    biases, what a percentile bootstrap over two blocks spans, in about half of the two-block ones."""
    rng = np.random.default_rng(11)
    held = spanned = 0
    trials = 1000
    for _ in range(trials):
        obs = simulated_validation(rng, blocks, windows=12, block_sd=0.04, run_sd=0.08)
        s = fidelity_stats(obs, 3, 5)
        held += s.bias_low <= 1.0 <= s.bias_high
        per_block = block_biases(obs).values()
        spanned += min(per_block) <= 1.0 <= max(per_block)
    assert 0.86 <= held / trials <= 0.94
    if blocks == 2:
        assert 0.45 <= spanned / trials <= 0.6


def test_verdict_is_an_equivalence_test():
    tight = [observation(b, f"w{i}", 1.0 + 0.001 * ((b + i) % 3), 1.0, 1.0) for b in range(6) for i in range(4)]
    s = fidelity_stats(tight, 3, 5)
    assert verdict(s).startswith("within ±3%") and s.verdict == verdict(s)
    # biased by 2.5% with a spread that makes the interval cross +3%
    wide = [observation(b, "w", 1.025 + (0.02 if b % 2 else -0.02) * (b % 3), 1.0, 1.0) for b in range(6)]
    s = fidelity_stats(wide, 3, 5)
    assert s.bias_high > 1.03
    text = verdict(s)
    assert text.startswith("not shown") and "crosses ±3%" in text and "floor F0" in text


def _alternating(blocks: int, spread: float, centre: float = 1.0) -> list[ObservationRecord]:
    """A validation of `blocks` blocks (an even count) whose log biases alternate around ln `centre` with
    standard deviation `spread` over blocks, each block one window that both runs decode alike."""
    step = spread * math.sqrt((blocks - 1) / blocks)
    return [observation(b, "w", centre * math.exp(step if b % 2 else -step), 1.0, 1.0) for b in range(blocks)]


def test_blocks_needed_is_the_count_at_which_the_verdict_shows_the_bounds():
    # log biases ±s around 1 with s = 0.03: t(0.95, n − 1) × s / √n first falls below ln 1.03 at n = 5
    # (2.132 × 0.03 / √5 = 0.0286; at 4, 2.353 × 0.03 / 2 = 0.0353); E² is constant, so only the bias binds
    s = fidelity_stats(_alternating(2, 0.03), 3, 5)
    assert s.verdict.startswith("not shown") and s.blocks_needed == 5
    assert "about 5 blocks would show both bounds" in s.verdict
    # the same bias and spread over more blocks: shown at six, not at four
    assert fidelity_stats(_alternating(6, 0.03), 3, 5).verdict.startswith("within ±3%")
    assert fidelity_stats(_alternating(4, 0.03), 3, 5).verdict.startswith("not shown")


def test_no_count_of_blocks_shows_a_bias_beyond_its_bound():
    s = fidelity_stats(_alternating(4, 0.01, centre=1.04), 3, 5)
    assert s.blocks_needed is None
    assert "the bias 1.040 itself is at or beyond ±3%: more blocks would not show it" in s.verdict
    # each block: replay 8% above both runs on one window and 8% below on the other: unbiased, E = 8%
    far = [observation(b, w, 1.08 ** sign, 1.0, 1.0) for b in range(4) for w, sign in (("w1", 1), ("w2", -1))]
    s = fidelity_stats(far, 3, 5)
    assert s.blocks_needed is None and "itself is at or beyond 5%" in s.verdict


def test_block_order_is_seeded_random_and_recorded():
    groups = {"small": ["sd[W=5]", "sd[W=8]", "as2d[B=3]", "specasr"], "other": ["sd[W=5,other]"]}
    one = fidelity.block_order(1, 0, "local@split", groups)
    assert one == fidelity.block_order(1, 0, "local@split", groups)  # reproducible from the seed
    orders = {fidelity.block_order(1, b, "local@split", groups).methods["small"] for b in range(12)}
    assert len(orders) > 3  # differs between blocks
    assert sorted(one.methods["small"]) == sorted(groups["small"]) and set(one.groups) == set(groups)


def test_paired_slots_put_target_beside_every_method_abba():
    slots = fidelity.paired_slots(["m1", "m2"], "target")
    assert slots == ["target", "m1", "target", "m2"]
    forward, reverse = slots, list(reversed(slots))  # Na, and Nb as the runner's `alternate` runs it
    for i, name in enumerate(slots):
        if name != "target":
            partner = fidelity.partner_slot(i)
            assert slots[partner] == "target"
            assert forward.index("m1") - 1 == forward.index("target")  # Na: target first
            j = len(slots) - 1 - i  # Nb position of slot i; its partner runs right after it
            assert reverse[j] == name and reverse[j + 1] == "target"


def test_op_comparison_bins_by_depth():
    ops = [fidelity.OpTiming("target", "target", 1, d, us, 100.0) for d, us in ((0, 110.0), (10, 90.0), (70, 130.0))]
    rows = fidelity.op_comparison(ops, (0, 64))
    assert [(r["depth_from"], r["forwards"], r["decode_over_profile"]) for r in rows] == [(0, 2, 1.0), (64, 1, 1.3)]


def test_a_window_moves_only_when_both_its_probes_moved_the_same_way():
    # probes 110, 120, 90, 95 against 100: w0 (110, 120) moved 10%, w1 (120, 90) apart, w2 (90, 95) 5%
    assert fidelity.sustained_moves_pct(100.0, [110.0, 120.0, 90.0, 95.0]) == pytest.approx([10.0, 0.0, 5.0])


def test_probe_spread_is_the_scatter_within_groups():
    # deviations from each group's own median: 0, 0.1, 0.1 and 0, 0.05, 0.05: their median 0.05
    spread = fidelity.probe_spread_pct([[100.0, 110.0, 90.0], [300.0, 315.0, 285.0]])
    assert spread == pytest.approx(100 * 1.4826 * 0.05)
