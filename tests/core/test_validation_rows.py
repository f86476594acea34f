"""The pure pieces of `specbench validate` (core/validation_stats.py, core/refresh_mean.py): observations from
paired decodes, the block profile from two refreshes, and block drift, on cases computed by hand."""

from __future__ import annotations

import math

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from specbench.core.fidelity import paired_slots, partner_slot, run_order
from specbench.core.refresh_mean import mean_decode, merged_profile
from specbench.schemas.fileio import Where
from specbench.schemas.profiles import _cost_table
from specbench.core.validation_stats import Bounds, block_drift, observations, summarize
from specbench.schemas.validation import (
    DecodeRecord,
    Metric,
    ObservationRecord,
    ProbeRecord,
    SummaryRecord,
    load_records,
    open_validation,
    read_manifest,
    record_path,
    write_records,
)
from specbench.errors import SpecbenchError

SD = "sd[W=5,drafter=small]"


def decode(run, slot, config, tokens, seconds, window="w", lossless=True, repeat=0):
    return DecodeRecord(0, 0, "dev@split", "small", run, slot, config, window, tokens, seconds, lossless, [],
                        repeat=repeat)


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


def test_a_runs_value_is_taken_over_its_repeats():
    # --repeats 2: Na = [target, sd] twice, Nb = [sd, target] twice; a run's time is the mean of its repeats'
    decodes = [decode("a", 0, "target", 10, 2.0), decode("a", 1, SD, 10, 1.0),
               decode("b", 1, SD, 10, 1.5), decode("b", 0, "target", 10, 2.5),
               decode("a", 0, "target", 10, 3.0, repeat=1), decode("a", 1, SD, 10, 1.5, repeat=1),
               decode("b", 1, SD, 10, 2.5, repeat=1), decode("b", 0, "target", 10, 3.5, repeat=1)]
    replay = {("dev@split", "target", "w"): (10, 2.2), ("dev@split", SD, "w"): (10, 1.1)}
    obs = {(o.config, o.metric): o for o in observations(decodes, replay)}
    assert len(obs) == 3  # one observation per (configuration, metric), not one per repeat
    speedup = obs[(SD, "speedup")]  # Na: (10 / 1.25) / (10 / 2.5); Nb: (10 / 2.0) / (10 / 3.0)
    assert (speedup.native_a, speedup.native_b) == pytest.approx((2.0, 1.5))
    throughput = obs[(SD, "throughput")]
    assert (throughput.native_a, throughput.native_b) == pytest.approx((8.0, 5.0))
    target = obs[("target", "throughput")]
    assert (target.native_a, target.native_b) == pytest.approx((4.0, 10 / 3))


def test_nb_runs_each_window_s_decodes_in_reverse_so_each_method_and_its_target_only_decode_are_abba():
    slots = paired_slots(["m1", "m2"], "target")
    na, nb = run_order(slots, reverse=False), run_order(slots, reverse=True)
    assert [label for _, label in na] == ["target", "m1", "target", "m2"]
    assert [label for _, label in nb] == ["m2", "target", "m1", "target"]
    for order in (na, nb):
        assert all(label == slots[slot] for slot, label in order)  # slots keep Na's numbering
    # Na: each method right after its target-only decode; Nb: right before it
    assert [slot for slot, _ in nb] == [3, 2, 1, 0] and all(partner_slot(s) == s - 1 for s in (1, 3))


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


def test_block_price_is_the_mean_of_its_refreshes_prices():
    """Each refresh prices at its cells times its own decode ratio (its decodes over those cells): a refresh whose
    cells read 20% high measures a ratio 20% lower, and the block's price is what the two refreshes priced alike."""
    def costs(cells, single, wider=None):
        decode = {"realised": single, "forwards": 40, "single": {"realised": single, "forwards": 30}}
        if wider is not None:
            decode["wider"] = {"realised": wider, "forwards": 10}
        return {"depths": [0, 64], "seconds": {1: cells, 2: [2 * c for c in cells]}, "decode": decode}

    def doc(table):
        return {"target": {"costs": table}, "drafters": [], "notes": "n"}

    def priced(merged):  # the target's table as a profile reads it
        return _cost_table(merged["target"]["costs"], Where(Path("block.yaml")), "target")

    one, two = costs([1.2, 1.2], 0.9 / 1.2, 1.8 / 2.4), costs([1.0, 1.0], 0.9, 0.9)
    merged = merged_profile(doc(costs([1.0, 1.0], 1.0)), [doc(one), doc(two)])
    table = priced(merged)
    for width, price in ((1, 0.9), (2, 1.8)):  # both refreshes priced a width-1 forward at 0.9 s
        assert table.cost(width, 32) == pytest.approx(price)
    assert merged["target"]["costs"]["decode"]["realised"] == pytest.approx((0.75 + 0.9) / 2)
    # one refresh without the class: each is priced at its pooled ratio, as replay does
    del one["decode"]["wider"]
    merged = merged_profile(doc(costs([1.0, 1.0], 1.0)), [doc(one), doc(two)])
    table = priced(merged)
    assert table.cost(2, 32) == pytest.approx((2.4 * 0.75 + 2.0 * 0.9) / 2)


