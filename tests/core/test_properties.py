"""Properties over random traces and profiles (hypothesis)."""

from __future__ import annotations

import dataclasses
import math
import os
import signal

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specbench.core import metrics
from specbench.core.methods.base import TargetOracle
from specbench.core.methods.configs import As2dConfig, SdConfig, TargetConfig
from specbench.core.replay.bulk import COST_FITS, fit_profile, replay_study
from specbench.core.replay.reference import decode_serial, replay_window, simulate_as2d
from specbench.errors import SpecbenchError
from specbench.schemas.results import rows_frame
from specbench.schemas.traces import ModelRef, TraceFile
from tests.helpers import window_for
from tests.strategies import EOS, SPECASR, VOCAB, profiles, traces

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

as2d_configs = st.builds(As2dConfig, budget=st.integers(1, 8), drafter=st.none(), batch=st.sampled_from([1, 3, 8]),
                         conf_stop=st.sampled_from([0.0, 0.4]), align=st.sampled_from(["anchor", "positional"]),
                         horizon=st.integers(1, 8))
serial_configs = st.one_of(st.just(TargetConfig()), st.builds(SdConfig, width=st.integers(2, 8),
                                                              p_min=st.sampled_from([0.0, 0.5])),
                           st.just(SPECASR))
any_config = st.one_of(serial_configs, as2d_configs)


class RecordingOracle(TargetOracle):
    """A target oracle that records what each forward was asked to verify."""

    def __init__(self, y, log):
        super().__init__(y)
        self.log = log

    def verify(self, candidates):
        self.log.append((self.committed, tuple(int(c) for c in candidates)))
        return super().verify(candidates)


def decisions(config, trace, cap, y, profile):
    """(t, candidates) of every forward of `config` when the target's output is `y`, from the
    reference replay's own decision loop."""
    log: list = []
    trace = dataclasses.replace(trace, y=np.asarray(y, dtype=np.int32))
    oracle = RecordingOracle(trace.y, log)
    try:
        if isinstance(config, As2dConfig):
            simulate_as2d(trace, cap, profile, config, oracle)
        else:
            decode_serial(config, trace, cap, "drafter", oracle)
    except SpecbenchError:
        pass  # a changed future may ask for answers the trace never recorded; what came before counts
    return log


@SETTINGS
@given(traces(), profiles(), any_config)
def test_every_method_commits_exactly_y(trace_cap, profile, config):
    trace, cap = trace_cap
    row = replay_window(window_for(trace, cap), trace, profile, config)
    assert row.lossless
    assert row.tokens == trace.n_tokens - 1
    assert row.accepted <= row.proposed
    assert row.target_forwards >= (1 if trace.n_tokens > 1 else 0)


@SETTINGS
@given(traces(), profiles(), any_config, st.data())
def test_decisions_never_read_uncommitted_output(trace_cap, profile, config, data):
    trace, cap = trace_cap
    y = trace.y.tolist()
    if len(y) < 2:
        return
    cut = data.draw(st.integers(1, len(y) - 1))
    tail = data.draw(st.lists(st.integers(3, 3 + VOCAB - 1), min_size=1, max_size=len(y) - cut))
    tail[0] = 3 + (y[cut] - 3 + 1) % VOCAB  # differs from y at the cut
    if trace.stop_reason == "eos":
        tail[-1] = EOS
    changed = y[:cut] + tail
    original = decisions(config, trace, cap, y, profile)
    altered = decisions(config, trace, cap, changed, profile)
    for (t1, c1), (t2, c2) in zip(original, altered):
        if t1 != t2 or t1 > cut:
            break
        assert c1 == c2, f"a decision at t={t1} changed when y changed from position {cut} on"


@SETTINGS
@given(traces(), profiles(), any_config)
def test_time_decomposes_exactly(trace_cap, profile, config):
    trace, cap = trace_cap
    row = replay_window(window_for(trace, cap), trace, profile, config)
    total = row.d_s + row.v_s - row.o_s + row.h_s
    assert abs(row.decode_s - total) <= 1e-9 * max(1.0, row.decode_s)
    assert min(row.d_s, row.v_s, row.o_s, row.h_s) >= 0
    assert row.o_s <= min(row.d_s, row.v_s) + 1e-12


