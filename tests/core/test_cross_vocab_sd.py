"""Cross-vocabulary SD priced as the runner runs it (methods.sd.CrossVocabKV): hand-worked
op sequences, the same-vocabulary case as a special case, and the trace format's fields."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specbench.core.methods.base import Model, TargetOracle, TraceDrafts
from specbench.core.methods.configs import SdConfig
from specbench.core.methods.sd import CrossVocabKV, decode_sd
from specbench.core.replay.bulk import replay_study
from specbench.core.replay.reference import decode_serial, replay_window
from specbench.errors import SpecbenchError
from specbench.schemas.fileio import Where
from specbench.schemas.results import rows_frame
from specbench.schemas.traces import (
    PAD,
    VERSIONS,
    CrossDrafts,
    ModelRef,
    TraceFile,
    Vocab,
    load_trace_file,
    save_trace_file,
    window_trace_from_dict,
    window_trace_to_dict,
)
from tests.helpers import make_profile, make_trace, window_for
from tests.strategies import traces

WIDE = Vocab(1 << 20, 1 << 20)
"""Vocabulary sizes no token id of these tests reaches."""

EOS = 2
Y = [10, 11, 12, 13, 14, EOS]
NPD = 4  # drafter prompt tokens


def cross_drafts(rows, steps, drafter_tokens, contexts, k_max=16) -> CrossDrafts:
    """CrossDrafts from per-row steps and drafter tokens and the full context of each prefix."""
    step = np.full((len(rows), k_max), PAD, dtype=np.int32)
    for t, row in enumerate(steps):
        step[t, : len(row)] = row
    keep, append, previous = [], [], []
    for context in contexts:
        n = 0
        while n < min(len(previous), len(context)) and previous[n] == context[n]:
            n += 1
        keep.append(n)
        append.append(np.asarray(context[n:], dtype=np.int32))
        previous = context
    return CrossDrafts(step, tuple(np.asarray(d, dtype=np.int32) for d in drafter_tokens),
                       np.asarray(keep, dtype=np.int32), tuple(append))


def with_cross(trace, cross: CrossDrafts):
    return dataclasses.replace(trace, drafts=dataclasses.replace(trace.drafts, cross=cross))


def doubled(tokens):
    """The hand drafter's text: every target token v is the two drafter tokens 2v, 2v + 1."""
    return [d for v in tokens for d in (2 * v, 2 * v + 1)]


def hand_trace(rows, steps, drafter_tokens, draft_conf=None):
    trace = make_trace(Y, drafts=rows, draft_conf=draft_conf)
    trace = dataclasses.replace(trace, n_prompt_drafter=NPD)
    return with_cross(trace, cross_drafts(rows, steps, drafter_tokens, [doubled(Y[:t]) for t in range(len(Y))]))


def test_a_rejection_keeps_the_common_prefix_of_the_drafter_tokens():
    rows = [[], [11, 99], [], [13, 14], [], []]
    # row 1: 11 is stable after drafter step 2, 99 after step 4; row 3: 13 after step 1, 14 after step 3
    steps = [[], [2, 4], [], [1, 3], [], []]
    d_tokens = [[], [22, 23, 198, 199, 5], [], [26, 27, 28, 29], [], []]
    decoded = decode_serial(SdConfig(width=3), hand_trace(rows, steps, d_tokens), cap=32)
    assert decoded.tokens == tuple(Y)
    ops = [(op.model, op.width, op.depth, op.accepted) for op in decoded.ops]
    assert ops == [
        # t=1: ingest y[:1] as drafter tokens (2) after the prompt; 99 is decided at step 4: 4 forwards
        (Model.DRAFTER, 2, 4, 0), (Model.DRAFTER, 1, 6, 0), (Model.DRAFTER, 1, 7, 0), (Model.DRAFTER, 1, 8, 0),
        (Model.DRAFTER, 1, 9, 0), (Model.TARGET, 3, 0, 1),
        # t=3: the KV holds 20 21 22 23 198 199; y[:3] is 20 21 22 23 24 25: keep 4, ingest 2 at depth 8
        (Model.DRAFTER, 2, 8, 0), (Model.DRAFTER, 1, 10, 0), (Model.DRAFTER, 1, 11, 0), (Model.DRAFTER, 1, 12, 0),
        (Model.TARGET, 3, 2, 2)]