def test_a_blocks_timings_between_its_passes_join_its_refreshes_in_every_decode_mean_but_not_in_its_cells():
    """An interim holds the first refresh's cells and the ratios its own decodes met against them: its price is
    what those decodes met, one more sample of the block's moments; the co-scheduling cells stay the refreshes'."""
    def doc(cells, single, rho, met, drafters=("small", "other")):
        decode = {"realised": single, "forwards": 40, "single": {"realised": single, "forwards": 30}}
        costs = {"depths": [0], "seconds": {1: [cells]}, "decode": decode}
        cosched = {"depths": [0], "ratios": {1: {"rho_target": [rho], "rho_drafter": [1.1]}},
                   "decode": {"realised": met, "priced": rho, "forwards": 20}}
        return {"target": {"costs": costs}, "notes": "n",
                "drafters": [{"name": name, "costs": costs, "cosched": cosched} for name in drafters]}

    one, two = doc(1.0, 0.9, 1.5, 2.0), doc(1.2, 1.0, 1.7, 2.2)
    between = [doc(1.0, 1.2, 1.5, 2.6, ("small",)), doc(1.0, 0.6, 1.5, 1.6, ("small",))]  # the first's cells
    merged = merged_profile(doc(1.0, 1.0, 1.0, 1.0), [one, two], between)
    target = _cost_table(merged["target"]["costs"], Where(Path("block.yaml")), "target")
    assert target.cost(1, 0) == pytest.approx((0.9 + 1.2 + 1.2 + 0.6) / 4)  # each one's cells x its own ratio
    small, other = merged["drafters"]
    assert small["cosched"]["ratios"][1]["rho_target"] == pytest.approx([1.6])  # the refreshes' cells alone
    assert small["cosched"]["decode"] == {"realised": pytest.approx((2.0 + 2.2 + 2.6 + 1.6) / 4),
                                          "priced": pytest.approx(1.55), "forwards": 80}
    # a drafter an interim did not decode with (another group's) is merged over the refreshes alone
    assert other["cosched"]["decode"]["realised"] == pytest.approx(2.1)
    assert other["costs"]["decode"]["realised"] == pytest.approx(0.95)
    assert "its decode ratios with 2 timings between its passes" in merged["notes"]


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


def test_a_block_prices_each_model_at_the_mean_of_its_refreshes_serial_decode_ratios():
    def doc(target=None, drafter=None):
        def costs(decode):
            return {"depths": [0], "seconds": {1: [1.0]}} | ({} if decode is None else {"decode": decode})
        return {"target": {"costs": costs(target)}, "drafters": [{"name": "small", "costs": costs(drafter)}],
                "notes": "n"}

    one = doc({"realised": 1.0, "forwards": 40, "single": {"realised": 0.9, "forwards": 30}},
              {"realised": 0.8, "forwards": 50, "wider": {"realised": 1.2, "forwards": 10}})
    two = doc({"realised": 1.2, "forwards": 60, "single": {"realised": 1.1, "forwards": 50}},
              {"realised": 1.0, "forwards": 70})
    full = doc({"realised": 2.0, "forwards": 9})
    merged = merged_profile(full, [one, two])
    target = merged["target"]["costs"]["decode"]
    assert target["realised"] == pytest.approx(1.1) and target["forwards"] == 100 and set(target) == {
        "realised", "forwards", "single"}
    assert target["single"] == {"realised": pytest.approx(1.0), "forwards": 80}
    # a class one refresh lacks is left to the pooled ratio
    assert merged["drafters"][0]["costs"]["decode"] == pytest.approx({"realised": 0.9, "forwards": 120})
    # refreshes without serial decodes keep the full profile's
    assert merged_profile(full, [doc(), doc()])["target"]["costs"]["decode"] == full["target"]["costs"]["decode"]
    # the host work after each forward: seconds the mean, forwards the sum, a class one refresh lacks left out;
    # kept only where every refresh timed it
    host = ({"seconds": 1e-4, "forwards": 40, "wider": {"seconds": 3e-4, "forwards": 10}},
            {"seconds": 2e-4, "forwards": 60})
    timed = [doc(one["target"]["costs"]["decode"] | {"host": h}) for h in host]
    assert merged_profile(full, timed)["target"]["costs"]["decode"]["host"] == pytest.approx(
        {"seconds": 1.5e-4, "forwards": 100})
    assert "host" not in merged_profile(full, [timed[0], one])["target"]["costs"]["decode"]


