"""The producer's pace scatter: how a profile measures it from its AS2D decodes (core/decomposition.pace_scatter),
and AS2D's replay priced at the mean over it (reference.expected_as2d, the lockstep alike)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

from specbench.core.decomposition import NativeLanes, pace_scatter
from specbench.core.methods.configs import As2dConfig, TargetConfig
from specbench.core.pricing import DecodeContention
from specbench.core.replay.bulk import replay_study
from specbench.core.replay.reference import priced_lane, replay_window, scaled_timeline, simulate_as2d
from specbench.schemas.profiles import Overheads
from specbench.schemas.results import rows_frame
from specbench.schemas.traces import ModelRef, TraceFile
from tests.helpers import make_profile, make_trace, window_for

Y = [10, 11, 12, 13, 14, 15, 16, 17, 2]
WRONG = [10, *range(90, 98)]
"""A producer that agrees on the prefill's token only: every draft it publishes is rejected, so the earlier its
first batch lands, the more of the target's forwards verify in vain."""
CONFIG = As2dConfig(budget=3, batch=4, drafter="drafter")


def paced_profile(sigma: float | None):
    """The hand profile (CT(w) = 1 + 0.25 (w - 1) s, CD = 0.25 s, ratios 1) with 0.05 s of host work per producer
    step, so that the first batch of 4 is visible after 0.95 s of producer work: just before the target's first
    forward ends at 1 s. `sigma`: the pace scatter its decodes measured."""
    profile = make_profile(overheads=Overheads(producer_step_s=0.05))
    drafter = profile.drafter("drafter")
    decode = DecodeContention(1.0, 1.0, 40, pace_sigma=sigma, pace_pairs=0 if sigma is None else 10)
    return dataclasses.replace(profile, drafters={"drafter": dataclasses.replace(
        drafter, cosched=dataclasses.replace(drafter.cosched, decode=decode))})


def test_replay_prices_the_mean_over_the_pace_scatter_where_the_race_is_a_knife_edge():
    trace = make_trace(Y, producer=WRONG)
    profile = paced_profile(0.2)
    one_timeline = simulate_as2d(trace, 32, profile, CONFIG)[0].decode_s
    assert priced_lane(trace, profile, CONFIG).timeline.publish_work[0] == pytest.approx(0.95)
    # what a device whose producer's pace scatters lognormally by 0.2 from decode to decode takes on average
    lane = priced_lane(trace, profile, CONFIG)
    scales = np.exp(0.2 * np.random.default_rng(1).standard_normal(4000))
    drawn = np.mean([simulate_as2d(trace, 32, profile, CONFIG, lane=dataclasses.replace(
        lane, timeline=scaled_timeline(lane.timeline, f)))[0].decode_s for f in scales])
    expected = replay_window(window_for(trace, 32), trace, profile, CONFIG).decode_s
    assert one_timeline - drawn > 0.03 * drawn  # the timeline as priced sits on the slow side of the edge
    assert abs(expected - drawn) < abs(one_timeline - drawn) / 3
    # without a measured scatter, the one timeline
    assert replay_window(window_for(trace, 32), trace, paced_profile(None), CONFIG).decode_s == one_timeline


def test_the_bulk_replay_prices_the_pace_scatter_as_the_reference_does_to_the_bit():
    traces = {f"w{i}": make_trace(Y[: 5 + i] + [2], producer=WRONG, window_id=f"w{i}") for i in range(4)}
    windows = [window_for(t, 32) for t in traces.values()]
    profile = paced_profile(0.2)
    configs = [TargetConfig(), CONFIG, dataclasses.replace(CONFIG, budget=2, batch=2)]
    files = {"drafter": TraceFile(ModelRef("t", "t", 1 << 20), ModelRef("drafter", "d", 1 << 20), traces)}
    finished: list[int] = []
    bulk = replay_study(windows, files, [profile], configs, progress=finished.append)
    reference = rows_frame([dataclasses.asdict(replay_window(w, traces[w.window_id], profile, c))
                            for c in configs for w in windows])
    order = ["config", "window_id"]
    pd.testing.assert_frame_equal(bulk.sort_values(order).reset_index(drop=True),
                                  reference[bulk.columns].sort_values(order).reset_index(drop=True),
                                  check_dtype=False, check_exact=True)
    assert sum(finished) == len(configs) * len(windows)  # window replays, not the pace nodes behind them


def lanes(window: str, target_s: float, producer_s: float, forwards: int = 4) -> NativeLanes:
    """A native decode of `forwards` width-1 target forwards of `target_s` each beside as many producer forwards of
    `producer_s` each, both from the clock's start."""
    ops = [{"model": "target", "width": 1, "depth": i, "us": 1e6 * target_s, "t_us": 1e6 * target_s * i}
           for i in range(forwards)]
    producer = {"started_us": 0.0, "step_start_us": [1e6 * producer_s * i for i in range(forwards)],
                "step_us": [1e6 * producer_s * (i + 1) for i in range(forwards)]}
    return NativeLanes(ops, producer, [], drafter_prompt=0, window_id=window)


def test_the_pace_scatter_is_the_spread_of_the_producers_pace_against_the_targets_within_each_window():
    profile = make_profile()
    costs, drafter = profile.target_costs, profile.drafter("drafter").costs  # CT(1) = 1 s, CD(1) = 0.25 s
    e = math.exp(0.1)
    runs = [lanes("a", 1.0, 0.25 * e), lanes("a", 1.0, 0.25 / e),  # the producer 0.1 faster, then slower, in ln
            lanes("b", 2.0, 0.5 * e * e), lanes("b", 2.0, 0.5)]  # both lanes twice their price: only the spread counts
    sigma, freedom = pace_scatter(runs, costs, drafter)
    assert freedom == 2
    assert sigma == pytest.approx(math.sqrt((0.1 ** 2 * 2 + 0.1 ** 2 * 2) / 2))
    # the target's pace moves it the other way: ln(producer pace) less ln(target pace)
    sigma, _ = pace_scatter([lanes("a", 1.0 * e, 0.25), lanes("a", 1.0 / e, 0.25), *runs[2:]], costs, drafter)
    assert sigma == pytest.approx(math.sqrt(0.04 / 2))
    # a window decoded once says nothing of the scatter; fewer than 2 degrees of freedom measure none
    assert pace_scatter([*runs[:2], lanes("c", 1.0, 0.3)], costs, drafter) is None
    assert pace_scatter([dataclasses.replace(r, window_id=None) for r in runs], costs, drafter) is None
