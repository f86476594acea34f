"""The prompt-lookup drafter (specbench.core.methods.lookup) on hand-made token sequences, its
trace rows, and SD replay with it. `CASES` are shared with tests/native/test_pld.py, which
checks the runner's lookup on the same sequences."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from specbench.core.methods.base import Model, Op, TargetOracle, TraceDrafts
from specbench.core.methods.configs import As2dConfig, SdConfig, parse_method_spec
from specbench.core.methods.lookup import IDENTITY, MAX_NGRAM, lookup_rows, prompt_lookup
from specbench.core.methods.sd import decode_sd, drafter_kv
from specbench.core.replay.bulk import replay_study
from specbench.core.replay.reference import decode_serial, replay_window
from specbench.errors import SpecbenchError
from specbench.schemas.fileio import Where
from specbench.schemas.results import rows_frame
from specbench.schemas.traces import PAD, DraftTable, LookupDrafts, Vocab, WindowTrace, window_trace_from_dict

WIDE = Vocab(1 << 20, 1 << 20)
"""Vocabulary sizes no token id of these tests reaches."""

# (context, limit, expected candidates, what it shows)
CASES = [
    ([1, 2, 3, 9, 1, 2, 3], 4, (9, 1, 2, 3), "a 3-gram match copies what followed it"),
    ([1, 2, 3, 9, 1, 2, 3], 2, (9, 1), "never more than the limit (W - 1)"),
    ([7, 2, 3, 5, 9, 2, 3, 6, 4, 2, 3], 3, (6, 4, 2), "the most recent of several matches wins"),
    ([1, 3, 4, 8, 0, 3, 4, 7, 2, 1, 3, 4], 3, (8, 0, 3), "the longest n-gram wins over a more recent shorter one"),
    ([4, 8, 2, 6, 4, 9, 5, 2, 6, 4], 2, (9, 5), "a 2-gram when no 3-gram recurs ..."),
    ([1, 5, 6, 7, 8, 1], 3, (5, 6, 7), "... and a 1-gram when no 2-gram does"),
    ([1, 2, 3, 4, 5], 4, (), "no recurring suffix proposes nothing"),
    ([9, 9, 9, 9], 3, (9,), "a match may overlap the suffix; it copies only what exists"),
    ([1, 2, 1, 2, 1, 2], 8, (1, 2), "the continuation stops at the end of the context"),
    ([3, 1, 4, 3], 0, (), "limit 0 (no room under the cap) proposes nothing"),
    ([3], 4, (), "one token has no earlier occurrence"),
]


@pytest.mark.parametrize("context,limit,expected,what", CASES, ids=[c[3] for c in CASES])
def test_prompt_lookup_on_hand_made_sequences(context, limit, expected, what):
    assert prompt_lookup(context, limit) == expected


def test_rows_are_the_lookup_at_every_prefix_and_serve_every_width():
    prompt, y = [5, 6, 7, 8], [5, 6, 7, 9, 5, 6, 7, 9, 5]
    rows = lookup_rows(prompt, y, 6)
    for t in range(len(y)):
        row = [v for v in rows[t].tolist() if v != PAD]
        assert tuple(row) == prompt_lookup(prompt + y[:t], 6)
        for width in range(2, 8):  # a row's first W - 1 tokens are the lookup at width W
            assert tuple(row[:width - 1]) == prompt_lookup(prompt + y[:t], width - 1)
    assert rows[1].tolist() == [6, 7, 8, 5, PAD, PAD]  # prompt + [5]: the 1-gram 5 recurs at 0; copied to the end


def lookup_trace(prompt, y, k_max=8):
    rows = lookup_rows(prompt, y, k_max)
    drafts = DraftTable(rows, np.where(rows == PAD, 0.0, 1.0), lookup=LookupDrafts("pld", MAX_NGRAM))
    return WindowTrace("w", "0" * 64, np.asarray(y, dtype=np.int32), "cap", len(prompt), len(prompt), drafts)


def test_sd_with_the_lookup_drafter_runs_one_lookup_per_round_and_is_lossless():
    prompt = [10, 11, 12, 13, 14, 15]
    y = [10, 11, 12, 13, 14, 15, 16, 10, 11, 12, 20]  # copies the prompt, then leaves it
    trace = lookup_trace(prompt, y)
    config = SdConfig(width=5, drafter="pld")
    decoded = decode_sd(TargetOracle(trace.y), TraceDrafts(trace), len(y), trace.n_prompt, trace.n_prompt_drafter,
                        config, drafter_kv(trace, config))
    assert list(decoded.tokens) == y
    ops = list(decoded.ops)
    # y[0] = 10 from the prefill; the lookup over prompt + [10] finds the 1-gram 10 at the prompt's
    # start and proposes 11..14, all accepted, with the bonus 15.
    assert ops[0] == Op(Model.DRAFTER, 1, len(prompt) + 1)
    assert ops[1] == Op(Model.TARGET, 5, len(prompt), 4, 4, 5)
    drafters = [op for op in ops if op.model is Model.DRAFTER]
    targets = [op for op in ops if op.model is Model.TARGET]
    assert len(drafters) == len(targets) and all(op.width == 1 for op in drafters)
    t = 1
    for d, v in zip(drafters, targets):  # each lookup reads prompt + y[:t]; its target step verifies it
        assert d.depth == len(prompt) + t and v.depth == len(prompt) + t - 1
        assert v.proposed == len(prompt_lookup(prompt + y[:t], min(4, len(y) - t - 1)))
        t += v.committed
    assert t == len(y)
    assert sum(op.accepted for op in targets) >= 4


def test_a_round_with_no_match_is_a_plain_target_step():
    prompt, y = [1, 2, 3], [4, 5, 6, 7]
    trace = lookup_trace(prompt, y)
    decoded = decode_serial(SdConfig(width=4, drafter="pld"), trace, cap=10)
    targets = [op for op in decoded.ops if op.model is Model.TARGET]
    assert [op.width for op in targets] == [1, 1, 1] and all(op.proposed == 0 for op in targets)
    assert sum(op.model is Model.DRAFTER for op in decoded.ops) == 3  # the lookup still ran


def test_a_trace_of_another_max_ngram_is_refused():
    trace = lookup_trace([1, 2], [1, 2, 1])
    other = WindowTrace(trace.window_id, trace.window_sha256, trace.y, "cap", 2, 2,
                        DraftTable(trace.drafts.tokens, trace.drafts.conf, lookup=LookupDrafts("pld", 2)))
    with pytest.raises(SpecbenchError, match="n-grams up to 2"):
        drafter_kv(other, SdConfig(width=3))


def test_lookup_drafts_load_and_are_refused_with_cross_vocabulary_fields():
    doc = {"window_id": "w", "window_sha256": "0" * 64, "y": [1, 2, 1], "stop_reason": "cap", "n_prompt": 2,
           "drafts": {"k_max": 2, "tokens": [[2], [1, 2], [2]], "conf": [[1.0], [1.0, 1.0], [1.0]],
                      "lookup": {"name": "pld", "max_ngram": 3}}}
    trace = window_trace_from_dict(doc, Where("t.jsonl", "line 2"), WIDE)
    assert trace.drafts.lookup == LookupDrafts("pld", 3) and trace.drafts.cross is None
    bad = doc | {"drafts": doc["drafts"] | {"lookup": {"name": "pld", "max_ngram": 0}}}
    with pytest.raises(SpecbenchError, match="max_ngram"):
        window_trace_from_dict(bad, Where("t.jsonl", "line 2"), WIDE)
    cross = doc | {"drafts": doc["drafts"] | {"step": [[0], [0, 1], [0]]}}
    with pytest.raises(SpecbenchError, match="lookup"):
        window_trace_from_dict(cross, Where("t.jsonl", "line 2"), WIDE)


def test_pld_is_a_drafter_name_for_sd_specs():
    assert [c.drafter for c in parse_method_spec("sd:W=4..5,drafter=pld")] == ["pld", "pld"]


def pld_study():
    """Windows whose output copies its input, the lookup's traces with their input streams, and a
    profile whose `pld` entry has a cost at width 1 only and no co-scheduling ratios."""
    from specbench.schemas.profiles import DrafterProfile, ModelId
    from specbench.schemas.traces import ModelRef, ProducerStream, TraceFile
    from tests.helpers import linear_costs, make_profile, window_for

    base = make_profile()
    lookup_costs = linear_costs(1e-6, 0.0, 1, "hand pld", (0, 1024), 1e-9)
    profile = dataclasses.replace(base, drafters={"pld": DrafterProfile("pld", ModelId("pld"), "cpu", lookup_costs,
                                                                        None)})
    cases = [([1, 2, 3, 4, 5, 6], [2, 3, 4, 5, 6, 9, 9, 9], [2, 3, 4, 5, 6]),  # the answer copies the input
             ([7, 8], [3, 3, 3, 3, 3, 3], [8, 3, 3]),
             ([1, 2, 3], [4, 5, 6, 7], [1, 2, 3])]                              # nothing to copy
    windows, traces = [], {}
    for i, (prompt, y, source) in enumerate(cases):
        window = window_for(lookup_trace(prompt, y), 12)
        window = dataclasses.replace(window, window_id=f"w{i}")
        z = np.asarray(source, dtype=np.int32)
        stream = ProducerStream(z, np.ones(len(z)), np.zeros(len(z), dtype=np.int32), 1, "eos")
        traces[window.window_id] = dataclasses.replace(lookup_trace(prompt, y), window_id=window.window_id,
                                                       window_sha256=window.window_sha256, producer=stream)
        windows.append(window)
    files = {"pld": TraceFile(ModelRef("t", "t", 1 << 20), ModelRef("pld", IDENTITY, 1 << 20), traces)}
    return windows, files, profile


def test_bulk_replay_of_pld_sd_and_as2d_equals_the_reference():
    windows, files, profile = pld_study()
    configs = [SdConfig(width=3, drafter="pld"), SdConfig(width=6, drafter="pld"),
               As2dConfig(budget=2, drafter="pld"), As2dConfig(budget=7, batch=2, drafter="pld")]
    bulk = replay_study(windows, files, [profile], configs)
    reference = rows_frame([dataclasses.asdict(replay_window(w, files["pld"].windows[w.window_id], profile, c))
                            for c in configs for w in windows])
    pd.testing.assert_frame_equal(bulk.reset_index(drop=True), reference[bulk.columns], check_dtype=False,
                                  check_exact=True)
    as2d = reference[reference["method"] == "as2d"]
    # The input is there from the start and nothing computes it: no producer time, no overlap,
    # no ratio filled in. Anchored at z[0] = y[0], B = 7 accepts the rest of the input (4);
    # B = 2 accepts [3, 4], commits 5 as the bonus and re-anchors there for 6: 3.
    assert (as2d["d_s"] == 0).all() and (as2d["o_s"] == 0).all() and not as2d["extrapolated"].any()
    assert as2d[as2d["window_id"] == "w0"]["accepted"].tolist() == [3, 4]
    assert (reference[reference["window_id"] == "w2"]["accepted"] == 0).all()
    sd = reference[reference["method"] == "sd"]
    assert (sd["d_s"] > 0).all() and (sd["drafter_forwards"] == sd["target_forwards"]).all()