@SETTINGS
@given(st.lists(traces(), min_size=1, max_size=4), profiles(), st.lists(any_config, min_size=1, max_size=3),
       st.sampled_from(COST_FITS))
def test_bulk_replay_equals_the_scalar_reference_and_pooled_equals_sums(trace_caps, profile, configs, fit):
    windows, window_traces = [], {}
    for i, (trace, cap) in enumerate(trace_caps):
        trace = dataclasses.replace(trace, window_id=f"w{i}")
        window = window_for(trace, cap)
        trace = dataclasses.replace(trace, window_sha256=window.window_sha256)
        windows.append(window)
        window_traces[trace.window_id] = trace
    configs = list(dict.fromkeys([TargetConfig()] + configs))
    trace_files = {"drafter": TraceFile(ModelRef("t", "t", 1 << 20), ModelRef("drafter", "d", 1 << 20), window_traces)}
    bulk = replay_study(windows, trace_files, [profile], configs, cost_fit=fit)
    fitted = fit_profile(profile, fit)
    reference = rows_frame([dataclasses.asdict(replay_window(w, window_traces[w.window_id], fitted, c))
                              for c in configs for w in windows]).assign(cost_fit=fit)
    order = ["config", "window_id"]
    pd.testing.assert_frame_equal(bulk.sort_values(order).reset_index(drop=True),
                                  reference[bulk.columns].sort_values(order).reset_index(drop=True), check_dtype=False,
                                  check_exact=True)

    pooled = metrics.pooled(bulk)
    for (device, config), group in bulk.groupby(["device", "config"]):
        row = pooled[(pooled["device"] == device) & (pooled["config"] == config)].iloc[0]
        # equal up to the order of floating-point additions
        assert row["tokens"] == group["tokens"].sum()
        assert math.isclose(row["decode_s"], math.fsum(group["decode_s"]), rel_tol=1e-12)
        if group["decode_s"].sum() > 0:  # all-degenerate groups have no throughput
            assert math.isclose(row["tokens_per_s"], group["tokens"].sum() / math.fsum(group["decode_s"]),
                                rel_tol=1e-12)


def test_bulk_replay_of_a_two_drafter_two_device_study_equals_the_reference_exactly():
    """The bench's catalog (SD W=5..8, SpecASR, AS2D B=1..15 over two drafters) on a small
    synthetic study: every column of every row equal to the scalar reference's, no tolerance."""
    from bench.replay_speed import CATALOG
    from bench.synthetic_study import synthetic_study
    from specbench.core.methods.configs import parse_method_specs
    from specbench.core.replay.bulk import trace_for

    study = synthetic_study(n_windows=12, n_devices=2)
    configs = parse_method_specs(CATALOG)
    bulk = replay_study(study.windows, study.traces, study.profiles, configs)
    reference = rows_frame([dataclasses.asdict(replay_window(w, trace_for(study.traces, c, w.window_id)[1], p, c))
                              for p in study.profiles for c in configs for w in study.windows])
    order = ["device", "config", "window_id"]
    assert len(bulk) == len(reference) == 2 * len(configs) * 12
    pd.testing.assert_frame_equal(bulk.sort_values(order).reset_index(drop=True),
                                  reference[bulk.columns].sort_values(order).reset_index(drop=True),
                                  check_dtype=False, check_exact=True)


def test_the_parallel_replay_returns_the_sequential_rows_in_the_same_order():
    from bench.synthetic_study import synthetic_study
    from specbench.app import parallel_replay
    from specbench.core.methods.configs import parse_method_specs

    study = synthetic_study(n_windows=6, n_devices=2)
    configs = parse_method_specs(["target", "sd:W=5,drafter=small", "as2d:B=2..3,drafter=small|large"])
    sequential = replay_study(study.windows, study.traces, study.profiles, configs, cost_fit="max")
    parallel = parallel_replay.replay_study_in_processes(study.windows, study.traces, study.profiles, configs,
                                                         workers=2, cost_fit="max")
    pd.testing.assert_frame_equal(parallel, sequential, check_exact=True)


