"""WER/CER and the lossless-in-text check against hand computation; rows with and without text."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from specbench.core import text_metrics
from specbench.core.methods.configs import TargetConfig, row_fields
from specbench.core.text_metrics import edits, first_difference, normalise, text_check, transcripts
from specbench.errors import SpecbenchError
from specbench.schemas.results import ROW_FIELDS, ResultsDir, WindowResult
from tests.helpers import results_manifest


def test_normalisation_is_the_named_one():
    assert text_metrics.NORMALISATION == "specbench-text-1"
    # Qwen3-ASR's language tag goes; case folds; apostrophes vanish; other punctuation splits words
    assert normalise("language English<asr_text>Hello,  World!") == "hello world"
    assert normalise("Don't STOP \u2014 well-known\tthings...") == "dont stop well known things"
    assert normalise("  language None<asr_text> ok ") == "ok"
    # only a leading tag is an ASR prefix; symbols (<, >) stay, '_' is punctuation
    assert normalise("say language English<asr_text> x") == "say language english<asr text> x"
    assert normalise("\u00bfQu\u00e9?  \u00c9T\u00c9") == "qu\u00e9 \u00e9t\u00e9"
    assert normalise("...") == ""


def test_word_and_character_edits_by_hand():
    # insertion: one word; characters " down" = 5 of 11 ("the cat sat")
    e = edits("the cat sat", "the cat sat down")
    assert (e.word_edits, e.ref_words, e.char_edits, e.ref_chars) == (1, 3, 5, 11)
    assert e.wer == pytest.approx(1 / 3) and e.cer == pytest.approx(5 / 11)
    # deletion: "cat" -> one word; "cat " -> 4 characters
    e = edits("the cat sat", "the sat")
    assert (e.word_edits, e.char_edits) == (1, 4)
    # substitution: cat -> dog, 3 characters
    e = edits("the cat sat", "the dog sat")
    assert (e.word_edits, e.char_edits) == (1, 3)
    # normalisation first: no edits for case, punctuation and the ASR prefix
    assert edits("The cat, sat.", "language English<asr_text>the CAT sat").word_edits == 0
    # empty hypothesis: every reference word (character) deleted -> 100 %
    e = edits("the cat sat", "")
    assert (e.word_edits, e.ref_words, e.char_edits, e.ref_chars) == (3, 3, 11, 11) and e.wer == 1.0
    # empty reference: no rate (not a division by zero)
    e = edits("", "hello there")
    assert e.ref_words == 0 and math.isnan(e.wer) and math.isnan(e.cer)
    assert math.isnan(edits("?!", "").wer)


def _row(window_id, config, text, dataset="d", device="A", sha=None, source="native"):
    return {"device": device, "method": config.split("[")[0], "config": config, "window_id": window_id,
            "window_sha256": sha or f"sha-{window_id}", "dataset": dataset, "split": "test", "source": source,
            "text": text}


REFS = {"w1": ("sha-w1", "a b c d"), "w2": ("sha-w2", "e"), "w3": ("sha-w3", ""), "w4": ("sha-w4", "x y"),
        "w5": ("sha-w5", None)}


def test_pooled_and_mean_wer_by_hand():
    frame = pd.DataFrame([
        _row("w1", "target", "a b c x"),         # 1 edit / 4 words (25 %); 1 char edit / 7 chars
        _row("w2", "target", "f"),               # 1 / 1 (100 %);  1 / 1
        _row("w3", "target", "anything"),        # empty reference: counted, excluded
        _row("w4", "target", ""),                # no text: unscored
        _row("w5", "target", "no reference"),    # the window has no reference: unscored
        _row("w6", "target", "unknown window"),  # not in the windows file: unscored
        _row("w1", "as2d[B=3]", "a b c d", sha="sha-other"),  # another window content: unscored
        _row("w1", "target", "a b c d", dataset="e"),
    ])
    table = transcripts(frame, REFS).set_index(["dataset", "config"])
    d = table.loc[("d", "target")]
    assert (d["windows"], d["empty_reference"], d["unscored"], d["ref_words"]) == (2, 1, 3, 5)
    assert d["wer_pct"] == pytest.approx(100 * 2 / 5)               # pooled: total edits / total words
    assert d["wer_mean_pct"] == pytest.approx(100 * (0.25 + 1.0) / 2)  # mean of per-window WER
    assert d["cer_pct"] == pytest.approx(100 * 2 / 8)
    assert d["cer_mean_pct"] == pytest.approx(100 * (1 / 7 + 1.0) / 2)
    assert table.loc[("e", "target"), "wer_pct"] == 0.0
    assert ("d", "as2d[B=3]") not in table.index  # nothing of it scored


def test_only_empty_references_give_no_rate_but_are_counted():
    table = transcripts(pd.DataFrame([_row("w3", "target", "x")]), REFS).iloc[0]
    assert (table["windows"], table["empty_reference"]) == (0, 1)
    assert math.isnan(table["wer_pct"]) and math.isnan(table["wer_mean_pct"])


def test_identical_text_check_flags_the_differing_method():
    frame = pd.DataFrame([
        _row("w1", "target", "hello world"), _row("w1", "sd[W=5]", "hello world"),
        _row("w1", "as2d[B=3]", "hello world!"),
        _row("w2", "target", "same"), _row("w2", "as2d[B=3]", "same"), _row("w2", "sd[W=5]", ""),  # not recorded
        _row("w2", "target", "same", device="B"),  # one row only: nothing to compare
        _row("w1", "as2d[B=3]", "hello world", source="replay"),
    ])
    summary, differing = text_check(frame)
    assert summary.iloc[0].to_dict() == {"windows_checked": 2, "identical": 1, "differing": 1, "rows_compared": 6,
                                         "rows_without_text": 1}
    assert len(differing) == 1
    row = differing.iloc[0]
    assert (row["window_id"], row["config"], row["source"], row["against"]) == ("w1", "as2d[B=3]", "native",
                                                                                "target (native)")
    assert row["first_diff_char"] == 11 and row["got"] == "hello world!"


def test_without_a_target_row_the_first_row_is_the_comparison():
    frame = pd.DataFrame([_row("w1", "sd[W=5]", "abc"), _row("w1", "as2d[B=3]", "abd")])
    _, differing = text_check(frame)
    assert differing.iloc[0][["config", "against", "first_diff_char"]].tolist() == ["as2d[B=3]", "sd[W=5] (native)", 2]


def test_first_difference():
    assert first_difference("abc", "abd") == 2
    assert first_difference("abc", "abcdef") == 3
    assert first_difference("", "x") == 0
    assert first_difference("same", "same") == 4


def _result(window_id, text=""):
    return WindowResult("A", **row_fields(TargetConfig()), window_id=window_id, window_sha256="s" * 64, dataset="d",
                        split="test", tokens=3, decode_s=1.0, target_forwards=3, proposed=0, accepted=0,
                        multi_token_forwards=0, drafter_forwards=0, d_s=0.0, v_s=1.0, o_s=0.0, h_s=0.0,
                        extrapolated=False, lossless=True, text=text)


def test_a_row_without_text_is_refused_and_a_producer_without_the_column_writes_it(tmp_path):
    results = ResultsDir(tmp_path / "r")
    results.open(results_manifest(mode="replay"), resume=False)
    old = {k: v for k, v in vars(_result("w1")).items() if k != "text"}
    results.rows_path.write_text(json.dumps(old) + "\n")  # a row of a format without `text`
    with pytest.raises(SpecbenchError) as error:
        results.frame()
    assert str(error.value) == f"{results.rows_path}: key 'line 1.text': expected a string (missing)"
    results.rows_path.write_text("")
    results.append([_result("w2", "hello")])
    frame = pd.DataFrame([vars(_result("w3"))]).drop(columns=["text"])  # a producer without the column
    results.append_frame(frame)
    loaded = results.frame()
    assert list(loaded.columns) == list(ROW_FIELDS) and "text" in ROW_FIELDS
    assert loaded["text"].tolist() == ["hello", ""]
    assert [r.text for r in results.rows()] == ["hello", ""]
    # resume still finds the rows done
    assert len(results.open(results_manifest(mode="replay"), resume=True)) == 2


def test_a_text_that_is_not_a_string_is_named(tmp_path):
    results = ResultsDir(tmp_path / "r")
    results.open(results_manifest(mode="replay"), resume=False)
    results.append([_result("w1", "ok")])
    with open(results.rows_path, "a") as handle:
        handle.write(json.dumps({**vars(_result("w2")), "text": 7}) + "\n")
    with pytest.raises(SpecbenchError, match=r"row 2.*text"):
        results.frame()


def test_replayed_rows_carry_the_trace_text_through_the_results_file(tmp_path):
    import dataclasses

    from bench.synthetic_study import synthetic_study
    from specbench.core.methods.configs import parse_method_specs
    from specbench.core.replay.bulk import replay_study

    study = synthetic_study(n_windows=3, n_devices=1)
    traces = {name: dataclasses.replace(f, windows={w: dataclasses.replace(t, text=f"answer of {w}")
                                                    for w, t in f.windows.items()})
              for name, f in study.traces.items()}
    drafter = sorted(traces)[0]
    configs = parse_method_specs(["target", f"sd:W=5,drafter={drafter}", f"as2d:B=3,drafter={drafter}"])
    frame = replay_study(study.windows, traces, study.profiles, configs)
    assert set(frame["method"]) == {"target", "sd", "as2d"}
    assert (frame["text"] == "answer of " + frame["window_id"]).all()
    results = ResultsDir(tmp_path / "r")
    results.open(results_manifest(mode="replay"), resume=False)
    results.append_frame(frame)
    assert results.frame()["text"].tolist() == frame["text"].tolist()
    summary, differing = text_check(results.frame())
    assert summary.at[0, "windows_checked"] == 3 and summary.at[0, "differing"] == 0 and differing.empty