def probe(series, target, drafter=None, window=None, where="after"):
    return ProbeRecord(0, 0, "d", series, where if window is None and series.startswith("refresh") else
                       ("start" if window is None else "after"), window, "small", target, drafter, -1, -1, [], 0)


def block(refresh, decode, drafter_refresh=None, drafter_decode=None):
    """Probes of one block: `refresh` around the refreshes, `decode` in the decode job (one before the first
    window, one after each); the drafter's beside them when given."""
    out = [probe("refresh:small", v, None if drafter_refresh is None else drafter_refresh[i], where="refresh")
           for i, v in enumerate(refresh)]
    out += [probe("decode:small", v, None if drafter_decode is None else drafter_decode[i],
                  None if i == 0 else f"w{i - 1}") for i, v in enumerate(decode)]
    return out


def test_a_decode_job_slowed_throughout_moves_every_window_against_the_refreshes():
    drift = block_drift(block([100.0, 101.0, 99.0, 100.0], [130.0, 131.0, 129.0]), 5.0, 3.0)
    # reference 100; windows w0 (130, 131) and w1 (131, 129) moved 30% and 29%; the probes scatter ~1%
    assert (drift.move_pct, drift.allowance_pct) == (pytest.approx(30.0), 5.0)
    assert drift.voids and drift.where == "target in decode:small after w0"


def test_probes_that_scatter_around_an_unmoved_level_keep_the_block():
    # a noisy host: single probes 20-30% off, never two in a row the same way
    drift = block_drift(block([100.0, 130.0, 80.0, 110.0], [95.0, 140.0, 85.0, 120.0, 100.0]), 1.0, 3.0)
    assert drift.move_pct == 0.0 and not drift.voids
    # one disturbed probe is noise, not drift
    assert not block_drift(block([100.0, 100.0, 101.0, 99.0], [100.0, 300.0, 101.0]), 5.0, 3.0).voids


def test_a_shift_is_weighed_against_the_probes_own_scatter():
    # the same scatter with the decode job twice as slow: windows moved 62-90%, the probes scatter 22%
    noisy = block([100.0, 130.0, 80.0, 110.0], [190.0, 280.0, 170.0, 240.0, 200.0])
    drift = block_drift(noisy, 5.0, 3.0)
    assert drift.move_pct == pytest.approx(100 * (200.0 / 105.0 - 1))
    assert drift.allowance_pct == pytest.approx(3 * 100 * 1.4826 * 0.15) and drift.voids
    assert not block_drift(noisy, 5.0, 4.5).voids  # at 4.5 spreads it is within the noise
    # quiet probes: a sustained 3% move is within the 5% threshold, which is the least allowance
    quiet = block([100.0, 100.0, 100.0, 100.0], [103.0, 103.0, 103.0])
    assert block_drift(quiet, 5.0, 3.0).allowance_pct == 5.0 and not block_drift(quiet, 5.0, 3.0).voids
    assert block_drift(quiet, 1.0, 0.0).voids


def test_each_model_is_held_to_its_own_allowance():
    # the target scatters 30% and moved 25%; the drafter is quiet and moved 25%: the drafter decides
    probes = block([100.0, 125.0, 80.0, 100.0], [125.0, 160.0, 100.0, 150.0, 125.0],
                   [50.0, 50.0, 50.0, 50.0], [62.5, 62.5, 62.5, 62.5, 62.5])
    drift = block_drift(probes, 5.0, 3.0)
    assert drift.voids and drift.where.startswith("drafter small in decode:small")
    assert drift.move_pct == pytest.approx(25.0) and drift.allowance_pct == 5.0
    assert not block_drift(block([100.0, 125.0, 80.0, 100.0], [125.0, 160.0, 100.0, 150.0, 125.0]), 5.0, 3.0).voids


