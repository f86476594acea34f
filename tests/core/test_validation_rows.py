"""The pure pieces of `specbench validate` (app/validate.py): observations from paired decodes,
the block profile from two refreshes, and block drift, on cases computed by hand."""

from __future__ import annotations

import pytest

from specbench.app.validate import block_drift, merged_profile, observations
from specbench.schemas.validation import DecodeRecord, ProbeRecord

SD = "sd[W=5,drafter=small]"


def decode(run, slot, config, tokens, seconds, window="w", lossless=True):
    return DecodeRecord(0, 0, "dev@split", "small", run, slot, config, window, tokens, seconds, lossless, [])


def test_speedups_pair_each_method_with_its_own_target_decode():
    # Na = [target 2.0 s, sd 1.0 s]; Nb = [sd 1.5 s, target 2.5 s]; 10 tokens each
    decodes = [decode("a", 0, "target", 10, 2.0), decode("a", 1, SD, 10, 1.0),
               decode("b", 1, SD, 10, 1.5), decode("b", 0, "target", 10, 2.5)]
    replay = {("dev@split", "target", "w"): (10, 2.2), ("dev@split", SD, "w"): (10, 1.1)}
    obs = {(o.config, o.metric): o for o in observations(decodes, replay)}
    speedup = obs[(SD, "speedup")]
    assert (speedup.replay, speedup.native_a, speedup.native_b) == pytest.approx((2.0, 2.0, 2.5 / 1.5))
    throughput = obs[(SD, "throughput")]
    assert (throughput.replay, throughput.native_a, throughput.native_b) == pytest.approx((10 / 1.1, 10.0, 10 / 1.5))
    target = obs[("target", "throughput")]
    assert (target.native_a, target.native_b) == pytest.approx((5.0, 4.0))


def test_a_window_with_a_divergent_decode_is_left_out():
    decodes = [decode("a", 0, "target", 10, 2.0), decode("a", 1, SD, 0, 0.0, lossless=False),
               decode("b", 1, SD, 10, 1.5), decode("b", 0, "target", 10, 2.5)]
    replay = {("dev@split", "target", "w"): (10, 2.2), ("dev@split", SD, "w"): (10, 1.1)}
    assert observations(decodes, replay) == []


def test_block_profile_is_the_mean_of_its_refreshes():
    def costs(values):
        return {"depths": [0, 64], "seconds": {1: values, 2: [2 * v for v in values]}, "spread": {}, "repetitions": 5}

    full = {"target": {"costs": costs([1.0, 1.0]) | {"seconds": {1: [1.0, 1.0], 2: [2.0, 2.0], 3: [3.0, 3.0]}}},
            "drafters": [{"name": "small", "costs": costs([0.5, 0.5]), "cosched": {"kept": True}}], "notes": "n"}
    one = {"target": {"costs": costs([1.2, 1.4])}, "drafters": [{"name": "small", "costs": costs([0.6, 0.6])}]}
    two = {"target": {"costs": costs([1.0, 1.0])}, "drafters": [{"name": "small", "costs": costs([0.4, 0.8])}]}
    merged = merged_profile(full, [one, two])
    assert merged["target"]["costs"]["seconds"][1] == pytest.approx([1.1, 1.2])
    assert merged["target"]["costs"]["seconds"][3] == [3.0, 3.0]  # not refreshed: the full profile's
    assert merged["drafters"][0]["costs"]["seconds"][1] == pytest.approx([0.5, 0.7])
    assert merged["drafters"][0]["cosched"] == {"kept": True}  # ratios come from the full profile


def test_block_ratios_are_the_mean_of_its_refreshes():
    def cosched(widths, reps=5, achieved=0.01):
        return {"depths": [0, 64], "ratios": {w: {"rho_target": [1.0 + w, 1.2 + w], "rho_drafter": [1.5, 1.5],
                                                  "repetitions": [reps, reps], "achieved_precision": [achieved] * 2}
                                              for w in widths}}

    def doc(ratios, warnings=()):
        costs = {"depths": [0, 64], "seconds": {1: [1.0, 1.0]}}
        return {"target": {"costs": costs}, "drafters": [{"name": "small", "costs": costs, "cosched": ratios}],
                "notes": "n", "warnings": list(warnings)}

    low = {"model": "small", "table": "cosched rho_target", "ratio": 0.9}
    one, two = cosched([1, 2], 5, 0.01), cosched([1, 2], 7, 0.03)
    two["ratios"][1]["rho_target"] = [4.0, 4.2]
    merged = merged_profile(doc(cosched([1, 2, 3])), [doc(one, [low]), doc(two, [low])])
    ratios = merged["drafters"][0]["cosched"]["ratios"]
    assert ratios[1] == {"rho_target": [3.0, 3.2], "rho_drafter": [1.5, 1.5], "repetitions": [12, 12],
                         "achieved_precision": [0.03, 0.03]}
    assert ratios[3] == cosched([3])["ratios"][3]  # not refreshed: the full profile's
    assert merged["warnings"] == [low] and "co-scheduling ratios: the mean" in merged["notes"]
    # a refresh cell with no interval (achieved_precision null) leaves the merged cell without one
    three = cosched([1, 2], 5, None)
    merged = merged_profile(doc(cosched([1, 2, 3])), [doc(one), doc(three)])
    assert merged["drafters"][0]["cosched"]["ratios"][1]["achieved_precision"] == [None, None]


