"""AS2D's speedup bias taken apart (core/decomposition.py) on cases worked by hand: a native run whose
target forwards were stretched by a contention the profile's ratio lacks, and one whose producer
published nothing in time where the profile's published early."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from specbench.core import fidelity
from specbench.core.decomposition import (
    NativeLanes,
    Part,
    WindowReplays,
    after_producer,
    block_contention,
    decode_contention,
    decompose,
    native_lane,
    substituted_replays,
)
from specbench.core.methods.configs import As2dConfig, TargetConfig
from specbench.core.pricing import CLASS_FORWARDS, AfterProducer, DecodeContention, DecodeRatio, HostWork
from specbench.core.replay.reference import replay_window, simulate_as2d
from specbench.core.stability import decode_warnings
from specbench.errors import SpecbenchError
from specbench.core.validation_stats import decode_index, native_lanes
from specbench.schemas.validation import DecodeRecord, Metric, ObservationRecord, PairedRun
from tests.helpers import make_profile, make_trace, window_for

Y = list(range(10, 19))  # 9 tokens: y[0] from the prefill, then 8 target forwards
RHO_TRUE = 1.5
"""The target's slowdown beside the producer in the native runs."""
SOLO = 1.1
"""The native target's solo speed against the profile's price (CT(1) = 1 s): drift, which is no contention."""


def native_run(n_forwards: int = len(Y) - 1) -> tuple[NativeLanes, float]:
    """Width-1 target forwards back to back from the clock's start, each overlapping a producer busy
    for 30 s that publishes nothing in time, so each took SOLO x its price x RHO_TRUE; the target-only
    decode beside it took SOLO x its price. Returns the lanes and native's speedup."""
    ops, t = [], 0
    for depth in range(n_forwards):
        us = round(1e6 * SOLO * RHO_TRUE)
        ops.append({"model": "target", "width": 1, "depth": depth, "us": us, "t_us": t})
        t += us
    solo = [{"model": "target", "width": 1, "depth": depth, "us": round(1e6 * SOLO)} for depth in range(n_forwards)]
    producer = {"started_us": 0, "step_start_us": [300_000 * s for s in range(100)],
                "step_us": [300_000 * (s + 1) for s in range(100)], "publish_us": [], "publish_count": [],
                "publish_step": [], "stop": "drained"}
    return NativeLanes(ops, producer, solo), sum(op["us"] for op in solo) / t


def decomposed(profile, trace, config, blocks=2, windows=2) -> dict[Part, object]:
    """The parts over `blocks` x `windows` identical observations, both native runs alike."""
    window = window_for(trace, cap=len(Y))
    native, native_speedup = native_run()
    target_s = replay_window(window, trace, profile, TargetConfig()).decode_s
    priced_s = simulate_as2d(trace, window.cap, profile, config)[0].decode_s
    contended = block_contention([native, native], profile.target_costs, profile.cosched(None))
    subs = substituted_replays(trace, window.cap, profile, config, native, contended)
    observations = [WindowReplays(b, f"w{i}", (native_speedup, native_speedup), target_s / priced_s,
                                  (target_s / subs.contention_s,) * 2, (target_s / subs.publication_s,) * 2)
                    for b in range(blocks) for i in range(windows)]
    return {p.part: p for p in decompose(observations)}


def test_the_blocks_contention_is_the_ratio_its_runs_realised_and_the_producer_keeps_its_price():
    profile = make_profile(rho=(1.2, 1.3))
    native, _ = native_run()
    contended = block_contention([native, native], profile.target_costs, profile.cosched(None))
    # the run's solo speed (SOLO) is no contention: the target's ratio is RHO_TRUE, against 1.2 priced
    assert (contended.realised, contended.priced, contended.forwards) == (pytest.approx(RHO_TRUE),
                                                                          pytest.approx(1.2), 2 * (len(Y) - 1))
    assert contended.cosched.ratios(1, 0.0)[0] == pytest.approx(RHO_TRUE)
    assert contended.cosched.ratios(1, 0.0)[1] == profile.cosched(None).ratios(1, 0.0)[1] == pytest.approx(1.3)


