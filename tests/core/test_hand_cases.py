"""Hand-worked cases: exact times and counts for each method on tiny traces.

Profile (tests.helpers.make_profile): target CT(w) = 1 + 0.25 (w - 1) s, drafter
CD(n) = 0.25 + 0.125 (n - 1) s, flat in depth; every number below is exact in binary.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from specbench.core.methods.configs import As2dConfig, SdConfig, SpecAsrConfig, TargetConfig
from specbench.core.pricing import DecodeContention
from specbench.core.replay.bulk import replay_study
from specbench.core.replay.reference import priced_lane, replay_window
from specbench.schemas.profiles import Overheads
from specbench.schemas.traces import ModelRef, RecycleAnswer, TraceFile
from tests.helpers import linear_costs, make_profile, make_trace, perfect_drafts, window_for

EOS = 2
Y = [10, 11, 12, 13, 14, 15, EOS]  # N = 7: y[0] from prefill, 6 tokens to decode


def run(config, trace, cap=32, profile=None):
    return replay_window(window_for(trace, cap), trace, profile or make_profile(), config)


def test_target_only_prices_one_single_step_per_token():
    row = run(TargetConfig(), make_trace(Y))
    assert (row.tokens, row.target_forwards, row.decode_s) == (6, 6, 6.0)
    assert (row.d_s, row.v_s, row.o_s, row.h_s) == (0.0, 6.0, 0.0, 0.0)
    assert row.tau == 1.0 and row.multi_token_forwards == 0 and row.lossless


def test_sd_full_acceptance_with_bonus():
    # W=3: t=1 ingest 1 (0.25) + 1 step (0.25) + CT(3) (1.5), commits 3 (2 + bonus) -> t=4;
    # t=4 ingest 2 (last draft + bonus: 0.375) + 1 step + CT(3), commits 3 -> t=7 = N.
    row = run(SdConfig(width=3), make_trace(Y, drafts=perfect_drafts(Y)))
    assert row.decode_s == 0.25 + 0.25 + 1.5 + 0.375 + 0.25 + 1.5
    assert (row.target_forwards, row.proposed, row.accepted, row.multi_token_forwards) == (2, 4, 4, 2)
    assert (row.d_s, row.v_s, row.drafter_forwards) == (1.125, 3.0, 4)
    assert row.tau == 3.0


@pytest.mark.parametrize("depth", [0, 1, 2])
def test_sd_rejection_at_every_depth(depth):
    # W=4 (3 drafts) at t=1: the draft is wrong at position `depth`; afterwards perfect.
    drafts = perfect_drafts(Y)
    drafts[1] = list(Y[1:4])
    drafts[1][depth] = 99
    row = run(SdConfig(width=4), make_trace(Y, drafts=drafts))
    first_round = 0.25 + 2 * 0.25 + 1.75  # ingest 1, two steps, CT(4)
    t = 1 + depth + 1  # accepted `depth`, then the correction
    # later rounds: ingest 1 after the rejection, then 2 after each full acceptance
    rounds, time, new, accepted = 1, first_round, 1, depth
    while t < len(Y):
        k = min(3, 32 - t - 1, len(Y) - t)  # perfect drafts end at EOS
        time += (0.25 + 0.125 * (new - 1)) + (k - 1) * 0.25 + (1.0 + 0.25 * k)
        committed = min(k + 1, len(Y) - t)
        accepted += k
        t += committed
        rounds += 1
        new = 2
    assert row.decode_s == time
    assert row.target_forwards == rounds
    assert row.accepted == accepted


def test_sd_eos_inside_a_draft_ends_the_window():
    # The draft continues past EOS; accepting EOS commits it and nothing follows.
    drafts = perfect_drafts(Y)
    drafts[4] = [Y[4], Y[5], EOS, 77, 78]
    row = run(SdConfig(width=8), make_trace(Y, drafts=drafts))
    # t=1: 6 drafts all correct (Y[1:7] ends with EOS), commits min(7, 6) = 6 in one round.
    assert (row.target_forwards, row.tokens, row.accepted) == (1, 6, 6)
    assert row.decode_s == 0.25 + 5 * 0.25 + 1.0 + 0.25 * 6


def test_sd_cap_truncates_drafts_and_output():
    y = [10, 11, 12, 13, 14]  # stopped by a cap of 5 tokens
    row = run(SdConfig(width=8), make_trace(y, drafts=perfect_drafts(y + [15, 16, 17])[:5], stop="cap"), cap=5)
    # t=1: room for cap - t - 1 = 3 drafts, width 4; all accepted + bonus = 4 tokens -> t=5 = cap.
    assert (row.target_forwards, row.proposed, row.tokens) == (1, 3, 4)
    assert row.decode_s == 0.25 + 2 * 0.25 + 1.75


def test_sd_p_min_stops_drafting():
    conf = [[0.9, 0.9, 0.1, 0.9, 0.9, 0.9, 0.9]] * len(Y)
    row = run(SdConfig(width=8, p_min=0.5), make_trace(Y, drafts=perfect_drafts(Y), draft_conf=conf))
    # Every round drafts 2 tokens (the third is below p_min): widths 3, commits 3 each.
    assert (row.target_forwards, row.proposed) == (2, 4)
    # Per round: ingest + one step on draft 1 + the probe on draft 2 that saw 0.1 < p_min.
    assert row.drafter_forwards == 6
    assert row.decode_s == 2 * (3 * 0.25 + 1.5)


def test_specasr_recycles_the_tail_after_a_substitution():
    y = [10, 11, 12, 13, 14, 15, 16, EOS]
    drafts = perfect_drafts(y)
    drafts[1] = [11, 99, 13, 14, 15]  # substitution at position 1; the tail 13 14 15 stays aligned
    label = SpecAsrConfig(k_max=4, tau=0.5).trace_label
    recycle = {label: {(3, (13, 14)): RecycleAnswer(top1=(13, 14, 15), conf=(0.9, 0.9, 0.9), kept=2,
                                                    cont=(15, 16, EOS), cont_conf=(0.9, 0.9, 0.9))}}
    trace = make_trace(y, drafts=drafts, recycle=recycle)
    row = run(SpecAsrConfig(k_max=4, tau=0.5), trace)
    # t=1: ingest 1 + 3 steps + CT(5) = 0.25 + 0.75 + 2.0; accepts 11, rejects 99, commits 12 -> t=3, tail (13, 14)
    # t=3: batched ingest [12, 13, 14] CD(3)=0.5, keeps 13 14, new 15 16 (one step), width 5: CT(5)=2.0
    #      accepts 13 14 15 16 -> commits 5 -> t=8 = N.
    assert row.decode_s == (0.25 + 0.75 + 2.0) + (0.5 + 0.25 + 2.0)
    assert (row.target_forwards, row.proposed, row.accepted, row.drafter_forwards) == (2, 8, 5, 6)


def test_specasr_recycling_ingest_is_priced_with_a_row_per_token():
    """The batched ingest keeps a logits row per token, so it comes from the all-rows table."""
    y = [10, 11, 12, 13, 14, 15, 16, EOS]
    drafts = perfect_drafts(y)
    drafts[1] = [11, 99, 13, 14, 15]
    label = SpecAsrConfig(k_max=4, tau=0.5).trace_label
    recycle = {label: {(3, (13, 14)): RecycleAnswer(top1=(13, 14, 15), conf=(0.9, 0.9, 0.9), kept=2,
                                                    cont=(15, 16, EOS), cont_conf=(0.9, 0.9, 0.9))}}
    trace = make_trace(y, drafts=drafts, recycle=recycle)
    profile = make_profile()
    drafter = profile.drafters["drafter"]
    all_rows = linear_costs(0.5, 0.25, 17, "hand drafter, all rows", (0, 1024))  # CD_all(3) = 1.0
    priced = replace(profile, drafters={"drafter": replace(drafter, all_rows_costs=all_rows)})
    config = SpecAsrConfig(k_max=4, tau=0.5)
    row = run(config, trace, profile=priced)
    # as the case above, with the t=3 ingest CD_all(3) = 1.0 in place of CD(3) = 0.5; the t=1
    # ingest keeps only its last row and stays CD(1) = 0.25
    assert row.decode_s == (0.25 + 0.75 + 2.0) + (1.0 + 0.25 + 2.0)
    bulk = replay_study([window_for(trace, 32)], {"drafter": TraceFile(ModelRef("t", "t", 1 << 20), ModelRef("drafter", "d", 1 << 20), {trace.window_id: trace})}, [priced], [config])
    assert bulk["decode_s"].tolist() == [row.decode_s]


def test_specasr_missing_recorded_query_is_an_error():
    y = [10, 11, 12, 13, 14, 15, 16, EOS]
    drafts = perfect_drafts(y)
    drafts[1] = [11, 99, 13, 14, 15]
    with pytest.raises(Exception, match=r"no recorded recycling queries for configuration specasr\[k_max=4,tau=0.5\]"):
        run(SpecAsrConfig(k_max=4, tau=0.5), make_trace(y, drafts=drafts))


def test_as2d_producer_never_ready_equals_target_only():
    profile = make_profile(overheads=Overheads(producer_startup_s=1e9, align_s=0.5))
    trace = make_trace(Y, producer=Y)
    as2d = run(As2dConfig(budget=7), trace, profile=profile)
    target = run(TargetConfig(), trace, profile=profile)
    assert as2d.decode_s == target.decode_s == 6.0
    assert (as2d.target_forwards, as2d.proposed, as2d.d_s, as2d.o_s, as2d.h_s) == (6, 0, 0.0, 0.0, 0.0)


def test_as2d_producers_host_work_beside_the_target_takes_the_time_it_was_measured_to_take():
    # producer_step_s = 0.5 s was measured between the producer's forwards in AS2D decodes where the producer met a
    # ratio of 2 beside the target: 0.25 s of solo work, which processor sharing stretches back to 0.5 s
    overheads = Overheads(publish_s=0.25, producer_step_s=0.5)
    profile = make_profile(rho=(1.0, 2.0), overheads=overheads)
    drafter = profile.drafters["drafter"]
    met = DecodeContention(1.0, 1.0, 40, producer=2.0, producer_priced=2.0, producer_forwards=40)
    measured = replace(profile, drafters={"drafter": replace(drafter, cosched=replace(drafter.cosched, decode=met))})
    trace = make_trace(Y, producer=Y)
    lane = priced_lane(trace, measured, As2dConfig(budget=7, batch=4))
    # step 1: CD(1) = 0.25 s and 0.25 s of host work; the batch published at step 3 adds 0.125 s
    assert list(np.diff(lane.timeline.cum)[:4]) == [0.25, 0.5, 0.5, 0.625]
    # without a ratio met in AS2D decodes the measurements enter as they are
    cells = priced_lane(trace, profile, As2dConfig(budget=7, batch=4))
    assert list(np.diff(cells.timeline.cum)[:4]) == [0.5, 0.75, 0.75, 1.0]


def test_as2d_producer_far_ahead():
    y = [10, 11, 12, 13, 14, 15, 16, 17, EOS]
    profile = make_profile(rho=(1.0, 1.0))
    profile_cheap = _cheap_drafter(profile, 0.125)
    row = run(As2dConfig(budget=7), make_trace(y, producer=y), cap=9, profile=profile_cheap)
    # t=1: nothing published -> single step (1 s), in which the producer's 8 forwards x 0.125 s
    # (z[0] is the prefill's) finish the stream. t=2: root y[1] = z[1]; candidates z[2:8] (room
    # cap - t - 1 = 6), width 7: 2.5 s, all accepted.
    assert row.decode_s == 3.5
    assert (row.target_forwards, row.proposed, row.accepted, row.drafter_forwards) == (2, 6, 6, 8)
    assert (row.d_s, row.v_s, row.o_s, row.h_s) == (1.0, 3.5, 1.0, 0.0)
    assert row.decode_s == row.d_s + row.v_s - row.o_s + row.h_s


def test_as2d_processor_sharing_slows_both_lanes():
    y = [10, 11, 12, 13, 14, 15, 16, 17, EOS]
    profile = _cheap_drafter(make_profile(rho=(2.0, 2.0)), 9 / 64)
    row = run(As2dConfig(budget=7), make_trace(y, producer=y), cap=9, profile=profile)
    # Shared at half speed: the first single step (1 s solo) takes 2 s, in which the producer does
    # 1 s of work = 7 of its 8 forwards (9/64 s each; z[0] is the prefill's), completing batch 0;
    # the last 0.125 s runs shared during the next forward.
    # t=2: width 7 (2.5 s solo): 0.125 s producer work takes 0.25 s, during which the target does
    # 0.125 s of its work; the rest (2.375 s) runs alone.  T = 2 + 0.25 + 2.375.
    assert row.decode_s == 4.625
    assert (row.o_s, row.d_s) == (2.25, 2.25)


def test_as2d_vocabulary_mapping_shifts():
    # Mapped tokens come unevenly from producer steps (0, 2 or 1 target tokens per step):
    # the batch of 8 tokens is complete after step 9, so only then is it visible.
    y = [10, 11, 12, 13, 14, 15, 16, 17, EOS]
    step = [0, 1, 1, 3, 4, 6, 6, 9, 10]
    profile = _cheap_drafter(make_profile(), 0.125)
    row = run(As2dConfig(budget=7), make_trace(y, producer=y, step=step, steps=11), cap=9, profile=profile)
    # single step 1 s (8 producer forwards: batch not complete); t=2, still unpublished (needs step 9
    # = 9 forwards = 1.125 s of work) -> second single step (t=3, time 2); then z[3:8] (5 tokens;
    # room 5) width 6: 2.25 s, all accepted + bonus -> t=9.
    assert (row.target_forwards, row.proposed, row.accepted) == (3, 5, 5)
    assert row.decode_s == 1.0 + 1.0 + 2.25


def test_as2d_anchor_recovers_after_producer_inserts_a_token():
    y = [10, 11, 12, 13, 14, 15, 16, 17, EOS]
    z = [10, 11, 12, 50, 13, 14, 15, 16, 17, EOS]  # the producer says one extra token
    profile = _cheap_drafter(make_profile(), 0.125)
    row = run(As2dConfig(budget=7), make_trace(y, producer=z), cap=9, profile=profile)
    assert row.lossless
    # round 1: single step; round 2: z[2:8] = 12 50 ..: accept 12, correct 13 (t=4); round 3: the
    # anchor search finds 13 at z[4] and proposes z[5:9] = 14 15 16 17 (room cap - t - 1 = 4)
    # -> all accepted, EOS is the bonus.
    assert (row.target_forwards, row.accepted) == (3, 5)


def _cheap_drafter(profile, step_s):
    from dataclasses import replace

    from tests.helpers import linear_costs

    drafter = profile.drafters["drafter"]
    cheap = replace(drafter, costs=linear_costs(step_s, step_s, 17, "cheap drafter", (0, 1024)))
    return replace(profile, drafters={"drafter": cheap})
