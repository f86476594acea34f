"""Repeated timings: the median sample, the spread, and the profile's stability warnings
(specbench.core.samples, specbench.core.stability.stability_warnings)."""

from __future__ import annotations

import json
import math
from dataclasses import asdict

import pandas as pd
import pytest

from specbench.core.methods.configs import TargetConfig, row_fields
from specbench.core.repetitions import RepetitionRule, achieved_precision, median_interval_rank
from specbench.core.samples import (
    median_index,
    spread_pct,
    spread_table,
)
from specbench.core.stability import stability_warnings
from specbench.errors import SpecbenchError
from specbench.schemas.fileio import dumps_line
from specbench.schemas.placement import resolve
from specbench.schemas.profiles import StabilityWarning, load_profile, warnings_doc
from specbench.schemas.results import ProfileInput, ResultsDir, WindowResult, profile_warnings, rows_frame
from tests.helpers import results_manifest


def test_the_median_sample_is_one_real_sample():
    assert median_index([3.0, 1.0, 2.0]) == 2
    assert median_index([4.0, 1.0, 3.0, 2.0]) == 3  # even count: the lower middle (2.0), not 2.5
    assert median_index([5.0]) == 0
    assert median_index([2.0, 1.0, 2.0]) == 0  # ties: the earliest


def test_spread_is_the_standard_deviation_over_the_median_in_percent():
    assert spread_pct([9.0, 10.0, 11.0]) == pytest.approx(10.0)  # stdev 1 (n - 1), median 10
    assert spread_pct([1.0, 1.0, 1.0, 4.0]) == pytest.approx(150.0)  # stdev 1.5, median 1
    assert spread_pct([7.0]) == 0.0 and spread_pct([]) == 0.0


def forward(model, width, depth, samples_us, logits="all", name="t"):
    return {"kind": "forward", "model": model, "model_name": name, "width": width, "depth": depth,
            "logits": logits, "samples_us": samples_us}


QUIET = [1000, 1010, 990, 1005, 995]
NOISY = [1000, 1000, 1300, 1000, 1000]  # stdev 134.2 us: 13.4% of the median


def samples_file(tmp_path, records):
    path = tmp_path / "p.samples.jsonl"
    path.write_text("".join(dumps_line(r) for r in records))
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_noisy_width_is_warned_about_by_model_table_width_and_depth(tmp_path):
    records = [forward("target", w, d, QUIET) for w in (1, 2, 3) for d in (0, 32)]
    records += [forward("drafter", w, d, QUIET, "last", "near") for w in (1, 2) for d in (0, 32)]
    assert stability_warnings(samples_file(tmp_path, records)) == []
    records[3] = forward("target", 2, 32, NOISY)
    records[-1] = forward("drafter", 2, 32, NOISY, "all", "near")
    warnings = stability_warnings(samples_file(tmp_path, records))
    assert [(w.model, w.table, w.width, w.depth, w.samples) for w in warnings] == \
        [("t", "CT", 2, 32, 5), ("near", "CD_all", 2, 32, 5)]
    assert warnings[0].spread_pct == pytest.approx(13.416, abs=1e-3) and warnings[0].median_s == 1e-3
    assert warnings[0].message() == ("unstable CT of t at width 2, depth 32: spread 13.4% of the median 1.000 ms "
                                     "over 5 samples (> 10%)")


def test_cosched_samples_are_judged_per_measurement(tmp_path):
    record = {"kind": "cosched", "model_name": "near", "width": 4, "depth": 0,
              "samples": {"target_alone_us": QUIET, "target_together_us": NOISY, "drafter_alone_us": QUIET,
                          "drafter_together_us": []}}
    warnings = stability_warnings(samples_file(tmp_path, [record]))
    assert [(w.model, w.table, w.width, w.depth) for w in warnings] == [("near", "cosched target_together", 4, 0)]


PROFILE = """kind: specbench.profile
schema_version: 7
device: {name: host}
placement: {name: shared, target: {processor: cpu, cpus: [0], threads: 1},
            drafter: {processor: cpu, cpus: [0], threads: 1}}
target: {model: {name: t, sha256: abc}, processor: cpu, costs: {depths: [0], seconds: {1: [0.001], 2: [0.002]}}}
"""