def test_a_block_with_no_forward_wholly_beside_the_producer_substitutes_nothing():
    # the forward's first half ran before the producer started: a block gives no ratio from it
    profile = make_profile(rho=(1.2, 1.0))
    ops = [{"model": "target", "width": 1, "depth": 0, "us": 1_500_000, "t_us": 0}]
    producer = {"started_us": 500_000, "step_us": [9_000_000], "publish_us": []}
    solo = [{"model": "target", "width": 1, "depth": 0, "us": 1_000_000}]
    priced = profile.cosched(None)
    contended = block_contention([NativeLanes(ops, producer, solo)], profile.target_costs, priced)
    assert contended.cosched is priced and (contended.realised, contended.forwards) == (None, 0)


def test_decode_contention_pools_runs_and_prices_their_forwards_with_the_cells():
    profile = make_profile(rho=(1.2, 1.0))
    short, _ = native_run(3)
    long, _ = native_run()
    met = decode_contention([short, long], profile.target_costs, profile.cosched(None))
    assert met.realised == pytest.approx(RHO_TRUE)
    assert met.priced == pytest.approx(1.2)
    assert met.forwards == 3 + len(Y) - 1


def test_decode_contention_is_none_when_no_forward_overlapped_the_producer():
    profile = make_profile()
    ops = [{"model": "target", "width": 1, "depth": 0, "us": 1_000_000, "t_us": 0}]
    late = {"started_us": 2_000_000, "step_us": [3_000_000], "publish_us": []}
    solo = [{"model": "target", "width": 1, "depth": 0, "us": 1_000_000}]
    assert decode_contention([NativeLanes(ops, late, solo)], profile.target_costs, profile.cosched(None)) is None


def test_decode_contention_leaves_out_a_forward_half_beside_the_producer():
    # the first forward starts 0.5 s before the producer and ran 10 s on a loaded device: its solo part
    # would eat its whole solo work and more (the solo work left for its overlap <= 0); left out here
    profile = make_profile(rho=(1.2, 1.0))
    native, _ = native_run()
    slow = [dict(native.ops[0], us=10_000_000)] + [dict(op, t_us=op["t_us"] + 10_000_000) for op in native.ops[1:]]
    producer = dict(native.producer, started_us=500_000, step_us=[60_000_000])
    met = decode_contention([NativeLanes(slow, producer, native.solo_ops)], profile.target_costs,
                            profile.cosched(None))
    assert met.realised == pytest.approx(RHO_TRUE) and met.forwards == len(Y) - 2


def lanes_at(widths_and_ratios: list[tuple[int, float]]) -> NativeLanes:
    """Forwards of the given widths back to back beside a producer busy throughout, each stretched by its
    ratio; the target-only decode beside it at the profile's price (CT(w) = 1 + 0.25 (w - 1) s)."""
    ops, solo, t = [], [], 0
    for depth, (width, rho) in enumerate(widths_and_ratios):
        price = 1.0 + 0.25 * (width - 1)
        ops.append({"model": "target", "width": width, "depth": depth, "us": round(1e6 * price * rho), "t_us": t})
        solo.append({"model": "target", "width": width, "depth": depth, "us": round(1e6 * price)})
        t += ops[-1]["us"]
    producer = {"started_us": 0, "step_us": [t + 1], "publish_us": []}
    return NativeLanes(ops, producer, solo)


def test_decode_contention_measures_single_steps_and_verifications_apart():
    # single-token steps met 2.6, verifications (widths 2 and 4) 2.0: each class is priced at its own ratio
    profile = make_profile()
    met = decode_contention([lanes_at([(1, 2.6)] * 12 + [(2, 2.0), (4, 2.0)] * 5)], profile.target_costs,
                            profile.cosched(None))
    assert (met.single, met.single_forwards) == (pytest.approx(2.6), 12)
    assert (met.verify, met.verify_forwards) == (pytest.approx(2.0), 10)
    assert met.forwards == 22 and 2.0 < met.realised < 2.6
    assert (met.target(1), met.target(2), met.target(9)) == (met.single, met.verify, met.verify)