def test_a_block_prices_each_width_class_at_the_mean_of_its_refreshes_decodes():
    def doc(decode):
        costs = {"depths": [0], "seconds": {1: [1.0]}}
        cosched = {"depths": [0], "ratios": {1: {"rho_target": [1.5], "rho_drafter": [1.2]}}, "decode": decode}
        return {"target": {"costs": costs}, "drafters": [{"name": "small", "costs": costs, "cosched": cosched}],
                "notes": "n"}

    one = {"realised": 2.0, "priced": 1.5, "forwards": 30, "single": {"realised": 2.4, "forwards": 20},
           "verify": {"realised": 1.8, "forwards": 10}}
    two = {"realised": 2.2, "priced": 1.7, "forwards": 20, "single": {"realised": 2.6, "forwards": 20}}
    merged = merged_profile(doc(one), [doc(one), doc(two)])["drafters"][0]["cosched"]["decode"]
    assert merged["realised"] == pytest.approx(2.1) and merged["forwards"] == 50
    assert merged["single"] == {"realised": pytest.approx(2.5), "forwards": 40}
    assert "verify" not in merged  # one refresh's decodes had too few verifications: the pooled ratio prices them


def test_a_blocks_refreshes_merge_their_ratios_beside_the_producer_as_means():
    r0 = {"realised": 2.0, "priced": 1.5, "forwards": 30, "single": {"realised": 2.4, "forwards": 20},
          "verify": {"realised": 1.8, "forwards": 10}}
    r1 = {"realised": 1.0, "priced": 1.7, "forwards": 20, "single": {"realised": 1.0, "forwards": 20},
          "below_one": {"realised": 0.9, "single": 0.95}}  # priced 1: its own warning stays with its refresh
    r2 = {"realised": 2.3, "priced": 1.6, "forwards": 10, "single": {"realised": 2.6, "forwards": 10},
          "verify": {"realised": 1.9, "forwards": 9}}
    merged = mean_decode([r0, r1, r2])
    assert merged == {"realised": pytest.approx(5.3 / 3), "priced": pytest.approx(1.6), "forwards": 60,
                      "single": {"realised": pytest.approx(2.0), "forwards": 50}}
    assert isinstance(merged["single"]["forwards"], int)  # a count, as a profile holds it
    assert "verify" not in merged  # one refresh had too few verifications: the merged ratio prices them
    assert r1["below_one"] == {"realised": 0.9, "single": 0.95}  # the inputs are not changed
    # the producer's ratio merged the same way, where every refresh measured it
    r3, r4 = (r | {"producer": {"realised": v, "priced": 3.0, "forwards": 100}} for r, v in ((r0, 1.9), (r2, 2.1)))
    assert mean_decode([r3, r4])["producer"] == {"realised": pytest.approx(2.0), "priced": pytest.approx(3.0),
                                                 "forwards": 200}
    assert "producer" not in mean_decode([r3, r2])
    # the pace scatter merged as variances are, by degrees of freedom, over the refreshes that measured one
    r5, r6 = r0 | {"pace": {"sigma": 0.1, "pairs": 10}}, r2 | {"pace": {"sigma": 0.2, "pairs": 30}}
    assert mean_decode([r5, r6, r1])["pace"] == {"sigma": pytest.approx(math.sqrt((10 * 0.01 + 30 * 0.04) / 40)),
                                                 "pairs": 40}
    # the target alone after the producer: its sums summed, width by width (a width one refresh lacked ran none
    # there), where every refresh measured it
    r7 = r0 | {"after": {1: {"seconds": 2.0, "solo_seconds": 1.0, "forwards": 3}}}
    r8 = r2 | {"after": {1: {"seconds": 1.0, "solo_seconds": 2.0, "forwards": 5},
                         3: {"seconds": 0.5, "solo_seconds": 0.25, "forwards": 1}}}
    assert mean_decode([r7, r8])["after"] == {1: {"seconds": 3.0, "solo_seconds": 3.0, "forwards": 8},
                                              3: {"seconds": 0.5, "solo_seconds": 0.25, "forwards": 1}}
    assert "after" not in mean_decode([r7, r2])


