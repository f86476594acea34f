"""A validation block priced beside its decodes (core/crossfit.py, app/validate.priced_beside), on a case worked by
hand: the block's refreshes priced the drafter's forwards at their cells, its decodes ran them 1.3 x slower. The
validation's replay overrates SD; priced with the ratios the other fold's decodes met, it predicts them."""

from __future__ import annotations

import dataclasses

import pytest

from specbench.app.validate import priced_beside, replayed
from specbench.core.crossfit import beside_profile, folds, serial_forwards
from specbench.core.methods.configs import As2dConfig, SdConfig, TargetConfig
from specbench.core.pricing import DecodeContention, DecodeRatio
from specbench.core.validation_stats import observations
from specbench.schemas.traces import ModelRef, TraceFile
from specbench.schemas.validation import DecodeRecord, Metric, PairedRun
from tests.core.test_decomposition import RHO_TRUE, native_run
from tests.helpers import make_profile, make_trace, perfect_drafts, window_for

DEVICE = "dev@split"
SD = SdConfig(width=3, drafter="drafter")
CONFIGS = [TargetConfig(), SD]
SLOWER = 1.3
"""The drafter's forwards in the block's decodes over its cells."""
Y = list(range(10, 19))
WINDOWS = [f"w{i}" for i in range(4)]


def forward(model: str, width: int, depth: int, seconds: float) -> dict:
    return {"model": model, "width": width, "depth": depth, "us": round(1e6 * seconds)}


def sd_ops(profile, drafter_ratio: float) -> list[dict]:
    """Two drafter steps then a verification of width 3, four times: what SD W=3 does with perfect drafts."""
    ops, depth = [], 0
    drafter, target = profile.drafter("drafter").costs, profile.target_costs
    for _ in range(4):
        ops += [forward("drafter", 1, depth + k, drafter_ratio * drafter.cost(1, depth + k)) for k in range(2)]
        ops.append(forward("target", 3, depth, target.cost(3, depth)))
        depth += 2
    return ops


def block(profile, native_profile) -> tuple[list[DecodeRecord], dict[str, TraceFile], dict]:
    """Each window decoded twice (Na: target, SD; Nb: SD, target), natively as `native_profile` prices it."""
    traces = {w: make_trace(Y, drafts=perfect_drafts(Y), window_id=w) for w in WINDOWS}
    files = {"drafter": TraceFile(ModelRef("t", "t", 1 << 20), ModelRef("drafter", "d", 1 << 20), traces)}
    windows = {w: window_for(traces[w], cap=len(Y)) for w in WINDOWS}
    native = replayed(DEVICE, list(windows.values()), files, native_profile, CONFIGS)
    solo = [forward("target", 1, d, profile.target_costs.cost(1, d)) for d in range(len(Y) - 1)]
    decodes = []
    for w in WINDOWS:
        for run, order in ((PairedRun.A, (0, 1)), (PairedRun.B, (1, 0))):
            for slot in order:
                config = CONFIGS[slot]
                tokens, seconds = native[(DEVICE, config.label, w)]
                ops = solo if slot == 0 else sd_ops(profile, SLOWER)
                decodes.append(DecodeRecord(0, 0, DEVICE, "drafter", run, slot, config.label, w, tokens, seconds,
                                            True, ops))
    return decodes, files, windows


def with_drafter_ratio(profile, ratio: float):
    drafter = profile.drafter("drafter")
    costs = dataclasses.replace(drafter.costs, decode=DecodeRatio(ratio, 8))
    return dataclasses.replace(profile, drafters={"drafter": dataclasses.replace(drafter, costs=costs)})


def speedup_biases(obs) -> set[float]:
    return {round(o.replay / o.native_a, 9) for o in obs if o.metric == Metric.SPEEDUP}


def test_folds_alternate_in_window_order_and_cover_the_block():
    assert folds(["w3", "w0", "w2", "w1", "w4"]) == ({"w0", "w2", "w4"}, {"w1", "w3"})
    assert folds(["w0"]) == ({"w0"}, set())


def test_serial_forwards_are_the_targets_in_every_serial_decode_and_the_drafters_in_sd():
    profile = make_profile()
    decodes, _, _ = block(profile, with_drafter_ratio(profile, SLOWER))
    as2d = dataclasses.replace(decodes[1], config="as2d[B=3,drafter=drafter]", ops=[forward("target", 1, 0, 9.0)])
    broken = dataclasses.replace(decodes[0], lossless=False, ops=[forward("target", 1, 0, 9.0)])
    forwards = serial_forwards([*decodes, as2d, broken], profile, CONFIGS + [As2dConfig(3, drafter="drafter")], ())
    assert len(forwards["target"]) == len(WINDOWS) * (2 * (len(Y) - 1) + 2 * 4)
    assert len(forwards["drafter"]) == len(WINDOWS) * 2 * 8
    assert "drafter" not in serial_forwards(decodes, profile, CONFIGS, {"drafter"})  # a lookup runs no drafter model


