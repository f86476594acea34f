"""Aggregates against hand computation on a tiny study (two windows, one device)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from specbench.core import metrics
from specbench.core.budget import select_budget
from specbench.core.methods.configs import As2dConfig, parse_method_specs, row_fields
from specbench.errors import SpecbenchError
from specbench.schemas.results import rows_frame

CONFIGS = {c.label: c for c in parse_method_specs(["target", "as2d:B=1..2", "sd:W=5..8"])}


def rows(spec):
    """spec: {config label: [(window, tokens, decode_s), ...]} -> result rows."""
    out = []
    for config, windows in spec.items():
        for window, tokens, decode_s in windows:
            out.append({"device": "A", **row_fields(CONFIGS[config]), "window_id": window, "dataset": "d",
                        "split": "dev", "tokens": tokens, "decode_s": decode_s, "target_forwards": max(tokens // 2, 1),
                        "proposed": tokens, "accepted": tokens // 2, "multi_token_forwards": 1,
                        "drafter_forwards": 3, "d_s": decode_s / 2, "v_s": decode_s / 2, "o_s": 0.0, "h_s": 0.0,
                        "extrapolated": False, "lossless": True, "source": "replay", "cost_fit": "median",
                        "depth_extrapolated": False})
    return rows_frame(out)[list(out[0])]


STUDY = rows({
    "target": [("w1", 10, 2.0), ("w2", 20, 5.0), ("w3", 0, 0.0)],        # 5 and 4 tokens/s; w3 degenerate
    "as2d[B=1]": [("w1", 10, 1.0), ("w2", 20, 8.0), ("w3", 0, 0.0)],     # 10 (faster), 2.5 (slower: loss 37.5%)
    "as2d[B=2]": [("w1", 10, 1.5), ("w2", 20, 4.0), ("w3", 0, 0.0)],     # 6.67, 5 (both faster)
    "sd[W=5]": [("w1", 10, 4.0), ("w2", 20, 4.0), ("w3", 0, 0.0)],
    "sd[W=6]": [("w1", 10, 4.0), ("w2", 20, 5.0), ("w3", 0, 0.0)],
    "sd[W=7]": [("w1", 10, 2.0), ("w2", 20, 10.0), ("w3", 0, 0.0)],
    "sd[W=8]": [("w1", 10, 1.0), ("w2", 20, 8.0), ("w3", 0, 0.0)],
})


def test_pooled_throughput_and_speedup():
    pooled = metrics.pooled(STUDY).set_index("config")
    assert pooled.at["target", "tokens_per_s"] == 30 / 7
    assert pooled.at["as2d[B=1]", "tokens_per_s"] == 30 / 9
    assert pooled.at["as2d[B=1]", "speedup"] == pytest.approx((30 / 9) / (30 / 7))
    assert pooled.at["target", "degenerate"] == 1
    # SD: mean over W of the pooled throughputs 30/8, 30/9, 30/12, 30/9
    assert pooled.at[metrics.SD_MEAN, "tokens_per_s"] == pytest.approx((30 / 8 + 30 / 9 + 30 / 12 + 30 / 9) / 4)
    assert pd.isna(pooled.at[metrics.SD_MEAN, "decode_s"])


def test_slower_windows_and_losses():
    counts = metrics.window_counts(STUDY).set_index("config")
    b1 = counts.loc["as2d[B=1]"]
    assert (b1["windows"], b1["faster"], b1["slower"]) == (2, 1, 1)  # the degenerate window is excluded
    assert b1["median_loss_pct"] == pytest.approx(37.5) and b1["max_loss_pct"] == pytest.approx(37.5)
    assert counts.loc["as2d[B=2]", "slower"] == 0 and counts.loc["as2d[B=2]", "max_loss_pct"] == 0.0
    # SD per-window mean over W: w1 (2.5 + 2.5 + 5 + 10) / 4 = 5 = target's 5 -> a tie;
    # w2 (5 + 4 + 2 + 2.5) / 4 = 3.375 < 4 -> slower by 15.625 %
    sd = counts.loc[metrics.SD_MEAN]
    assert (sd["faster"], sd["slower"], sd["ties"]) == (0, 1, 1)
    assert sd["max_loss_pct"] == pytest.approx(15.625)


def test_oracle_gap():
    oracle = metrics.oracle(STUDY, ["as2d[B=1]", "as2d[B=2]"]).iloc[0]
    # per window best: w1 1.0 s, w2 4.0 s -> 30 / 5 = 6 tokens/s; deployed (best pooled) B=2: 30 / 5.5
    assert oracle["oracle_tokens_per_s"] == 6.0
    assert oracle["deployed"] == "as2d[B=2]"
    assert oracle["gap_pct"] == pytest.approx(100 * (1 - (30 / 5.5) / 6))
    fixed = metrics.oracle(STUDY, ["as2d[B=1]", "as2d[B=2]"], deployed={"A": "as2d[B=1]"}).iloc[0]
    assert fixed["gap_pct"] == pytest.approx(100 * (1 - (30 / 9) / 6))


def test_counts_and_decomposition_are_ratios_of_sums():
    counts = metrics.counts(STUDY).set_index("config")
    assert counts.at["as2d[B=1]", "tau"] == 30 / (5 + 10 + 1)
    assert counts.at["as2d[B=1]", "acceptance"] == 15 / 30
    # forwards that verified a candidate: unknown where rows with candidates hold no per-position counts
    assert np.isnan(counts.at["as2d[B=1]", "verifications"])
    positioned = STUDY.assign(reached_at=[(2, 1) if m != "target" else () for m in STUDY["method"]])
    assert metrics.counts(positioned).set_index("config").at["as2d[B=1]", "verifications"] == 2 * 3
    parts = metrics.decomposition(STUDY).set_index("config")
    assert parts.at["target", "decode_s"] == 7.0 and parts.at["target", "d_s"] == 3.5


def test_budget_selection_prefers_throughput_then_the_smaller_budget():
    configs = [As2dConfig(budget=1), As2dConfig(budget=2)]
    choice = select_budget(STUDY[STUDY["method"] == "as2d"], configs)
    assert choice.config.budget == 2
    assert choice.margin_pct == pytest.approx(100 * ((30 / 5.5) / (30 / 9) - 1))
    tie = STUDY.copy()
    tie.loc[tie["config"] == "as2d[B=1]", "decode_s"] = tie.loc[tie["config"] == "as2d[B=2]", "decode_s"].values
    assert select_budget(tie[tie["method"] == "as2d"], configs).config.budget == 1
    with pytest.raises(SpecbenchError, match="development windows only"):
        select_budget(STUDY.assign(split="test")[STUDY["method"] == "as2d"], configs)


def test_budget_selection_leaves_out_windows_that_diverged():
    """B=1 diverged on w2 natively: both budgets are then compared on w1 alone (docs/METHODS.md §7.6 Divergent
    windows), where B=1 wins; on every window B=2 would."""
    configs = [As2dConfig(budget=1), As2dConfig(budget=2)]
    study = rows({"as2d[B=1]": [("w1", 10, 1.0), ("w2", 0, 0.0)], "as2d[B=2]": [("w1", 10, 2.0), ("w2", 20, 0.5)]})
    study.loc[(study["config"] == "as2d[B=1]") & (study["window_id"] == "w2"), "lossless"] = False
    choice = select_budget(study, configs)
    assert choice.config.budget == 1 and choice.windows == 1


def test_speedups_need_target_only_rows():
    with pytest.raises(SpecbenchError, match="no target-only rows"):
        metrics.pooled(STUDY[STUDY["method"] != "target"])


def test_overheads_from_a_native_as2d_result():
    from specbench.world.overheads import overheads_from_results

    def run(started, costs, plans):
        ops = [{"model": "target", "plan_us": us, "searched": searched} for us, searched in plans]
        return {"kind": "decode", "producer": {"started_us": started, "publish_us": [0] * len(costs),
                                               "publish_cost_us": sum(costs)}, "ops": ops}

    results = [run(40, [1, 3], [(5, False), (30, True)]), run(60, [2], [(7, True)]), run(50, [], [(9, False)])]
    got = overheads_from_results(results)
    # startup: median of 40, 60, 50 us; publish: 6 us over 3 batches; align: median of searched rounds (30, 7);
    # no producer forward recorded: no host work per step measured
    assert got == {"producer_startup_s": 50e-6, "publish_s": 2e-6, "align_s": 18.5e-6, "producer_step_s": 0.0}


def test_the_producers_host_work_per_step_is_the_gaps_between_its_forwards_less_publishing():
    from specbench.world.overheads import producer_step_us

    # started at 100 us; forwards 130-1130, 1150-2150, 2190-3190; publishes after steps 1 and 3 (the last,
    # after every forward), 4 us each: gaps 30, 20 and 40 us hold step 1's publish once
    producer = {"started_us": 100, "step_start_us": [130, 1150, 2190], "step_us": [1130, 2150, 3190],
                "publish_step": [1, 3], "publish_cost_us": 8}
    assert producer_step_us(producer) == pytest.approx((30 + 20 + 40 - 4) / 3)
    assert producer_step_us(producer | {"step_start_us": [], "step_us": []}) is None


def _as2d_record(t_us, producer_spans, decode_s=0.031):
    """A runner as2d record: 10 ms target forwards starting at `t_us`, producer forwards
    over `producer_spans` (started at 1 ms)."""
    return {"tokens": [5, 6, 7, 8], "decode_s": decode_s, "text": "x",
            "ops": [{"model": "target", "width": 1, "accepted": 0, "us": 10_000, "t_us": t} for t in t_us],
            "producer": {"started_us": 1_000, "step_start_us": [a for a, _ in producer_spans],
                         "step_us": [b for _, b in producer_spans]}}


def test_native_as2d_rows_take_o_and_h_from_the_two_lanes_timelines():
    from specbench.core.methods.configs import As2dConfig
    from specbench.schemas.windows import make_text_window
    from specbench.world.decode_run import decode_row

    window = make_text_window("w", "some text", "Repeat this.", 16, "d", "test")
    # target busy [0, 10), [10.5, 20.5), [21, 31) ms; producer [1, 16) ms in three forwards and one
    # from 30 ms to 40 ms, past the 31 ms clock: 1 ms of it counts, not as a finished forward.
    result = _as2d_record([0, 10_500, 21_000], [(1_000, 6_000), (6_000, 11_000), (11_000, 16_000), (30_000, 40_000)])
    row = decode_row(result, window, "local", As2dConfig(budget=3))
    assert row.drafter_forwards == 3 and row.v_s == 0.03
    assert abs(row.d_s - 0.016) < 1e-12
    # both busy: [1, 10) + [10.5, 16) + [30, 31) ms; neither: [20.5, 21) ms
    assert abs(row.o_s - 0.0155) < 1e-12 and abs(row.h_s - 0.0005) < 1e-12
    assert abs(row.d_s + row.v_s - row.o_s + row.h_s - row.decode_s) < 1e-12


def test_native_as2d_lanes_that_do_not_decompose_the_clock_are_a_runner_bug():
    from specbench.core.methods.configs import As2dConfig
    from specbench.schemas.windows import make_text_window
    from specbench.world.decode_run import decode_row

    window = make_text_window("w", "some text", "Repeat this.", 16, "d", "test")
    overlapping = _as2d_record([0, 5_000, 21_000], [(1_000, 6_000)])  # two target forwards at once
    with pytest.raises(SpecbenchError, match="do not decompose the decode clock"):
        decode_row(overlapping, window, "local", As2dConfig(budget=3))
    old_runner = _as2d_record([0, 10_500, 21_000], [])
    del old_runner["producer"]["step_start_us"]
    with pytest.raises(SpecbenchError, match="step_start_us"):
        decode_row(old_runner, window, "local", As2dConfig(budget=3))

def test_a_configuration_best_on_every_window_has_no_gap():
    # its rows in another order than the oracle's per-window minima: plain sums of 0.1, 0.2, 0.3 differ in the
    # last bit by order, which printed "gap -0.0%"
    study = rows({"target": [("w1", 1, 1.0), ("w2", 1, 1.0), ("w3", 1, 1.0)],
                  "as2d[B=1]": [("w3", 1, 0.3), ("w2", 1, 0.2), ("w1", 1, 0.1)],
                  "as2d[B=2]": [("w1", 1, 0.5), ("w2", 1, 0.5), ("w3", 1, 0.5)]})
    gap = metrics.oracle(study, ["as2d[B=1]", "as2d[B=2]"]).iloc[0]
    assert gap["deployed"] == "as2d[B=1]" and gap["gap_pct"] == 0.0 and f"{gap['gap_pct']:.1f}" == "0.0"