OBSERVATION_KEYS = ["device", "config", "metric", "block", "window_id", "replay", "native_a", "native_b"]
SUMMARY_KEYS = ["device", "config", "metric", "blocks", "observations", "f0_pct", "f0_low", "f0_high", "f1_pct",
                "f1_low", "f1_high", "excess_pct", "excess_upper_pct", "bias", "bias_low", "bias_high",
                "bias_bound_pct", "error_bound_pct", "verdict", "past_allowance", "blocks_needed"]


def test_observations_and_their_summary_read_back_as_written_with_their_keys_in_order(tmp_path):
    obs = [ObservationRecord("dev@split", config, metric, block, f"w{i}", 1.0 + 0.01 * i - 0.02 * block,
                             1.0 + 0.003 * block, 0.99 + 0.004 * i)
           for metric in Metric for config in ("target", SD) for block in range(2 if config == SD else 1)
           for i in range(3)]
    summary = summarize(obs, {Metric.SPEEDUP: Bounds(3.0, 5.0), Metric.THROUGHPUT: Bounds(5.0, 5.0)})
    assert [(s.config, s.metric, s.blocks, s.observations) for s in summary] == [
        ("target", "speedup", 1, 3), (SD, "speedup", 2, 6), ("target", "throughput", 1, 3), (SD, "throughput", 2, 6)]
    assert summary[0].verdict == "not shown: 1 block (an interval needs at least 2)" and summary[0].bias_low is None
    assert summary[1].bias_low is not None and summary[1].bias_bound_pct == 3.0
    for kind, records, keys in ((ObservationRecord, obs, OBSERVATION_KEYS), (SummaryRecord, summary, SUMMARY_KEYS)):
        write_records(tmp_path, kind, records)
        assert load_records(tmp_path, kind) == records
        lines = record_path(tmp_path, kind).read_text().splitlines()
        assert all(list(json.loads(line)) == keys for line in lines)
    # a summary written before `past_allowance` and `blocks_needed` existed reads back with neither
    path = record_path(tmp_path, SummaryRecord)
    path.write_text("".join(re.sub(r',"past_allowance":0,"blocks_needed":(null|\d+)', "", line) + "\n"
                            for line in path.read_text().splitlines()))
    assert "past_allowance" not in path.read_text() and "blocks_needed" not in path.read_text()
    assert load_records(tmp_path, SummaryRecord) == [replace(s, blocks_needed=None) for s in summary]


def test_a_block_kept_past_its_drift_allowance_is_named_in_the_verdicts_that_pool_it():
    obs = [ObservationRecord(device, SD, Metric.SPEEDUP, block, f"w{i}", 1.0 + 0.001 * i, 1.0, 1.0)
           for device in ("dev@split", "dev@shared") for block in range(3) for i in range(4)]
    bounds = {Metric.SPEEDUP: Bounds(3.0, 5.0)}
    clean = {s.device: s for s in summarize(obs, bounds)}
    # block 1 of dev@shared was kept although it drifted past its allowance; dev@split's block 1 was not
    marked = {s.device: s for s in summarize(obs, bounds, {("dev@shared", 1), ("dev@other", 0)})}
    assert marked["dev@split"] == clean["dev@split"] and clean["dev@split"].past_allowance == 0
    shared = marked["dev@shared"]
    assert shared.past_allowance == 1 and shared.bias == clean["dev@shared"].bias
    assert shared.verdict == clean["dev@shared"].verdict + "; 1 of 3 blocks kept past their drift allowance " \
                                                           "(--max-voids spent)"
    assert shared.verdict.startswith("within ±3%")  # the judgment stands; the reader is told what it rests on


def test_a_resume_may_change_when_the_validation_stops_but_nothing_it_measured(tmp_path):
    settings = {"methods": ["sd[W=5]"], "block_windows": 12, "min_blocks": 2, "max_blocks": 2, "halfwidth_pct": 1.0}
    open_validation(tmp_path, settings, resume=False)
    # more blocks on the same validation: its intervals narrow, nothing measured so far changes meaning
    open_validation(tmp_path, settings | {"max_blocks": 6, "halfwidth_pct": 2.0}, resume=True)
    written = read_manifest(tmp_path)
    assert (written["max_blocks"], written["halfwidth_pct"], written["block_windows"]) == (6, 2.0, 12)
    with pytest.raises(SpecbenchError, match=r"cannot resume: validation.json field 'block_windows' differs "
                                             r"\(12 before, 6 now\)"):
        open_validation(tmp_path, settings | {"max_blocks": 6, "block_windows": 6}, resume=True)
    assert read_manifest(tmp_path)["block_windows"] == 12