def test_the_profile_beside_the_decodes_takes_each_models_ratio_from_them():
    profile = make_profile()
    decodes, _, _ = block(profile, with_drafter_ratio(profile, SLOWER))
    beside = beside_profile(profile, decodes, CONFIGS, ())
    assert beside.drafter("drafter").costs.decode.realised == pytest.approx(SLOWER, rel=1e-6)
    assert beside.target_costs.decode.realised == pytest.approx(1.0, rel=1e-6)
    cells = profile.drafter("drafter").costs
    assert beside.drafter("drafter").costs.cost(1, 5) == pytest.approx(SLOWER * cells.cost(1, 5), rel=1e-6)
    # without decodes to measure on, the block's own pricing stays
    assert beside_profile(profile, [], CONFIGS, ()).drafter("drafter").costs == profile.drafter("drafter").costs


def test_a_drift_the_refreshes_missed_is_priced_beside_the_decodes():
    profile = make_profile()  # the refreshes: the drafter at its cells
    decodes, files, windows = block(profile, with_drafter_ratio(profile, SLOWER))
    as_priced = observations(decodes, replayed(DEVICE, list(windows.values()), files, profile, CONFIGS))
    (overrated,) = speedup_biases(as_priced)
    assert overrated > 1.05  # the validation's replay charges the drift to the model
    beside = priced_beside(DEVICE, decodes, windows, files, profile, CONFIGS, set())
    assert {o.window_id for o in beside} == set(WINDOWS)
    assert speedup_biases(beside) == {1.0}


def test_the_targets_ratio_beside_the_producer_is_the_one_the_as2d_decodes_met():
    profile = make_profile(rho=(1.2, 1.3))
    as2d = As2dConfig(3, drafter="drafter")
    native, _ = native_run()
    decodes = [DecodeRecord(0, 0, DEVICE, "drafter", run, slot, label, "w0", len(Y) - 1, 1.0, True, ops,
                            native.producer if slot == 1 else None)
               for run in PairedRun for slot, label, ops in ((0, "target", native.solo_ops),
                                                              (1, as2d.label, native.ops))]
    met = beside_profile(profile, decodes, [TargetConfig(), as2d], ()).cosched("drafter")
    assert met.decode.realised == pytest.approx(RHO_TRUE) and met.decode.priced == pytest.approx(1.2)
    assert met.ratios(1, 0.0)[0] == pytest.approx(RHO_TRUE)
    # a run without its producer record measures nothing: the block's ratios stay
    bare = [dataclasses.replace(d, producer=None) for d in decodes]
    assert beside_profile(profile, bare, [TargetConfig(), as2d], ()).cosched("drafter") == profile.cosched("drafter")


def test_the_producers_ratio_is_measured_where_the_drafters_prompt_is_known_else_kept_as_the_block_priced_it():
    priced = DecodeContention(1.2, 1.2, 16, producer=2.0, producer_priced=2.0, producer_forwards=40)
    profile = make_profile(rho=(1.2, 1.3))
    drafter = profile.drafter("drafter")
    profile = dataclasses.replace(profile, drafters={"drafter": dataclasses.replace(
        drafter, cosched=dataclasses.replace(drafter.cosched, decode=priced))})
    as2d = As2dConfig(3, drafter="drafter")
    native, _ = native_run()
    decodes = [DecodeRecord(0, 0, DEVICE, "drafter", PairedRun.A, slot, label, "w0", len(Y) - 1, 1.0, True, ops,
                            native.producer if slot == 1 else None)
               for slot, label, ops in ((0, "target", native.solo_ops), (1, as2d.label, native.ops))]
    kept = beside_profile(profile, decodes, [TargetConfig(), as2d], ()).cosched("drafter").decode
    assert (kept.realised, kept.producer, kept.producer_forwards) == (pytest.approx(RHO_TRUE), 2.0, 40)
    # each 0.3 s producer step ran wholly beside a target forward and CD(1) = 0.25 s: 0.3 / 0.25
    met = beside_profile(profile, decodes, [TargetConfig(), as2d], (), {"drafter": {"w0": 0}}).cosched("drafter")
    assert met.decode.producer == pytest.approx(1.2) and met.decode.producer_forwards == 44
