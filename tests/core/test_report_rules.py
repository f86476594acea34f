"""Report rules on hand-built rows: divergent windows, the budget file's configuration, depths
beyond the profile's measured range."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from specbench.app.report import LoadedResults, build_tables
from specbench.cli import main
from specbench.core import stats
from specbench.core.budget import BudgetChoice
from specbench.core.methods.configs import As2dConfig, SdConfig, TargetConfig, parse_method_specs, row_fields
from specbench.core.pricing import CoSchedule, CostFit
from specbench.core.replay.bulk import replay_study
from specbench.schemas.budgets import save_budget
from specbench.schemas.profiles import DeviceInfo, DeviceProfile, DrafterProfile, ModelId
from specbench.schemas.results import ResultsDir, WindowResult
from specbench.schemas.traces import ModelRef, TraceFile
from specbench.schemas.windows import make_text_window
from specbench.world.decode_run import divergence_row
from tests.helpers import linear_costs, make_trace, perfect_drafts, results_manifest

WINDOWS = {w: make_text_window(w, f"source {w}", "Repeat.", 64, "d", "test") for w in ("w1", "w2", "w3")}
TOKENS = {"w1": 10, "w2": 20, "w3": 30}
CONFIGS = {c.label: c for c in parse_method_specs(["target", "as2d:B=3|7", "as2d:B=3|7,drafter=big|small",
                                                   "specasr:k_max=3,drafter=big|small", "sd:W=5..8"])}


def row(device, config, window, decode_s, source="replay", fit="median"):
    w = WINDOWS[window]
    return WindowResult(device=device, **row_fields(CONFIGS[config]), window_id=window,
                        window_sha256=w.window_sha256, dataset=w.dataset, split=w.split.value,
                        tokens=TOKENS[window], decode_s=decode_s, target_forwards=TOKENS[window], proposed=0,
                        accepted=0, multi_token_forwards=0, drafter_forwards=0, d_s=0.0, v_s=decode_s, o_s=0.0, h_s=0.0,
                        extrapolated=False, lossless=True, source=source, cost_fit=fit)


def write_results(directory, rows):
    results = ResultsDir(directory)
    results.open(results_manifest(mode="replay"), resume=False)
    results.append(rows)
    return directory


def report_json(*args):
    result = CliRunner().invoke(main, ["report", *map(str, args), "--format", "json"])
    tables = {t["title"]: t["rows"] for t in json.loads(result.stdout)} if result.exit_code == 0 else {}
    return result, tables


def by(rows, **match):
    found = [r for r in rows if all(r[k] == v for k, v in match.items())]
    assert len(found) == 1, (match, rows)
    return found[0]


# replay decode seconds per (config, window); native runs take 1.25 x as long
REPLAY = {"target": {"w1": 2.0, "w2": 4.0, "w3": 5.0},
          "as2d[B=3]": {"w1": 1.0, "w2": 1.0, "w3": 4.0},
          "as2d[B=7]": {"w1": 4.0, "w2": 2.0, "w3": 3.0}}


def test_a_divergent_window_leaves_every_aggregate_of_its_device(tmp_path):
    rows = []
    for config, times in REPLAY.items():
        for window, seconds in times.items():
            rows.append(row("A", config, window, seconds))
            rows.append(row("B", config, window, seconds))  # B never diverged: it keeps w2
            if config == "as2d[B=3]":  # co-scheduling sensitivity rows: twice and half the time
                rows += [row("A", config, window, 2 * seconds, fit="min"),
                         row("A", config, window, seconds / 2, fit="max")]
            if (config, window) == ("as2d[B=7]", "w2"):
                rows.append(divergence_row(WINDOWS[window], "A", As2dConfig(budget=7)))
            else:
                rows.append(row("A", config, window, 1.25 * seconds, source="native"))
    directory = write_results(tmp_path / "r", rows)
    # its record in the run's divergences.jsonl: the report's table shows its explanation
    (Path(directory) / "divergences.jsonl").write_text(json.dumps(
        {"device": "A", "window_id": "w2", "config": "as2d[B=7]", "position": 4, "expected": 7, "got": 9,
         "explanation": "near-tie"}) + "\n")
    result, tables = report_json(directory, "--macro")
    assert result.exit_code == 0, result.output

    # by hand, device A without w2: tokens 10 + 30 over the seconds of w1 and w3
    without = {c: 40 / (t["w1"] + t["w3"]) for c, t in REPLAY.items()}
    with_w2 = {c: 60 / sum(t.values()) for c, t in REPLAY.items()}
    assert without == {"target": 40 / 7, "as2d[B=3]": 8.0, "as2d[B=7]": 40 / 7}
    assert all(without[c] != with_w2[c] for c in REPLAY)
    pooled = tables["Pooled decode throughput"]
    for config in REPLAY:
        a, b = by(pooled, device="A", config=config), by(pooled, device="B", config=config)
        assert (a["windows"], a["tokens"]) == (2, 40) and a["tokens_per_s"] == pytest.approx(without[config])
        assert a["speedup"] == pytest.approx(without[config] / without["target"])
        assert (b["windows"], b["tokens"]) == (3, 60) and b["tokens_per_s"] == pytest.approx(with_w2[config])

    assert {r["windows"] for r in tables["Windows faster / slower than target-only"] if r["device"] == "A"} == {2}
    assert by(tables["Time decomposition T = D + V - O + H (seconds)"], device="A", config="target")["decode_s"] == 7.0
    macro = tables["Macro-average over datasets"]
    assert by(macro, device="A", config="as2d[B=3]", dataset="d")["tokens_per_s"] == pytest.approx(8.0)
    assert by(macro, device="A", config="as2d[B=3]", dataset="mean over datasets")["tokens_per_s"] == pytest.approx(8.0)
    # oracle on A: per window the faster of B=3 and B=7: w1 1.0 s, w3 3.0 s (w2's 0-second row would have won)
    oracle = by(tables["Oracle over the AS2D catalog (deployed = best pooled)"], device="A")
    assert (oracle["windows"], oracle["oracle_tokens_per_s"]) == (2, 10.0)
    sensitivity = by(tables["Sensitivity to extrapolated co-scheduling ratios (tokens/s)"], device="A")
    assert (sensitivity["median"], sensitivity["min"], sensitivity["max"]) == (8.0, 4.0, 16.0)
    # fidelity pairs only w1 and w3 of A; native is 1.25 x slower: |1.25 - 1| = 25 %
    fidelity = tables["Replay fidelity (replay vs native throughput)"]
    assert {(r["device"], r["windows"]) for r in fidelity} == {("A", 2)}
    assert all(r["mean_abs_error_pct"] == pytest.approx(25.0) for r in fidelity)

    listed = tables["Divergent windows, excluded from every table (1 of 3 windows on A)"]
    assert listed == [{"device": "A", "window_id": "w2", "dataset": "d", "config": "as2d[B=7]", "source": "native",
                       "explanation": "near-tie"}]
    assert "warning: divergent windows, excluded from every table (1 of 3 windows on A); see that table" in result.stderr



def test_the_divergent_table_counts_windows_per_device_against_the_windows_each_ran():
    """Two placements of one 8-window study, two windows diverged on each: 2 of 8 twice, never "4 windows"."""
    from specbench.app.report.tables import divergent_count

    every = pd.DataFrame([{"device": d, "window_id": f"w{i}"} for d in ("p@split", "p@shared") for i in range(8)]
                         + [{"device": "q", "window_id": "w0"}])
    diverged = pd.DataFrame([{"device": d, "window_id": w, "config": c} for d in ("p@split", "p@shared")
                             for w in ("w1", "w5") for c in ("sd", "as2d")])
    assert divergent_count(diverged, every) == "2 of 8 windows on p@shared, 2 of 8 on p@split"
    assert divergent_count(diverged[diverged["device"] == "p@split"].head(1), every) == "1 of 8 windows on p@split"

# SD decode seconds per W on the same three windows
SD_TIMES = {"sd[W=5]": {"w1": 3.0, "w2": 3.0, "w3": 3.0}, "sd[W=6]": {"w1": 2.0, "w2": 5.0, "w3": 6.0},
            "sd[W=7]": {"w1": 1.0, "w2": 6.0, "w3": 2.0}, "sd[W=8]": {"w1": 4.0, "w2": 4.0, "w3": 4.0}}


def test_speedup_intervals_and_mean_window_speedup_are_those_of_the_rows(tmp_path):
    times = {**REPLAY, **SD_TIMES}
    rows = [row("A", config, window, seconds) for config, ts in times.items() for window, seconds in ts.items()]
    result, tables = report_json(write_results(tmp_path / "r", rows))
    assert result.exit_code == 0, result.output
    pooled = tables["Pooled decode throughput"]
    tokens = np.array([TOKENS[w] for w in WINDOWS], dtype=float)
    seconds = {c: np.array([ts[w] for w in WINDOWS]) for c, ts in times.items()}
    target = by(pooled, config="target")
    assert target["speedup_low"] is None and target["speedup_high"] is None and target["mean_window_speedup"] == 1.0
    for config in [*REPLAY, *SD_TIMES][1:]:
        got = by(pooled, config=config)
        # paired by window with target-only: the interval stats gives on the same rows
        interval = stats.pooled_ratio_interval(tokens, seconds[config], tokens, seconds["target"])
        assert (got["speedup_low"], got["speedup_high"]) == (interval.low, interval.high)
        assert interval.low < got["speedup"] < interval.high
        # each window: target's seconds / the configuration's (same tokens), then the plain mean
        assert got["mean_window_speedup"] == pytest.approx(np.mean(seconds["target"] / seconds[config]), rel=1e-12)
    # as2d[B=3] by hand: per window 2/1, 4/1, 5/4; pooled (60/6) / (60/11)
    b3 = by(pooled, config="as2d[B=3]")
    assert b3["mean_window_speedup"] == pytest.approx(7.25 / 3) and b3["speedup"] == pytest.approx(11 / 6)

    # SD's mean over W: the mean of the four pooled speedups, its interval from resampling all four together
    mean = by(pooled, config="sd[W=5..8 mean]")
    speedups = [60 / seconds[c].sum() / (60 / 11) for c in SD_TIMES]
    assert mean["speedup"] == pytest.approx(np.mean(speedups))
    data = [x for c in [*SD_TIMES, "target"] for x in (tokens, seconds[c])]
    interval = stats.paired_interval(stats.mean_pooled_ratio, data)
    assert (mean["speedup_low"], mean["speedup_high"]) == (interval.low, interval.high)
    assert interval.low < mean["speedup"] < interval.high
    # per window: the mean over W of its throughputs, over target-only's
    per_window_mean = np.mean([tokens / seconds[c] for c in SD_TIMES], axis=0) / (tokens / seconds["target"])
    assert mean["mean_window_speedup"] == pytest.approx(per_window_mean.mean(), rel=1e-12)

    # oracle: per window the faster of B=3 and B=7 (1, 1, 3 s); deployed = as2d[B=3] (best pooled)
    oracle = by(tables["Oracle over the AS2D catalog (deployed = best pooled)"], device="A")
    best = np.minimum(seconds["as2d[B=3]"], seconds["as2d[B=7]"])
    assert oracle["gap_pct"] == pytest.approx(100 * (1 - 10 / 12))
    interval = stats.pooled_ratio_interval(tokens, seconds["as2d[B=3]"], tokens, best)
    assert (oracle["gap_pct_low"], oracle["gap_pct_high"]) == (100 * (1 - interval.high), 100 * (1 - interval.low))
    assert oracle["gap_pct_low"] < oracle["gap_pct"] < oracle["gap_pct_high"]


def test_the_interval_against_the_best_target_pairs_its_windows(tmp_path):
    # P@shared's target-only is the faster (5.5 s vs 11 s in all): every speedup_vs_best_target is against it
    times = {("P@split", "target"): REPLAY["target"], ("P@split", "as2d[B=3]"): REPLAY["as2d[B=3]"],
             ("P@shared", "target"): {"w1": 1.5, "w2": 2.0, "w3": 2.0}, ("P@shared", "as2d[B=3]"): REPLAY["as2d[B=7]"]}
    rows = [row(device, config, w, seconds) for (device, config), ts in times.items() for w, seconds in ts.items()]
    result, tables = report_json(write_results(tmp_path / "r", rows))
    assert result.exit_code == 0, result.output
    pooled = tables["Pooled decode throughput"]
    tokens = np.array([TOKENS[w] for w in WINDOWS], dtype=float)
    seconds = {key: np.array([ts[w] for w in WINDOWS]) for key, ts in times.items()}
    best = seconds[("P@shared", "target")]
    for device, config in times:
        got = by(pooled, device=device, config=config)
        assert got["speedup_vs_best_target"] == pytest.approx(5.5 / seconds[(device, config)].sum())
        interval = stats.pooled_ratio_interval(tokens, seconds[(device, config)], tokens, best)
        if (device, config) == ("P@shared", "target"):
            assert interval is None and got["speedup_vs_best_target_low"] is None
        else:
            assert (got["speedup_vs_best_target_low"], got["speedup_vs_best_target_high"]) == (interval.low,
                                                                                                 interval.high)
    own = by(pooled, device="P@split", config="as2d[B=3]")
    interval = stats.pooled_ratio_interval(tokens, seconds[("P@split", "as2d[B=3]")], tokens,
                                           seconds[("P@split", "target")])
    assert (own["speedup_low"], own["speedup_high"]) == (interval.low, interval.high)


def test_the_deployed_configuration_is_the_one_the_budget_file_names(tmp_path):
    times = {"as2d[B=3,drafter=big]": (1.0, 1.0, 1.0), "as2d[B=3,drafter=small]": (2.0, 2.0, 4.0),
             "as2d[B=7,drafter=small]": (2.0, 4.0, 4.0), "as2d[B=7,drafter=big]": (1.0, 1.0, 2.0),
             "specasr[k_max=3,tau=0.5,drafter=small]": (3.0, 3.0, 3.0),
             "specasr[k_max=3,tau=0.5,drafter=big]": (1.0, 1.0, 1.0), "target": (5.0, 5.0, 5.0)}
    results = write_results(tmp_path / "r", [row("A", c, w, s) for c, ts in times.items()
                                             for w, s in zip(WINDOWS, ts)])

    def budget(name, **config):
        path = tmp_path / f"{name}.yaml"
        save_budget(path, BudgetChoice("A", As2dConfig(**config), 1.0, (), 0.0, False, 3), {})
        return path

    result, tables = report_json(results, "--budget", budget("small", budget=3, drafter="small"))
    assert result.exit_code == 0, result.output
    oracle = by(tables["Oracle over the AS2D catalog (deployed = selected budget)"], device="A")
    assert oracle["deployed"] == "as2d[B=3,drafter=small]" and oracle["deployed_tokens_per_s"] == 60 / 8
    ablation = tables["Ablation: decoupling and budget configuration"]
    assert [(r["arm"], r["budget"], r["config"]) for r in ablation] == [
        ("serial", "selected (3)", "specasr[k_max=3,tau=0.5,drafter=small]"),
        ("decoupled", "default (7)", "as2d[B=7,drafter=small]"),
        ("decoupled", "selected (3)", "as2d[B=3,drafter=small]")]

    for path, problem in ((budget("tiny", budget=3, drafter="tiny"), "it is not in these results"),
                          (budget("batch", budget=3, drafter="small", batch=4), "it is not in these results"),
                          (budget("none", budget=3), "several configurations match it")):
        result, _ = report_json(results, "--budget", path)
        errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
        assert result.exit_code == 1 and len(errors) == 1, result.output
        assert problem in errors[0] and "device 'A'" in errors[0]
        assert "as2d[B=3,drafter=big], as2d[B=3,drafter=small], as2d[B=7,drafter=big]" in errors[0]


def depth_profile(depths=(0, 128)) -> DeviceProfile:
    """Measured at two depths only: CT(1, d) = 1 + d / 128 there (exact in binary)."""
    target = linear_costs(1.0, 0.25, 8, "target", depths, 1 / 128)
    drafter = linear_costs(0.25, 0.125, 8, "drafter", depths, 1 / 256)
    measured = range(1, 9)
    cosched = CoSchedule(np.array([0.0]), {w: np.array([1.5]) for w in measured}, {w: np.array([1.5]) for w in measured})
    return DeviceProfile(DeviceInfo("two-depths"), ModelId("t"), "cpu", target,
                         {"drafter": DrafterProfile("drafter", ModelId("d"), "cpu", drafter, cosched)})


def test_depths_beyond_the_measured_ones_are_flagged_and_their_sensitivity_reported():
    y_short, y_long = [10, 11, 12, 13, 14, 2], list(range(10, 29)) + [2]
    windows = [make_text_window("short", "a", "Repeat.", 64, "d", "test"),
               make_text_window("long", "b", "Repeat.", 64, "d", "test")]
    # short decodes at depths 10..14; long at 120..138, past the last measured depth 128
    traces = {"short": make_trace(y_short, perfect_drafts(y_short), y_short, n_prompt=10, window_id="short",
                                  sha=windows[0].window_sha256),
              "long": make_trace(y_long, perfect_drafts(y_long), y_long, n_prompt=120, window_id="long",
                                 sha=windows[1].window_sha256)}
    trace_files = {"drafter": TraceFile(ModelRef("t", "t", 1 << 20), ModelRef("drafter", "d", 1 << 20), traces)}
    configs = [TargetConfig(), SdConfig(width=3), As2dConfig(budget=3)]
    frame = pd.concat([replay_study(windows, trace_files, [depth_profile()], configs, cost_fit=fit)
                       for fit in ("median", CostFit.DEPTH_LINEAR)], ignore_index=True)
    median = frame[frame["cost_fit"] == "median"].set_index(["config", "window_id"])
    assert median.xs("long", level="window_id")["depth_extrapolated"].all()
    assert not median.xs("short", level="window_id")["depth_extrapolated"].any()
    assert not median["extrapolated"].any()  # every co-scheduling width was measured

    # target-only, by hand: one forward per token at depths 120..138
    depths = np.arange(120, 139)
    flat, linear = np.minimum(1 + depths / 128, 2.0).sum(), (1 + depths / 128).sum()
    target = frame[(frame["config"] == "target") & (frame["window_id"] == "long")].set_index("cost_fit")
    assert target.at["median", "decode_s"] == flat and target.at[CostFit.DEPTH_LINEAR, "decode_s"] == linear
    short = sum(1 + d / 128 for d in range(10, 15))

    built = build_tables(LoadedResults([], frame, []))
    tables = {t.title: t.frame for t in built}
    table = tables["Sensitivity to KV depths beyond the measured ones: depth-flat vs depth-linear (tokens/s)"]
    table = table.set_index("config")
    assert list(table.columns) == ["device", "method", "depth-flat", "depth-linear", "low", "high", "range_pct",
                                   "flagged"]
    assert table.at["target", "depth-flat"] == pytest.approx(24 / (short + flat))
    assert table.at["target", "depth-linear"] == pytest.approx(24 / (short + linear))
    assert table.at["target", "range_pct"] == pytest.approx(100 * (1 - (short + flat) / (short + linear)))
    for config in ("target", "sd[W=3]", "as2d[B=3]"):
        assert table.at[config, "range_pct"] > 0 and table.at[config, "flagged"] == 1
    note = next(t.order for t in built if t.title == "Pooled decode throughput")
    assert "3 rows priced a KV depth outside the measured depths (flat there) (see --sensitivity)" in note



def test_a_producer_past_the_measured_depths_flags_as2d_and_a_decode_below_them_flags_all():
    y = [10, 11, 12, 13, 14, 2]
    window = make_text_window("w", "a", "Repeat.", 64, "d", "test")
    trace = make_trace(y, perfect_drafts(y), y, n_prompt=10, window_id="w", sha=window.window_sha256)
    # the target decodes at depths 10..14; the producer, after a longer prompt, at 125..130
    trace = dataclasses.replace(trace, n_prompt_drafter=125)
    configs = [TargetConfig(), As2dConfig(budget=3)]
    traces = {"drafter": TraceFile(ModelRef("t", "t", 1 << 20), ModelRef("drafter", "d", 1 << 20), {"w": trace})}
    flags = replay_study([window], traces, [depth_profile()], configs).set_index("config")
    assert flags["depth_extrapolated"].to_dict() == {"target": False, "as2d[B=3]": True}
    below = replay_study([window], traces, [depth_profile((16, 256))], configs)
    assert below["depth_extrapolated"].all()