def test_a_width_class_with_too_few_forwards_is_priced_at_its_cells_as_the_decodes_calibrate_them():
    """Decodes that were nearly all single steps (2.6 here) leave the verifications' class unmeasured: they are
    priced at the cells' ratio for their width, times what the decodes realised over what the cells priced for the
    same forwards, not at the pooled ratio of the single steps."""
    profile = make_profile()
    flat = profile.cosched(None)  # the cells: 2.5 at width 1, 1.5 wider
    cells = replace(flat, rho_target={w: np.full(len(flat.depths), 2.5 if w == 1 else 1.5) for w in flat.rho_target})
    met = decode_contention([lanes_at([(1, 2.6)] * CLASS_FORWARDS + [(3, 2.0)] * (CLASS_FORWARDS - 1))],
                            profile.target_costs, cells)
    assert met.single == pytest.approx(2.6) and met.verify is None
    assert met.verify_forwards == CLASS_FORWARDS - 1
    assert met.target(3) is None and met.target(1) == met.single
    priced = replace(cells, decode=met)
    scale = met.realised / met.priced
    assert priced.ratios(1, 0.0)[0] == pytest.approx(2.6)
    assert priced.ratios(3, 0.0)[0] == pytest.approx(cells.ratios(3, 0.0)[0] * scale)
    assert priced.ratios(3, 0.0)[0] < 2.0 < met.realised  # nearer the verifications' 2.0 than the pooled ratio
    assert priced.dense(3, 2)[0][1, 0] == pytest.approx(2.6)
    assert priced.dense(3, 2)[0][3, 2] == pytest.approx(cells.dense(3, 2)[0][3, 2] * scale)


def test_a_decode_ratio_below_one_is_priced_as_one_kept_and_warned_about():
    # single-token steps ran faster than their solo work (0.8: the target-only decodes that scale it ran
    # slow), verifications met 1.5: no lane runs faster beside the other, so the profile prices 1
    profile = make_profile()
    met = decode_contention([lanes_at([(1, 0.8)] * 10 + [(3, 1.5)] * 10)], profile.target_costs,
                            profile.cosched(None))
    assert met.single == 1.0 and met.below_one == {"single": pytest.approx(0.8)}
    assert met.verify == pytest.approx(1.5) and met.realised > 1.0
    drafter = replace(profile.drafter(None), cosched=replace(profile.cosched(None), decode=met))
    [warning] = decode_warnings([drafter])
    assert (warning.table, warning.width, warning.samples, warning.ratio) == ("cosched decode single", 1, 10, 0.8)
    everything = decode_contention([lanes_at([(1, 0.9)] * 4 + [(2, 0.95)] * 4)], profile.target_costs,
                                   profile.cosched(None))
    assert (everything.realised, everything.single, everything.verify) == (1.0, None, None)
    assert set(everything.below_one) == {"realised"}


def producer_beside(steps: list[tuple[float, float]], lanes: NativeLanes, drafter_prompt: int | None = 4) -> NativeLanes:
    """`lanes` with a producer whose forwards (start, end in seconds on the decode clock) are `steps`."""
    producer = {"started_us": 0, "step_start_us": [round(1e6 * a) for a, _ in steps],
                "step_us": [round(1e6 * b) for _, b in steps], "publish_us": []}
    return replace(lanes, producer=producer, drafter_prompt=drafter_prompt)


def test_the_producers_ratio_is_recovered_from_its_forwards_beside_the_target():
    # the target runs 20 s of width-1 forwards back to back; the producer's forwards (CD(1) = 0.25 s solo) took
    # 0.45 s beside it (rho 1.8, where the cells say 3.0), and the last one ran 0.2 s past the target's end:
    # alone for 0.2 s it did 0.2 s of work, the other 0.05 s of work took 0.09 s beside the target
    profile = make_profile(rho=(1.2, 3.0))
    target = lanes_at([(1, 2.0)] * 10)
    steps = [(0.45 * s, 0.45 * (s + 1)) for s in range(CLASS_FORWARDS + 2)] + [(19.91, 20.2)]
    met = decode_contention([producer_beside(steps, target)], profile.target_costs, profile.cosched(None),
                            profile.drafter(None).costs)
    assert met.producer == pytest.approx(1.8) and met.producer_priced == pytest.approx(3.0)
    assert met.producer_forwards == CLASS_FORWARDS + 3
    priced = replace(profile.cosched(None), decode=met)
    assert priced.ratios(1, 0.0)[1] == priced.ratios(7, 300.0)[1] == pytest.approx(1.8)
    assert (priced.dense(3, 2)[1] == met.producer).all()
    # the target's ratio is priced as before
    assert priced.ratios(1, 0.0)[0] == pytest.approx(2.0)


