"""ProgDraft exports as traces: imported on hand-made fixtures (tests/data/progdraft/, in the
export's own field names), replayed at K = 8 against each round the export recorded, and on
a phone profile whose drafter costs are declared, end to end through the CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from specbench.cli import main
from specbench.core.methods.base import Model, TargetOracle, TraceDrafts
from specbench.core.methods.configs import SdConfig
from specbench.core.methods.sd import decode_sd
from specbench.core.replay.serial import sd_ops
from specbench.errors import SpecbenchError
from specbench.schemas.traces import load_trace_dir
from specbench.schemas.windows import load_windows
from specbench.world.progdraft import import_progdraft

DATA = Path(__file__).resolve().parents[1] / "data" / "progdraft"
EXPORTS = [DATA / "utt1.json", DATA / "utt2.json"]
PHONE = DATA / "phone-shared.yaml"
TARGET_SHA = "0d5b6d3c8a7f41e29b1c6e0f3a2d4b5c6e7f8091a2b3c4d5e6f708192a3b4c5d"
"""The target sha256 the phone fixture profile records."""
N_VOCAB = 151936
"""Qwen3's vocabulary, which the fixtures' token ids come from."""


def invoke(*args):
    result = CliRunner().invoke(main, [str(a) for a in args])
    return result.exit_code, result.output


def imported(tmp_path, exports=EXPORTS):
    import_progdraft(exports, tmp_path / "traces", tmp_path / "windows.jsonl", 448, 80, TARGET_SHA, n_vocab=N_VOCAB)
    return load_windows(tmp_path / "windows.jsonl"), load_trace_dir(tmp_path / "traces")


def recorded_rounds(export: dict, method: str) -> list[tuple[int, list[int]]]:
    """(accepted, emitted tokens) per round after specbench's prefill, from the export alone:
    the prefill commits y[0], which ProgDraft's first round verifies as its first candidate."""
    rounds = [(r["accepted"], r["emitted"]) for r in export["methods"][method]["rounds"]]
    accepted, emitted = rounds[0]
    head = [(accepted - 1, emitted[1:])] if accepted >= 1 else []
    return head + rounds[1:]


@pytest.mark.parametrize("method", ["ours", "anchor"])
def test_replay_at_k8_accepts_and_emits_exactly_what_each_round_recorded(tmp_path, method):
    windows, traces = imported(tmp_path)
    for path, window in zip(EXPORTS, windows):
        export = json.loads(path.read_text())
        assert export["k"] == 8
        trace = traces[method].windows[window.window_id]
        assert trace.y.tolist() == export["reference"]["tokens"]
        decoded = decode_sd(TargetOracle(trace.y), TraceDrafts(trace, method), window.cap, trace.n_prompt,
                            trace.n_prompt_drafter, SdConfig(width=9, drafter=method))
        verifies = [op for op in decoded.ops if op.model is Model.TARGET]
        t, replayed = 1, []
        for op in verifies:
            replayed.append((op.accepted, list(decoded.tokens[t:t + op.committed])))
            t += op.committed
        assert replayed == recorded_rounds(export, method)
        assert list(decoded.tokens) == export["reference"]["tokens"]
        # the vectorised replay every study uses makes the same rounds
        assert sd_ops(trace, window.cap, SdConfig(width=9, drafter=method)).target_accepted.tolist() == \
            [a for a, _ in replayed]


def test_only_visited_prefixes_have_rows_and_a_width_needing_another_is_refused(tmp_path):
    _, traces = imported(tmp_path)
    trace = traces["ours"].windows["fixture-0001"]
    # ours on utt1 visits prefixes 0, 4, 13, 15 (accepted 3, 8, 1, 7); row 1 is the first round's rest
    assert [t for t in range(trace.n_tokens) if trace.drafts.has_row(t)] == [0, 1, 4, 13, 15]
    with pytest.raises(SpecbenchError, match=r"window 'fixture-0001' \(drafter ours\): no draft row at t=\d+.*"
                                             r"missing context"):
        sd_ops(trace, 448, SdConfig(width=5, drafter="ours"))


def test_cli_import_then_replay_ours_and_anchor_on_a_phone_profile_with_declared_costs(tmp_path):
    code, output = invoke("import-trace", "progdraft", *EXPORTS, "--out", tmp_path / "traces",
                          "--windows", tmp_path / "windows.jsonl", "--n-prompt", 80, "--n-vocab", N_VOCAB, "--target-sha256", TARGET_SHA)
    assert code == 0, output
    assert sorted(p.name for p in (tmp_path / "traces").iterdir()) == ["anchor.jsonl", "ours.jsonl"]
    out = tmp_path / "results"
    code, output = invoke("run", tmp_path / "windows.jsonl", "--traces", tmp_path / "traces", "--profile", PHONE,
                          "--methods", "target", "--method", "sd:W=9,drafter=ours|anchor", "--out", out)
    assert code == 0, output
    rows = [json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines()]
    by = {(r["config"], r["window_id"]): r for r in rows}
    for path in EXPORTS:
        export = json.loads(path.read_text())
        utterance = export["provenance"]["sample_id"]
        for method in ("ours", "anchor"):
            row = by[(f"sd[W=9,drafter={method}]", utterance)]
            recorded = recorded_rounds(export, method)
            assert row["target_forwards"] == len(recorded)
            assert row["accepted"] == sum(a for a, _ in recorded)
            assert row["tokens"] == len(export["reference"]["tokens"]) - 1
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["profiles"][0]["declared_costs"] == {
        "anchor": "a table measured elsewhere; source: hand-made table standing in for another harness's measurement",
        "ours": "0.12 x the target's CT(n, depth); source: one decoder block + LM head"}

    # a width whose rounds need a prefix no round visited: refused before anything is written
    code, output = invoke("run", tmp_path / "windows.jsonl", "--traces", tmp_path / "traces", "--profile", PHONE,
                          "--method", "sd:W=5,drafter=ours", "--out", tmp_path / "w5")
    assert code == 1
    assert "no draft row at t=" in output and "missing context" in output
    assert not (tmp_path / "w5").exists()