def test_warnings_round_trip_through_the_profile_and_are_validated(tmp_path):
    warning = StabilityWarning("t", "CT", 2, 32, 0.001, 13.4, 5)
    path = tmp_path / "p.yaml"
    path.write_text(PROFILE + "warnings: " + json.dumps(warnings_doc([warning])) + "\n")
    assert load_profile(path).warnings == (warning,)
    path.write_text(PROFILE)
    assert load_profile(path).warnings == ()
    path.write_text(PROFILE + 'warnings: [{model: t, table: CT, width: two, depth: 0, median_s: 0.001, '
                    'spread_pct: 12.0, samples: 5}]\n')
    with pytest.raises(SpecbenchError, match=r"warnings.*width.*two"):
        load_profile(path)


def test_manifests_carry_the_warnings_to_the_report_once(tmp_path):
    entry = (StabilityWarning("t", "CT", 2, 32, 0.001, 13.4, 5),)
    shared, split = resolve("shared", [0, 1]), resolve("split", [0, 1])
    replay = results_manifest(mode="replay", profiles=(ProfileInput("p.yaml", "a", "host@shared", None, shared,
                                                                    entry),))
    native = results_manifest(device="host@shared", placement_profile=ProfileInput("p.yaml", "a", warnings=entry))
    quiet = results_manifest(mode="replay", profiles=(ProfileInput("q.yaml", "b", "host@split", None, split),))
    table = profile_warnings([replay, native, quiet])
    assert table.to_dict("records") == [{"device": "host@shared", "profile": "p.yaml", "model": "t", "table": "CT",
                                         "width": 2, "depth": 32, "median_s": 0.001, "spread_pct": 13.4,
                                         "samples": 5, "precision": None, "achieved_precision": None,
                                         "ratio": None, "ratio_low": None, "ratio_high": None}]
    assert profile_warnings([quiet]).empty


def row(config, samples, **extra):
    return {"device": "host", "method": "target", "config": config, "drafter": None, "width": None, "budget": None,
            "samples_s": samples, **extra}


def test_spread_table_over_rows_with_several_samples():
    rows = pd.DataFrame([row("target", [0.95, 1.0, 1.05]), row("target", [1.0, 1.0, 1.6]),
                         row("target", None), row("other", [1.0])])
    table = spread_table(rows)
    assert table[["config", "windows", "runs", "unstable_windows"]].to_dict("records") == \
        [{"config": "target", "windows": 2, "runs": "3", "unstable_windows": 1}]
    assert table.at[0, "median_spread_pct"] == pytest.approx((5.0 + spread_pct([1.0, 1.0, 1.6])) / 2)
    assert table.at[0, "width"] is None and spread_table(rows.iloc[2:]).empty
    sd = spread_table(pd.DataFrame([row("sd[W=5]", [1.0, 1.1], method="sd", width=5)]))
    assert str(sd.at[0, "width"]) == "5"  # the W/B column shows 5, not 5.0


def make_row(window):
    return WindowResult(device="A", **row_fields(TargetConfig()), window_id=window, window_sha256="s" * 64,
                        dataset="d", split="test", tokens=10, decode_s=0.5, target_forwards=10, proposed=0, accepted=0,
                        multi_token_forwards=0, drafter_forwards=0, d_s=0.0, v_s=0.5, o_s=0.0, h_s=0.0,
                        extrapolated=False, lossless=True, source="native")


def test_rows_keep_their_samples_and_old_rows_load_without(tmp_path):
    results = ResultsDir(tmp_path / "r")
    results.open(results_manifest(), False)
    old = {k: v for k, v in asdict(make_row("w0")).items() if k != "samples_s"}
    results.append_frame(rows_frame([old]))  # a producer without samples: NaN in the frame, null in the file
    with open(results.rows_path, "a") as handle:
        handle.write(json.dumps(asdict(make_row("w1")) | {"samples_s": [0.5, 0.25, 0.75]}) + "\n")
    frame = results.frame()
    assert frame["samples_s"].tolist() == [None, [0.5, 0.25, 0.75]]
    assert [spread_pct(r.samples_s or []) for r in results.rows()] == [0.0, pytest.approx(100 * 0.25 / 0.5)]
    with open(results.rows_path, "a") as handle:
        handle.write(json.dumps(asdict(make_row("w2")) | {"samples_s": [0.5, -1]}) + "\n")
    with pytest.raises(SpecbenchError, match=r"row 3.*samples_s.*seconds >= 0"):
        results.frame()