def test_the_producers_ratio_is_left_to_the_cells_without_enough_forwards_or_its_prompt():
    profile = make_profile(rho=(1.2, 3.0))
    target = lanes_at([(1, 2.0)] * 10)
    steps = [(0.45 * s, 0.45 * (s + 1)) for s in range(CLASS_FORWARDS)]
    for lanes in (producer_beside(steps[:-1], target), producer_beside(steps, target, drafter_prompt=None)):
        met = decode_contention([lanes], profile.target_costs, profile.cosched(None), profile.drafter(None).costs)
        assert (met.producer, met.producer_forwards) == (None, 0)
        assert replace(profile.cosched(None), decode=met).ratios(1, 0.0)[1] == 3.0
    faster = [(0.2 * s, 0.2 * (s + 1)) for s in range(100)]  # 0.2 s for 0.25 s of work: noise
    met = decode_contention([producer_beside(faster, target)], profile.target_costs, profile.cosched(None),
                            profile.drafter(None).costs)
    # every forward ran beside single-token steps: that class measured the same noise
    assert met.producer == met.producer_single == 1.0 and met.producer_verify is None
    assert met.below_one == {"producer": pytest.approx(0.8), "producer_single": pytest.approx(0.8)}
    drafter = replace(profile.drafter(None), cosched=replace(profile.cosched(None), decode=met))
    warnings = decode_warnings([drafter])
    assert [(w.table, w.width, w.samples, w.ratio) for w in warnings] == [
        ("cosched decode producer", 0, 100, 0.8), ("cosched decode producer_single", 1, 100, 0.8)]


def test_the_producers_ratio_beside_each_class_of_target_forward_is_priced_beside_that_class():
    # 10 s of single-token steps, then 10 s of width-4 verifications; the producer's forwards (CD(1) = 0.25 s
    # solo) took 0.45 s beside the first (rho 1.8) and 0.75 s beside the second (rho 3.0)
    profile = make_profile(rho=(1.2, 2.0))
    target = lanes_at([(1, 2.0)] * 5 + [(4, 2.0)] * 5)
    steps = [(0.45 * s, 0.45 * (s + 1)) for s in range(20)] + [(10 + 0.75 * s, 10 + 0.75 * (s + 1)) for s in range(12)]
    met = decode_contention([producer_beside(steps, target)], profile.target_costs, profile.cosched(None),
                            profile.drafter(None).costs)
    assert (met.producer_single, met.producer_single_forwards) == (pytest.approx(1.8), 20)
    assert (met.producer_verify, met.producer_verify_forwards) == (pytest.approx(3.0), 12)
    assert met.producer == pytest.approx(18 / (32 * 0.25)) and met.producer_forwards == 32  # pooled: 2.25
    priced = replace(profile.cosched(None), decode=met)
    assert priced.ratios(1, 0.0)[1] == pytest.approx(1.8) and priced.ratios(4, 9.0)[1] == pytest.approx(3.0)
    assert priced.dense(4, 2)[1][1].tolist() == pytest.approx([1.8] * 3)
    assert priced.dense(4, 2)[1][2:].flatten().tolist() == pytest.approx([3.0] * 9)
    # a class short of CLASS_FORWARDS is priced at the pooled ratio
    few = decode_contention([producer_beside(steps[:20] + steps[20:20 + CLASS_FORWARDS - 1], target)],
                            profile.target_costs, profile.cosched(None), profile.drafter(None).costs)
    assert few.producer_verify is None and few.drafter(4) == few.producer and few.drafter(1) == few.producer_single


def test_a_profile_priced_with_the_decodes_contention_has_no_contention_bias_left():
    # the profile's cells say 1.2; its AS2D decode met 1.5 where the cells priced 1.2: replay prices 1.5 at
    # every width and depth
    profile = make_profile(rho=(1.2, 1.0))
    scaled = replace(profile.cosched(None), decode=DecodeContention(RHO_TRUE, 1.2, 8))
    assert scaled.ratios(1, 3.0)[0] == pytest.approx(RHO_TRUE)
    assert scaled.ratios(1, 3.0)[1] == pytest.approx(1.0)  # the producer's ratio is not scaled
    assert scaled.dense(2, 4)[0][1] == pytest.approx(RHO_TRUE)
    profile = replace(profile, drafters={name: replace(d, cosched=scaled) for name, d in profile.drafters.items()})
    trace = make_trace(Y, producer=Y, steps=100)
    parts = decomposed(profile, trace, As2dConfig(budget=3, batch=64))
    assert parts[Part.TOTAL].factor == pytest.approx(1.0)