def test_a_replay_worker_that_dies_ends_the_replay_with_an_error_instead_of_a_wait(monkeypatch):
    """A worker killed mid-piece (the OOM killer, a signal) leaves its piece undone: the replay says so and
    stops, where a pool that waits for every piece would wait forever."""
    from bench.synthetic_study import synthetic_study
    from specbench.app import parallel_replay
    from specbench.core.methods.configs import parse_method_specs
    from specbench.errors import SpecbenchError

    study = synthetic_study(n_windows=4, n_devices=2)
    configs = parse_method_specs(["target", "sd:W=5,drafter=small"])
    real = parallel_replay.run_task

    def killed_on_sd(windows, traces, profiles, configs, task):  # forked workers inherit the patch
        if task[0] == "serial" and task[1].label.startswith("sd"):
            os.kill(os.getpid(), signal.SIGKILL)
        return real(windows, traces, profiles, configs, task)

    monkeypatch.setattr(parallel_replay, "run_task", killed_on_sd)
    with pytest.raises(SpecbenchError, match="a replay worker process died"):
        parallel_replay.replay_study_in_processes(study.windows, study.traces, study.profiles, configs, workers=2)


def test_a_small_study_replays_in_the_calling_process_unless_workers_are_asked_for(monkeypatch):
    from bench.synthetic_study import synthetic_study
    from specbench.app import parallel_replay
    from specbench.core.methods.configs import parse_method_specs

    study = synthetic_study(n_windows=4, n_devices=1)
    configs = parse_method_specs(["target", "sd:W=5,drafter=small"])
    pids = set()
    real = parallel_replay.run_task

    def noted(*args):
        pids.add(os.getpid())
        return real(*args)

    monkeypatch.setattr(parallel_replay, "run_task", noted)
    parallel_replay.replay_study_in_processes(study.windows, study.traces, study.profiles, configs)
    assert pids == {os.getpid()}


def test_each_drafter_is_priced_with_its_own_overheads_in_bulk_and_reference_alike():
    """A profile whose drafters carry overheads of their own (`profile` measures them per drafter): AS2D rows
    with each drafter take its own start-up, publishing and search costs, the bulk replay equal to the reference
    to the last bit, and a drafter's rows untouched by the other drafter's overheads."""
    from bench.synthetic_study import synthetic_study
    from specbench.core.methods.configs import parse_method_specs
    from specbench.core.replay.bulk import trace_for
    from specbench.schemas.profiles import Overheads

    study = synthetic_study(n_windows=6, n_devices=1)
    [profile] = study.profiles
    first, second = list(profile.drafters)
    configs = parse_method_specs([f"as2d:B=3,drafter={first}", f"as2d:B=3,drafter={second}"])
    own = Overheads(producer_startup_s=0.004, publish_s=0.0007, align_s=0.0003)
    priced = dataclasses.replace(profile, drafters={**profile.drafters,
                                                    second: dataclasses.replace(profile.drafters[second], overheads=own)})
    assert priced.overheads_of(second) == own and priced.overheads_of(first) == profile.overheads

    def rows(p):
        bulk = replay_study(study.windows, study.traces, [p], configs).sort_values(["config", "window_id"])
        reference = rows_frame([dataclasses.asdict(replay_window(w, trace_for(study.traces, c, w.window_id)[1], p, c))
                                for c in configs for w in study.windows]).sort_values(["config", "window_id"])
        pd.testing.assert_frame_equal(bulk.reset_index(drop=True), reference[bulk.columns].reset_index(drop=True),
                                      check_dtype=False, check_exact=True)
        return bulk.set_index(["config", "window_id"])["decode_s"]

    before, after = rows(profile), rows(priced)
    mine = [c for c in before.index.get_level_values("config").unique() if f"drafter={first}" in c]
    other = [c for c in before.index.get_level_values("config").unique() if f"drafter={second}" in c]
    assert (before.loc[mine] == after.loc[mine]).all()
    assert (before.loc[other] != after.loc[other]).any()