def test_a_confidence_stop_and_an_ended_row_decide_at_their_own_step():
    rows = [[], [11, 12, 13], [], [], [14, EOS], []]
    steps = [[], [0, 1, 3], [], [], [1, 1], []]
    d_tokens = [[], [22, 23, 24, 25, 26], [], [], [28, 29, 3], []]
    conf = [[], [0.9, 0.9, 0.1], [], [], [0.9, 0.9], []]
    decoded = decode_serial(SdConfig(width=4, p_min=0.5), hand_trace(rows, steps, d_tokens, conf), cap=32)
    assert [(op.model, op.width, op.depth) for op in decoded.ops] == [
        # t=1: 11 12 usable, 13 below p_min decided it at step 3: 3 forwards; all accepted + bonus 13
        (Model.DRAFTER, 2, 4), (Model.DRAFTER, 1, 6), (Model.DRAFTER, 1, 7), (Model.DRAFTER, 1, 8),
        (Model.TARGET, 3, 0),
        # t=4: the KV holds 20 21 + the fed 22 23 24; y[:4] is 20..27: keep 5, ingest 3 at depth 9;
        # the row ends (EOS) at its last drafter step, 2: 2 forwards
        (Model.DRAFTER, 3, 9), (Model.DRAFTER, 1, 12), (Model.DRAFTER, 1, 13), (Model.TARGET, 3, 3)]


def test_an_empty_context_re_reads_the_last_prompt_token():
    y = [10, EOS]
    trace = dataclasses.replace(make_trace(y, drafts=[[], [EOS]]), n_prompt_drafter=NPD)
    trace = with_cross(trace, cross_drafts([[], [EOS]], [[], [0]], [[], [3]], [[], []]))
    ops = decode_serial(SdConfig(width=3), trace, cap=8).ops
    assert (ops[0].width, ops[0].depth) == (1, NPD - 1)  # y[:1] has no complete text yet


def test_draft_rows_must_cover_the_runners_draft():
    rows = [[], [11, 12], [], [], [], []]
    short = hand_trace(rows, [[], [0, 1], [], [], [], []], [[], [22, 23, 24], [], [], [], []])
    with pytest.raises(SpecbenchError, match="longer than the trace's k_max=2"):
        decode_serial(SdConfig(width=4), dataclasses.replace(short, drafts=_k_max(short.drafts, 2)), cap=32)
    slow = hand_trace(rows, [[], [0, 100], [], [], [], []], [[], list(range(101)), [], [], [], []])
    with pytest.raises(SpecbenchError, match="stops at 96 drafter tokens"):
        decode_serial(SdConfig(width=3), slow, cap=32)


def _k_max(drafts, k_max):
    cross = dataclasses.replace(drafts.cross, step=drafts.cross.step[:, :k_max])
    return dataclasses.replace(drafts, tokens=drafts.tokens[:, :k_max], conf=drafts.conf[:, :k_max], cross=cross)


def identity_cross(trace) -> CrossDrafts:
    """A cross-vocabulary view whose drafter tokens are the target's: one mapped token per
    drafter step, the context y[:t] itself."""
    lengths = (trace.drafts.tokens != PAD).sum(axis=1)
    y = trace.y.tolist()
    return cross_drafts(trace.drafts.tokens, [list(range(n)) for n in lengths],
                        [row[:n] for row, n in zip(trace.drafts.tokens, lengths)], [y[:t] for t in range(len(y))],
                        trace.drafts.k_max)


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
sd_configs = st.builds(SdConfig, width=st.integers(2, 8), p_min=st.sampled_from([0.0, 0.5]))