def test_the_decomposition_recovers_a_contention_the_profile_lacks():
    # the producer (steps of 0.25 s, 100 of them, one batch at its end) publishes nothing while the
    # target decodes, natively as priced: the one error is the ratio, 1.2 priced against 1.5 realised
    profile = make_profile(rho=(1.2, 1.0))
    trace = make_trace(Y, producer=Y, steps=100)
    parts = decomposed(profile, trace, As2dConfig(budget=3, batch=64))
    # replay's speedup 8 / (8 x 1.2) over native's 8.8 / (8.8 x 1.5): the bias is the ratio's error
    assert parts[Part.TOTAL].factor == pytest.approx(RHO_TRUE / 1.2)
    assert parts[Part.CONTENTION].factor == pytest.approx(RHO_TRUE / 1.2)
    assert parts[Part.CONTENTION].replay_bias == pytest.approx(1.0)  # the realised contention removes it
    assert parts[Part.PUBLICATION].factor == pytest.approx(1.0)
    assert parts[Part.REMAINS].factor == pytest.approx(1.0)
    # every observation alike: each interval is the point
    assert parts[Part.TOTAL].interval.low == pytest.approx(RHO_TRUE / 1.2)
    assert parts[Part.TOTAL].interval.high == pytest.approx(RHO_TRUE / 1.2)
    # E: every run off by the same ln(1.5 / 1.2) as priced, by nothing with the realised contention
    assert parts[Part.TOTAL].excess_pct == pytest.approx(100 * math.log(RHO_TRUE / 1.2))
    assert parts[Part.CONTENTION].excess_pct == pytest.approx(0, abs=1e-6)
    assert parts[Part.REMAINS].excess_pct is None


def test_the_decomposition_recovers_publications_that_came_late_natively():
    # priced, the producer publishes every 2 tokens after 0.25 s steps, so replay verifies drafts; natively
    # nothing was published in time and every forward verified the root alone, beside the producer
    profile = make_profile()
    trace = make_trace(Y, producer=Y)
    parts = decomposed(profile, trace, As2dConfig(budget=3, batch=2))
    total, contention = parts[Part.TOTAL].factor, parts[Part.CONTENTION].factor
    assert total > 1.5  # replay's drafts make it far faster than native was
    assert parts[Part.PUBLICATION].replay_bias == pytest.approx(1.0)  # with native's publications: exact
    assert parts[Part.REMAINS].factor == pytest.approx(1.0)
    assert contention * parts[Part.PUBLICATION].factor * parts[Part.REMAINS].factor == pytest.approx(total)


def test_the_total_is_the_validations_bias_with_the_same_interval():
    # varied observations over three blocks: the total part and its interval are fidelity's speedup bias
    observations = [WindowReplays(b, f"w{i}", (1.0 + 0.1 * i, 1.05 + 0.02 * b), 1.1 - 0.03 * b + 0.01 * i,
                                  (1.0 + 0.01 * i, 1.02), (1.01, 0.99 + 0.01 * b))
                    for b in range(3) for i in range(3)]
    parts = {p.part: p for p in decompose(observations)}
    stats = fidelity.fidelity_stats([ObservationRecord("local@split", "as2d", Metric.SPEEDUP, o.block, o.window_id,
                                                       o.priced, *o.native) for o in observations], 3, 5)
    assert parts[Part.TOTAL].factor == pytest.approx(stats.bias)
    assert parts[Part.TOTAL].interval.low == pytest.approx(stats.bias_low)
    assert parts[Part.TOTAL].interval.high == pytest.approx(stats.bias_high)
    assert parts[Part.TOTAL].replay_bias == parts[Part.TOTAL].factor
    product = math.prod(parts[p].factor for p in (Part.CONTENTION, Part.PUBLICATION, Part.REMAINS))
    assert product == pytest.approx(parts[Part.TOTAL].factor)
    assert parts[Part.REMAINS].replay_bias is None
    # E of the replay as priced is the validation's, bound included
    assert parts[Part.TOTAL].excess_pct == pytest.approx(stats.excess_pct)
    assert parts[Part.TOTAL].excess_upper_pct == pytest.approx(stats.excess_upper_pct)


