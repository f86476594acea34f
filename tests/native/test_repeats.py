"""Repeated native decodes (`run --native --runs N --warmup M`): the runner's `runs` and
`warmup_runs`, and the rows built from the samples (specbench.world.decode_run.window_rows)."""

from __future__ import annotations

import copy
import statistics

from specbench.core.methods.configs import SdConfig, TargetConfig
from specbench.core.samples import spread_pct
from specbench.schemas.windows import make_text_window
from specbench.world.decode_run import window_rows

from .test_native_runner import WINDOWS

METHODS = [{"name": "target"}, {"name": "sd", "width": 4, "p_min": 0.0}]


def repeated(run_job, tiny, runs, warmup_runs, windows=WINDOWS[:2]):
    job = {"mode": "decode", "threads": 1, "target": {"path": str(tiny.target)}, "drafter": {"path": str(tiny.near)},
           "methods": METHODS, "windows": windows, "runs": runs, "warmup_runs": warmup_runs}
    out = run_job(job)
    assert out.returncode == 0, (out.error, out.stderr[-2000:])
    return out


def test_each_window_is_decoded_runs_times_after_the_warm_ups(run_job, tiny):
    out = repeated(run_job, tiny, runs=3, warmup_runs=2)
    # warm-ups are not reported; per window, sample s of every method before sample s + 1
    order = [(r["window_id"], r["sample"], r["method"]["name"]) for r in out.results]
    assert order == [(w["id"], s, m["name"]) for w in WINDOWS[:2] for s in range(3) for m in METHODS]
    assert [e["warmup_runs"] for e in out.events if e["event"] == "warmed_up"] == [2]
    for w in WINDOWS[:2]:
        for m in METHODS:
            runs = [r for r in out.results if r["window_id"] == w["id"] and r["method"]["name"] == m["name"]]
            # greedy decodes from a cleared KV cache: the same tokens and the same decisions every time
            assert all(r["tokens"] == runs[0]["tokens"] for r in runs)
            assert all([op["width"] for op in r["ops"]] == [op["width"] for op in runs[0]["ops"]] for r in runs)
            assert all(r["decode_s"] > 0 for r in runs)


def test_bad_repeat_counts_are_job_errors(run_job, tiny):
    for key, value in (("runs", 0), ("warmup_runs", -1)):
        job = {"mode": "decode", "target": {"path": str(tiny.target)}, "methods": [{"name": "target"}],
               "windows": WINDOWS[:1], key: value}
        out = run_job(job)
        assert out.returncode == 1 and out.results == []
        assert out.error["error"].startswith(f"job key '{key}' must be >= ")


def rows_of(results, windows, configs, reference=None):
    window = make_text_window(windows[0]["id"], "text", "Repeat.", windows[0]["cap"], "d", "test")
    records = [r for r in results if r["window_id"] == window.window_id]
    samples = [(config, records[c::len(configs)]) for c, config in enumerate(configs)]
    if reference is None:
        reference = samples[0][1][0]["tokens"]
    found = window_rows(window, "local", samples, configs, reference)
    return found.rows, found.divergences


def test_a_row_is_its_median_sample_and_keeps_every_sample(run_job, tiny):
    out = repeated(run_job, tiny, runs=3, warmup_runs=0, windows=WINDOWS[:1])
    configs = [TargetConfig(), SdConfig(4)]
    rows, divergences = rows_of(out.results, WINDOWS[:1], configs)
    assert divergences == [] and [r.config for r in rows] == [c.label for c in configs]
    for row, config in zip(rows, configs):
        runs = [r for r in out.results if r["method"]["name"] == config.label.split("[")[0]]
        assert row.samples_s == [r["decode_s"] for r in runs]
        assert row.decode_s == statistics.median(row.samples_s)
        # the row's time terms are that decode's own (a tiny model's decodes can tie to the microsecond: then
        # either tied sample is the median one)
        medians = [r for r in runs if r["decode_s"] == row.decode_s]
        assert row.v_s in {sum(op["us"] for op in r["ops"] if op["model"] == "target") / 1e6 for r in medians}
        assert spread_pct(row.samples_s or []) >= 0


def test_a_sample_with_other_tokens_makes_the_row_a_divergence(run_job, tiny):
    out = repeated(run_job, tiny, runs=3, warmup_runs=0, windows=WINDOWS[:1])
    results = copy.deepcopy(out.results)
    odd = [r for r in results if r["method"]["name"] == "sd"][2]
    odd["tokens"][5] += 1
    rows, divergences = rows_of(results, WINDOWS[:1], [TargetConfig(), SdConfig(4)])
    target, sd = rows
    assert target.lossless and len(target.samples_s) == 3
    # the row does not mix: no tokens, no time, no samples; the divergence names the sample
    assert not sd.lossless and sd.tokens == 0 and sd.decode_s == 0 and sd.samples_s is None
    assert [(d.config, d.sample, d.position, d.got) for d in divergences] == \
        [(sd.config, 2, 5, odd["tokens"][5])]