@SETTINGS
@given(traces(), sd_configs)
def test_a_drafter_with_the_targets_tokens_costs_what_same_vocabulary_sd_does(trace_cap, config):
    trace, cap = trace_cap
    if trace.n_prompt_drafter == 0:  # a real prompt has a token; the runner re-reads it at worst
        trace = dataclasses.replace(trace, n_prompt_drafter=1)
    same = decode_sd(TargetOracle(trace.y), TraceDrafts(trace), cap, trace.n_prompt, trace.n_prompt_drafter, config)
    cross = with_cross(trace, identity_cross(trace))
    kv = CrossVocabKV(cross.drafts.cross, trace.n_prompt_drafter, config.width, trace.window_id)
    assert decode_sd(TargetOracle(trace.y), TraceDrafts(cross), cap, trace.n_prompt, trace.n_prompt_drafter,
                     config, kv) == same
    assert decode_serial(config, cross, cap) == same


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(traces(), min_size=1, max_size=3), sd_configs)
def test_bulk_replay_of_cross_vocabulary_sd_equals_the_reference(trace_caps, config):
    profile = make_profile()
    windows, window_traces = [], {}
    for i, (trace, cap) in enumerate(trace_caps):
        trace = with_cross(dataclasses.replace(trace, window_id=f"w{i}", n_prompt_drafter=3), identity_cross(trace))
        window = window_for(trace, cap)
        trace = dataclasses.replace(trace, window_sha256=window.window_sha256)
        windows.append(window)
        window_traces[trace.window_id] = trace
    files = {"drafter": TraceFile(ModelRef("t", "t", 1 << 20), ModelRef("drafter", "d", 1 << 20), window_traces)}
    bulk = replay_study(windows, files, [profile], [config])
    reference = rows_frame([dataclasses.asdict(replay_window(w, window_traces[w.window_id], profile, config))
                              for w in windows])
    pd.testing.assert_frame_equal(bulk.reset_index(drop=True), reference[bulk.columns], check_dtype=False, check_exact=True)


def test_cross_drafts_round_trip_and_old_traces_are_refused(tmp_path):
    rows = [[], [11, 99], [], [13, 14], [], []]
    trace = hand_trace(rows, [[], [2, 4], [], [1, 3], [], []], [[], [22, 23, 198, 199, 5], [], [26, 27, 28, 29], [], []])
    doc = window_trace_to_dict(trace)
    assert doc["drafts"]["step"][1] == [2, 4] and doc["drafts"]["context"]["keep"][:3] == [0, 0, 2]
    back = window_trace_from_dict(doc, Where("test"), WIDE)
    assert decode_serial(SdConfig(width=3), back, cap=32) == decode_serial(SdConfig(width=3), trace, cap=32)

    partial = {**doc, "drafts": {k: v for k, v in doc["drafts"].items() if k != "context"}}
    with pytest.raises(SpecbenchError, match="drafts.context"):
        window_trace_from_dict(partial, Where("test"), WIDE)

    # A file of the previous version (cross-vocabulary rows without these fields) is refused, naming both versions.
    path = tmp_path / "old.jsonl"
    plain = dataclasses.replace(trace, drafts=dataclasses.replace(trace.drafts, cross=None))
    save_trace_file(path, ModelRef("t", "t", 1 << 20), ModelRef("d", "d", 1 << 20), [plain])
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0].replace(f'"schema_version":{VERSIONS[-1]}', '"schema_version":1')] + lines[1:]) + "\n")
    with pytest.raises(SpecbenchError, match=f"^{path}: line 1: schema_version 1, this specbench reads "
                                             f"{VERSIONS[-1]} \\(hint:"):
        load_trace_file(path)


def test_tracing_does_not_resume_a_file_of_an_older_version(tmp_path):
    from specbench.world.tracing import TraceWriter

    path = tmp_path / "d.jsonl"
    path.write_text('{"kind": "specbench.trace", "schema_version": 1, "target": {"name": "t", "sha256": "t"}, '
                    '"drafter": {"name": "d", "sha256": "d"}}\n')
    with pytest.raises(SpecbenchError, match=f"schema_version 1, this specbench reads {VERSIONS[-1]} \\(hint:"):
        TraceWriter(path, ModelRef("t", "t", 1 << 20), ModelRef("d", "d", 1 << 20), {"target": "model", "drafter": "model"}, resume=True)