def test_a_replay_per_run_is_judged_against_its_own_run():
    # one window, two blocks alike: priced 1.0 against runs at 0.96 and 0.92 of it, ln errors 0.04 and 0.08
    # (E = sqrt(0.04 x 0.08)); with the contention substituted the runs' errors are 0.04 and -0.02 (opposite signs:
    # noise about a replay that is right, E 0); with each run's publications both runs are met exactly
    native = (1 / math.exp(0.04), 1 / math.exp(0.08))
    contention = (1.0, native[1] * math.exp(-0.02))
    observations = [WindowReplays(b, "w0", native, 1.0, contention, native) for b in range(2)]
    parts = {p.part: p for p in decompose(observations)}
    assert parts[Part.TOTAL].excess_pct == pytest.approx(100 * math.sqrt(0.04 * 0.08))
    assert parts[Part.CONTENTION].excess_pct == 0.0
    assert parts[Part.PUBLICATION].excess_pct == pytest.approx(0, abs=1e-6)
    # both blocks alike: each bound is its point
    assert parts[Part.TOTAL].excess_upper_pct == pytest.approx(parts[Part.TOTAL].excess_pct)


def test_one_block_gives_no_interval():
    parts = decompose([WindowReplays(0, "w0", (1.0, 1.0), 1.1, (1.0, 1.0), (1.0, 1.0))])
    assert all(p.interval is None and p.excess_upper_pct is None for p in parts)


def test_publications_that_are_not_batches_are_refused():
    profile = make_profile()
    native, _ = native_run()
    bad = NativeLanes(native.ops, native.producer | {"publish_us": [10, 20], "publish_count": [3, 8],
                                                     "publish_step": [1, 2]}, native.solo_ops)
    with pytest.raises(SpecbenchError, match=r"publish_count \[3, 8\] is not batches of 4"):
        native_lane(bad, 4, profile.cosched(None))
    no_clock = NativeLanes([{"model": "target", "width": 1, "depth": 0, "us": 5}], native.producer, native.solo_ops)
    with pytest.raises(SpecbenchError, match="a target op has no 't_us'"):
        block_contention([no_clock], profile.target_costs, profile.cosched(None))


def test_each_repeat_of_a_run_is_read_beside_its_own_target_only_decode():
    # --repeats 2: the AS2D decode of repeat r is paired with the target-only decode of the same run and repeat
    def record(run, slot, config, repeat, us):
        ops = [{"model": "target", "width": 1, "depth": 0, "us": us, "t_us": 0}]
        return DecodeRecord(0, 0, "dev@shared", "small", run, slot, config, "w", 1, us / 1e6, True, ops,
                            producer={} if config != "target" else None, repeat=repeat)

    decodes = [record(run, slot, config, repeat, 1000 * (10 * repeat + slot + (5 if run == "b" else 0)))
               for run in PairedRun for repeat in (0, 1) for slot, config in enumerate(("target", "as2d"))]
    index = decode_index(decodes)
    for d in decodes[1::2]:
        partner = next(p for p in decodes if (p.run, p.repeat, p.slot) == (d.run, d.repeat, 0))
        assert native_lanes(d, index).solo_ops == partner.ops


def lanes_after(span_end_us: int, forwards: list[tuple[int, int, int, bool]]) -> NativeLanes:
    """Target forwards (width, us, host work after it in us, whether the next plan searched, for 40 ms) from the
    producer's span's end on, the first at its end; the target-only decode beside it at SOLO x the profile's price
    (CT(1) = 1 s)."""
    ops, t, search = [], span_end_us, False
    for depth, (width, us, gap, searches) in enumerate(forwards):
        ops.append({"model": "target", "width": width, "depth": depth, "us": us, "t_us": t + (40_000 if search else 0)}
                   | ({"searched": True, "plan_us": 40_000} if search else {}))
        t = ops[-1]["t_us"] + us + gap
        search = searches
    producer = {"started_us": 0, "step_start_us": [0], "step_us": [span_end_us], "publish_us": []}
    solo = [{"model": "target", "width": 1, "depth": 0, "us": round(1e6 * SOLO)}]
    return NativeLanes(ops, producer, solo)