def test_the_median_interval_ranks_are_the_binomial_quantiles_of_the_sign_test_tables():
    # n <= 5: no interval of order statistics covers 95%; the range (1, n) is the widest there is
    assert [median_interval_rank(n) for n in (1, 2, 5, 6, 8)] == [1, 1, 1, 1, 1]
    # P(B <= 1) = 10/512 < 0.025 <= P(B <= 2) = 46/512 for n = 9: [x(2), x(8)], covering 1 - 2 x 10/512
    assert median_interval_rank(9) == 2
    # the published 95% intervals: n = 10: [x(2), x(9)]; n = 20: [x(6), x(15)]; n = 30: [x(10), x(21)]
    assert [median_interval_rank(n) for n in (10, 20, 30)] == [2, 6, 10]
    with pytest.raises(ValueError):
        median_interval_rank(0)


def test_the_achieved_precision_is_the_intervals_half_width_over_the_median():
    assert achieved_precision([100, 101, 99, 102, 98]) == pytest.approx(0.02)  # n = 5: (102 - 98) / 2 / 100
    # n = 10, ranks 2 and 9: (90 - 20) / 2 over the median 55
    assert achieved_precision([10 * i for i in range(10, 0, -1)]) == pytest.approx(35 / 55)
    assert achieved_precision([7, 7, 7, 7, 7]) == 0.0
    assert achieved_precision([0, 0, 0, 1, 2]) == math.inf  # no relative precision of a zero median


def test_a_cell_stops_at_the_first_count_within_the_precision_between_its_bounds():
    rule = RepetitionRule(5, 8, 0.02)
    assert rule.stop_count([100, 101, 99, 102, 98, 500]) == 5  # +/-2% at the minimum: done
    # one outlier keeps the range (n <= 8) at +/-10%: the maximum
    assert rule.stop_count([100, 110, 90, 100, 100, 100, 100, 100, 100]) == 8
    # from n = 9 on the interval drops the extremes: [x(2), x(8)] = [100, 100]
    assert RepetitionRule(5, 20, 0.02).stop_count([100, 110, 90, 100, 100, 100, 100, 100, 100, 100]) == 9
    fixed = RepetitionRule.fixed(5)
    assert fixed.stop_count([1, 1, 1, 1, 1, 1, 1]) == 5 and not fixed.done([1, 1, 1, 1])
    assert RepetitionRule(5, 8, 0.02).describe() == \
        "repetitions until the median's ~95% interval is within +/-2% (5..8)"


@pytest.mark.parametrize("args", [(4, 4, None), (5, 6, None), (5, 30, 0.0), (5, 30, 1.0), (10, 9, 0.02),
                                  (5, 1001, 0.02)])
def test_a_rule_out_of_range_is_refused(args):
    with pytest.raises(ValueError):
        RepetitionRule(*args)


def test_a_cell_that_stopped_short_of_its_precision_is_named():
    record = forward("drafter", 4, 256, [1000, 1062, 1000, 1000, 1000, 1000], "last", "gemma3")
    record |= {"precision": 0.02, "converged": False}
    quiet = forward("drafter", 2, 256, [1000, 1010, 1000, 1000, 1000], "last", "gemma3") | {"precision": 0.02}
    [warning] = stability_warnings([record, quiet])
    assert (warning.width, warning.depth, warning.samples, warning.precision) == (4, 256, 6, 0.02)
    assert warning.achieved_precision == pytest.approx(0.031)
    assert warning.message() == ("CD of gemma3 w=4 d=256: 6 repetitions, ±3.1% > 2% (the maximum, short of the "
                                 "precision)")
    assert warnings_doc([warning])[0]["achieved_precision"] == pytest.approx(0.031)
    # a fixed count has no precision to fall short of
    assert stability_warnings([record | {"precision": None}]) == []