def probe(series, target, drafter, target_samples=None, drafter_samples=None):
    return ProbeRecord(0, 0, "d", series, "w", None, "small", target, drafter, -1, -1, [], 0, target_samples,
                       drafter_samples)


def test_block_drift_compares_every_probe_with_the_first_across_jobs():
    # the decode job ran slow throughout: its own probes agree, but not with the refresh's
    probes = [probe("refresh:small", 100.0, 50.0), probe("decode:small", 130.0, 51.0),
              probe("decode:small", 131.0, 50.0), probe("refresh:small", 101.0, 50.0)]
    drift = block_drift(probes, 5.0, 3.0)  # no bursts recorded (version 2): the threshold alone
    assert (drift.move_pct, drift.allowance_pct, drift.where) == (pytest.approx(31.0), 5.0, "target in decode:small")
    assert drift.voids


def burst(median, spread_pct):
    """Five forwards around `median` whose standard deviation is `spread_pct` of it."""
    step = median * spread_pct / 100 / (2.5 ** 0.5)  # the sample deviation of (-2, -1, 0, 1, 2) steps is sqrt(2.5)
    return [median + k * step for k in (-2, -1, 0, 1, 2)]


def test_a_move_within_the_probes_own_spread_keeps_the_block_and_one_beyond_it_voids():
    # a noisy host: every burst spreads 15%, so a 30% move of the decode job is within 3 spreads (45%)
    noisy = [probe("refresh:small", 100.0, None, burst(100, 15)), probe("decode:small", 130.0, None, burst(130, 15)),
             probe("refresh:small", 95.0, None, burst(95, 15))]
    drift = block_drift(noisy, 5.0, 3.0)
    assert drift.move_pct == pytest.approx(30.0) and drift.allowance_pct == pytest.approx(45.0)
    assert not drift.voids
    # the same move with bursts spreading 2%: 6% allowed, 30% voids
    quiet = [probe("refresh:small", 100.0, None, burst(100, 2)), probe("decode:small", 130.0, None, burst(130, 2)),
             probe("refresh:small", 95.0, None, burst(95, 2))]
    drift = block_drift(quiet, 5.0, 3.0)
    assert drift.allowance_pct == pytest.approx(6.0) and drift.voids and drift.where == "target in decode:small"
    # quieter still, the threshold is the least allowance; 0 spreads: the threshold alone
    assert block_drift(quiet, 50.0, 3.0).allowance_pct == 50.0 and not block_drift(quiet, 50.0, 3.0).voids
    assert block_drift(noisy, 5.0, 0.0).voids


def test_the_spread_is_the_median_over_the_blocks_bursts_so_a_disturbed_job_does_not_widen_it():
    # one disturbed burst (spread 80%) among four quiet ones (2%): the allowance stays 6%
    probes = [probe("refresh:small", 100.0, 50.0, burst(100, 2), burst(50, 2)),
              probe("decode:small", 300.0, 50.0, burst(300, 80), burst(50, 2)),
              probe("decode:small", 101.0, 51.0, burst(101, 2), burst(51, 2)),
              probe("refresh:small", 100.0, 50.0, burst(100, 2), burst(50, 2)),
              probe("refresh:small", 99.0, 50.0, burst(99, 2), burst(50, 2))]
    drift = block_drift(probes, 5.0, 3.0)
    assert drift.voids and drift.where == "target in decode:small" and drift.allowance_pct == pytest.approx(6.0)
    # each model has its own allowance: the drafter's quiet probes moved 2% of its 6%
    calm = [p if p.series != "decode:small" or p.target_us != 300.0 else
            probe("decode:small", 101.0, 50.0, burst(101, 2), burst(50, 2)) for p in probes]
    drift = block_drift(calm, 5.0, 3.0)
    assert not drift.voids and drift.move_pct <= 2.0 + 1e-9