def test_the_target_alone_after_the_producer_is_its_time_with_host_work_over_its_solo_work_by_width():
    # the profile's price: CT(1) = 1 s, CT(3) = 1.5 s, and 0.1 s of host work after each forward; the run's solo
    # speed is SOLO. After the span: width 3 ran 0.9 x its solo work with its host work, width 1 ran 1.2 x.
    profile = make_profile()
    host = replace(profile.target_costs.decode or DecodeRatio(1.0, 1), host=HostWork(0.1, 10))
    costs = replace(profile.target_costs, decode=host)
    three, one = SOLO * 1.6 * 1e6, SOLO * 1.1 * 1e6
    run = lanes_after(2_000_000, [
        (3, round(0.9 * three) - 50_000, 50_000, True),  # the next plan's search (40 ms) is align_s's, not host work
        (1, round(1.2 * one) - 40_000, 40_000, False),
        (3, round(0.9 * three) - 50_000, 50_000, False),
        (1, round(1.2 * SOLO * 1e6), 0, False)])  # the last forward: no host work after it, priced without
    # a forward before the span's end is no part of it
    early = NativeLanes([{"model": "target", "width": 1, "depth": 0, "us": 500_000, "t_us": 0}, *run.ops],
                        run.producer, run.solo_ops)
    after = after_producer([early], costs)
    assert sorted(after.widths) == [1, 3]
    assert after.widths[3][2] == 2 and after.widths[1][2] == 2
    assert after.widths[3][0] / after.widths[3][1] == pytest.approx(0.9, rel=1e-6)
    assert after.widths[1][0] / after.widths[1][1] == pytest.approx(1.2, rel=1e-6)
    # two forwards are too few for a width's or a class's own ratio: every width is priced at the pooled one
    pooled = sum(v[0] for v in after.widths.values()) / sum(v[1] for v in after.widths.values())
    assert after.at(1) == after.at(3) == after.at(5) == pytest.approx(pooled)
    # with CLASS_FORWARDS, a width's own; else its class's (width 1, or wider), else every width's
    many = AfterProducer({1: (12.0, 10.0, CLASS_FORWARDS), 2: (9.0, 10.0, CLASS_FORWARDS), 4: (1.0, 2.0, 1)})
    assert (many.at(1), many.at(2), many.at(4), many.at(3)) == (1.2, 0.9, pytest.approx(10 / 12), pytest.approx(10 / 12))
    assert AfterProducer({3: (1.0, 2.0, 1)}).at(1) == 0.5  # no class: every width's
    # and the decode contention carries it
    assert decode_contention([lanes_at([(1, 1.5)] * 3)], costs, profile.cosched(None)).after is None


def test_replay_runs_the_target_alone_at_its_ratio_once_the_producer_is_done():
    # the producer's two forwards (0.25 s each) end within the target's first (1 s): every forward after that one
    # costs its price times its width's ratio alone
    profile = make_profile()
    trace = make_trace(Y, producer=Y[:3], steps=3)
    config = As2dConfig(budget=3, batch=2)
    cosched = replace(profile.cosched(None), decode=DecodeContention(1.0, 1.0, 8, after=AfterProducer(
        {1: (7.0, 10.0, CLASS_FORWARDS), 2: (8.0, 10.0, CLASS_FORWARDS)})))
    alone = replace(profile, drafters={n: replace(d, cosched=cosched) for n, d in profile.drafters.items()})
    plain, log = [], []
    simulate_as2d(trace, len(Y), profile, config, log=plain)
    simulate_as2d(trace, len(Y), alone, config, log=log)
    done = list(zip(plain, log, strict=True))[1:]
    assert len(done) >= 3 and {a.width for a, _ in done} == {1, 2}
    for a, b in done:
        assert b.seconds == pytest.approx(a.seconds * (0.7 if a.width == 1 else 0.8))
    assert log[0].seconds < plain[0].seconds  # the first forward's part after the producer too
