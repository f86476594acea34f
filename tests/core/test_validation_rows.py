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


def test_block_drift_compares_every_probe_with_the_first_across_jobs():
    def probe(series, target, drafter):
        return ProbeRecord(0, 0, "d", series, "w", None, "small", target, drafter, -1, -1, [], 0)

    # the decode job ran slow throughout: its own probes agree, but not with the refresh's
    probes = [probe("refresh:small", 100.0, 50.0), probe("decode:small", 130.0, 51.0),
              probe("decode:small", 131.0, 50.0), probe("refresh:small", 101.0, 50.0)]
    drift, where = block_drift(probes)
    assert drift == pytest.approx(31.0) and where == "target in decode:small"
