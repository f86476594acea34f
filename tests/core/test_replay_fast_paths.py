"""The array forms inside the bulk replay equal the procedures they stand for (hypothesis).

`bulk.sd_ops_many` against `bulk.sd_ops` window by window; the lockstep's alignment search
against `As2dVerifier._align`; its candidate comparison and row-wise binary search against the
plain Python and numpy forms."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specbench.core.methods.as2d import As2dConfig, As2dVerifier
from specbench.core.methods.configs import SdConfig
from specbench.core.replay import lockstep
from specbench.core.replay.serial import sd_ops, sd_ops_many
from tests.strategies import traces

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
OPS_ARRAYS = ("target_width", "target_depth", "drafter_width", "drafter_depth", "target_accepted")
OPS_COUNTS = ("target_forwards", "proposed", "accepted", "multi_token_forwards", "lossless", "drafter_all_rows")


@SETTINGS
@given(st.lists(traces(), min_size=1, max_size=5), st.integers(2, 9), st.sampled_from([0.0, 0.3, 0.7]),
       st.lists(st.integers(1, 40), min_size=5, max_size=5))
def test_sd_over_all_windows_equals_sd_window_by_window(trace_caps, width, p_min, cut):
    config = SdConfig(width=width, p_min=p_min)
    window_traces = [dataclasses.replace(trace, window_id=f"w{i}") for i, (trace, _) in enumerate(trace_caps)]
    # caps from the traces' own and from short ones, so the cap's room ends drafting early
    caps = [cap if i % 2 else min(cap, cut[i]) for i, (_, cap) in enumerate(trace_caps)]
    many = sd_ops_many(window_traces, caps, config)
    assert len(many) == len(window_traces)
    for ops, trace, cap in zip(many, window_traces, caps):
        one = sd_ops(trace, cap, config)
        for name in OPS_ARRAYS:
            if len(getattr(one, name)):  # sd_ops' empty lists become float arrays; the bulk path keeps int64
                assert getattr(ops, name).dtype == getattr(one, name).dtype, name
            assert getattr(ops, name).tolist() == getattr(one, name).tolist(), name
        for name in OPS_COUNTS:
            assert getattr(ops, name) == getattr(one, name), name
            assert type(getattr(ops, name)) is type(getattr(one, name)), name


searches = st.fixed_dictionaries({
    "e": st.integers(0, 14), "floor": st.integers(0, 14), "published": st.integers(0, 16),
    "horizon": st.integers(1, 8), "positional": st.booleans(), "root": st.integers(0, 3)})


@SETTINGS
@given(st.lists(st.integers(0, 3), min_size=16, max_size=16), st.lists(searches, min_size=1, max_size=12))
def test_the_lockstep_alignment_search_equals_the_verifiers(z, cases):
    """Small alphabets, so the root turns up at several offsets, before the floor and past what is published."""
    max_h = max(c["horizon"] for c in cases)
    z_flat = np.array(z + [lockstep.NO_TOKEN] * (16 + max_h + 2), dtype=np.int64)
    state = SimpleNamespace(**{name: np.array([c[key] for c in cases]) for name, key in (
        ("expected", "e"), ("floor", "floor"), ("horizon", "horizon"), ("positional", "positional"))})
    study = SimpleNamespace(z=z_flat, max_h=max_h)
    root = np.array([c["root"] for c in cases], dtype=np.int64)
    published = np.array([c["published"] for c in cases], dtype=np.int64)
    start, anchored, searched = lockstep._align(state, study, np.zeros(len(cases), dtype=np.int64), root, published)
    for i, c in enumerate(cases):
        verifier = As2dVerifier(As2dConfig(budget=4, horizon=c["horizon"],
                                           align="positional" if c["positional"] else "anchor"), cap=64)
        verifier.floor = c["floor"]
        expected_start, expected_anchored, expected_searched = verifier._align(c["root"], np.array(z),
                                                                               c["published"], c["e"])
        assert (int(start[i]), bool(anchored[i]), bool(searched[i])) == (
            -1 if expected_start is None else expected_start, expected_anchored, expected_searched), c


@SETTINGS
@given(st.lists(st.integers(0, 2), min_size=40, max_size=40), st.lists(st.integers(0, 2), min_size=40, max_size=40),
       st.lists(st.tuples(st.integers(0, 20), st.integers(0, 20), st.integers(0, 20)), min_size=1, max_size=10))
def test_the_blockwise_candidate_comparison_counts_the_agreeing_prefix(z, y, rows):
    study = SimpleNamespace(z=np.array(z), y=np.array(y))
    z_at, y_at, length = (np.array(column, dtype=np.int64) for column in zip(*rows))
    agreed = lockstep._agreement(study, z_at, y_at, length)
    for i, (zi, yi, n) in enumerate(rows):
        count = 0
        while count < n and z[zi + count] == y[yi + count]:
            count += 1
        assert agreed[i] == count


@SETTINGS
@given(st.lists(st.lists(st.floats(0, 10, allow_nan=False), min_size=1, max_size=9), min_size=1, max_size=4),
       st.lists(st.tuples(st.integers(0, 3), st.floats(-1, 11, allow_nan=False)), min_size=1, max_size=12))
def test_the_row_wise_binary_search_equals_searchsorted(rows, queries):
    width = max(len(r) for r in rows)
    matrix = np.full((len(rows), width), np.inf)
    for i, r in enumerate(rows):
        matrix[i, : len(r)] = sorted(r)
    which = np.array([q[0] % len(rows) for q in queries])
    values = np.array([q[1] for q in queries])
    for strict, side in ((False, "right"), (True, "left")):
        counts = lockstep._count_at_most(matrix, which, values, strict=strict)
        assert counts.tolist() == [int(np.searchsorted(matrix[r], v, side=side)) for r, v in zip(which, values)]


def _outcome(build, *args):
    """Operations as plain values, or the one-line error the build raised."""
    from specbench.errors import SpecbenchError
    try:
        ops = build(*args)
    except SpecbenchError as error:
        return ("error", str(error))
    return {name: (value.tolist() if isinstance(value, np.ndarray) else value)
            for name, value in vars(ops).items()}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10_000), st.sampled_from([(4, 0.3), (8, 0.5), (16, 0.0), (2, 0.9)]),
       st.integers(0, 40), st.integers(0, 40), st.sampled_from([None, 3, 9, 30]))
def test_specasr_on_lists_equals_the_decision_procedure(seed, k_tau, n_prompt, n_prompt_drafter, short_cap):
    """Traces with recorded recycling answers (bench/synthetic_study's drafter), prompts of any
    length, and caps that cut drafting short (where the recorded answers no longer fit, both
    refuse with the same error): the same operations as `reference_ops`."""
    from bench.synthetic_study import synthetic_study
    from specbench.core.methods.configs import SpecAsrConfig
    from specbench.core.replay.serial import reference_ops, specasr_ops

    config = SpecAsrConfig(k_max=k_tau[0], tau=k_tau[1])
    study = synthetic_study(n_windows=3, mean_tokens=40.0, n_devices=1, seed=seed, specasr=(config,))
    outcomes = []
    for window in study.windows:
        trace = dataclasses.replace(study.traces["small"].windows[window.window_id], n_prompt=n_prompt,
                                    n_prompt_drafter=n_prompt_drafter)
        cap = window.cap if short_cap is None else min(window.cap, short_cap)
        if cap < len(trace.y):  # the decode stops at the cap: its output is y cut there
            trace = dataclasses.replace(trace, y=trace.y[:cap], stop_reason="cap")
        fast = _outcome(specasr_ops, trace, cap, config, "small")
        assert fast == _outcome(reference_ops, config, trace, cap, "small")
        outcomes.append(fast[0] if isinstance(fast, tuple) else "ops")
    if short_cap is None:
        assert outcomes == ["ops"] * len(outcomes)  # the caps the answers were recorded with: never refused