def _broken(tmp_path, change) -> Path:
    doc = json.loads(EXPORTS[0].read_text())
    change(doc)
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(doc))
    return path


def _set(doc, keys, value):
    for key in keys[:-1]:
        doc = doc[key]
    doc[keys[-1]] = value


@pytest.mark.parametrize("keys, value, named", [
    (("methods", "ours", "rounds", 1, "accepted"), 7, r"methods\.ours\.rounds\[1\]\.accepted': expected 8"),
    (("methods", "anchor", "rounds", 2, "candidates"), [1, 2, 3],
     r"methods\.anchor\.rounds\[2\]\.candidates': expected 8 tokens"),
    (("methods", "ours", "rounds", 0, "emitted"), [3830, 279, 5091], r"methods\.ours\.rounds\[0\]\.emitted'"),
    (("methods", "ours", "rounds", 2, "round"), 9, r"methods\.ours\.rounds\[2\]\.round': expected 3"),
    (("reference", "tokens"), "3830 279", r"reference\.tokens': expected a list, got '3830 279'"),
    (("reference", "emitted"), 5, r"reference\.emitted': expected 22"),
    (("k",), 0, r"'k': expected an integer >= 1"),
])
def test_a_malformed_export_names_the_utterance_and_the_field(tmp_path, keys, value, named):
    path = _broken(tmp_path, lambda doc: _set(doc, keys, value))
    code, output = invoke("import-trace", "progdraft", path, "--out", tmp_path / "traces",
                          "--windows", tmp_path / "windows.jsonl", "--n-prompt", 80, "--n-vocab", N_VOCAB)
    assert code == 1
    assert f"{path}: utterance 'fixture-0001': key '" in output
    assert re.search(named, output), output
    assert not (tmp_path / "traces").exists() and not (tmp_path / "windows.jsonl").exists()


def test_rounds_that_stop_short_of_the_reference_and_missing_keys_are_refused(tmp_path):
    path = _broken(tmp_path, lambda doc: doc["methods"]["ours"]["rounds"].pop())
    with pytest.raises(SpecbenchError, match=r"utterance 'fixture-0001': key 'methods\.ours\.rounds': expected "
                                             r"rounds that emit all 22 reference tokens, got '15 tokens emitted'"):
        import_progdraft([path], tmp_path / "t", tmp_path / "w.jsonl", 448, 80, n_vocab=N_VOCAB)
    path = _broken(tmp_path, lambda doc: doc["methods"]["anchor"]["rounds"][0].pop("accepted"))
    with pytest.raises(SpecbenchError, match=r"methods\.anchor\.rounds\[0\]\.accepted': expected an integer "
                                             r"\(missing\)"):
        import_progdraft([path], tmp_path / "t", tmp_path / "w.jsonl", 448, 80, n_vocab=N_VOCAB)
    with pytest.raises(SpecbenchError, match=r"utterance 'fixture-0001' is also in"):
        import_progdraft([EXPORTS[0], EXPORTS[0]], tmp_path / "t", tmp_path / "w.jsonl", 448, 80, n_vocab=N_VOCAB)
    # a cap at the output's length leaves the last round room for fewer drafts than it proposed:
    # replay then accepts fewer, and the round is named
    with pytest.raises(SpecbenchError, match=r"utterance 'fixture-0001': key 'methods\.anchor\.rounds\[6\]': "
                                             r"expected replay at K=8 to accept 2 and commit 2 tokens as this round "
                                             r"did \(replay round 7\), got 'accepted 1, committed 2'"):
        import_progdraft([EXPORTS[0]], tmp_path / "t", tmp_path / "w.jsonl", 22, 80, n_vocab=N_VOCAB)
    with pytest.raises(SpecbenchError, match=r"reference\.tokens': expected at most --cap 10 tokens"):
        import_progdraft(EXPORTS, tmp_path / "t", tmp_path / "w.jsonl", 10, 80, n_vocab=N_VOCAB)
    assert not (tmp_path / "t").exists()


def test_a_token_id_outside_the_vocabulary_is_one_line_and_nothing_is_written(tmp_path):
    path = _broken(tmp_path, lambda doc: _set(doc, ("methods", "ours", "rounds", 1, "candidates", 2), N_VOCAB))
    code, output = invoke("import-trace", "progdraft", path, "--out", tmp_path / "traces",
                          "--windows", tmp_path / "windows.jsonl", "--n-prompt", 80, "--n-vocab", N_VOCAB)
    assert code == 1
    assert output.strip() == (f"Error: {path}: utterance 'fixture-0001': methods.ours.rounds[1].candidates[2] = "
                              f"{N_VOCAB}, expected a token id in [0, {N_VOCAB}) (target vocabulary, --n-vocab)")
    assert not (tmp_path / "traces").exists() and not (tmp_path / "windows.jsonl").exists()
