"""The runner's whisper.cpp engine on tiny random-weight Whisper-shaped models (tests/audio/tiny_whisper.py,
written by specbench.world.whisper_ggml.write_whisper): whisper.cpp loads them, and target-only, SD, SpecASR
and AS2D commit the same tokens with the target's early exit as drafter (some drafts accepted, some rejected)
and with the target drafting for itself (every draft accepted); write_whisper refuses what whisper.cpp could
not load. Seconds, without the demo models; the real Whisper pair's run is tests/audio/test_whisper_engine.py.
Needs `make runners`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from specbench.errors import SpecbenchError
from specbench.world.whisper_ggml import write_whisper
from tests.audio.tiny_whisper import N_AUDIO_CTX, N_TEXT_CTX, N_VOCAB, TARGET, hparams, tensors, vocabulary

CAP = 16
METHODS = [{"name": "target"}, {"name": "sd", "width": 4}, {"name": "as2d"},
           {"name": "specasr", "k_max": 4, "tau": 0.5}]


def decode_job(target: Path, drafter: Path | None, audio: Path, methods: list[dict], cap: int = CAP) -> dict:
    """A decode job of one audio window (no prompt text) on the whisper.cpp pair."""
    job = {"mode": "decode", "threads": 1, "target": {"path": str(target)}, "methods": methods,
           "windows": [{"id": "tone", "audio": {"path": str(audio), "format": "s16"}, "prompt_text": "", "cap": cap}]}
    if drafter is not None:
        job["drafter"] = {"path": str(drafter)}
    return job


@pytest.mark.parametrize("drafter", ["early exit", "itself"])
def test_every_method_decodes_the_tiny_whisper_pair_losslessly(run_job, tiny_whisper, drafter):
    draft_model = tiny_whisper.drafter if drafter == "early exit" else tiny_whisper.target
    out = run_job(decode_job(tiny_whisper.target, draft_model, tiny_whisper.audio, METHODS))
    assert out.returncode == 0, out.error or out.stderr[-2000:]
    for e in (e for e in out.events if e.get("event") == "loaded"):
        assert (e["engine"], e["n_vocab_model"], e["n_audio_ctx"], e["n_ctx"]) == \
            ("whisper.cpp", N_VOCAB, N_AUDIO_CTX, N_TEXT_CTX)
    by_method = {r["method"]["name"]: r for r in out.results if r["kind"] == "decode"}
    assert set(by_method) == {m["name"] for m in METHODS}
    target = by_method["target"]
    assert target["stop_reason"] == "cap" and len(target["tokens"]) == CAP
    assert target["audio_prefill_us"] > 0  # the encoder ran as the window's prefill
    for name, result in by_method.items():
        assert result["tokens"] == target["tokens"], name
    verifications = [op for op in by_method["sd"]["ops"] if op["model"] == "target"]
    if drafter == "itself":  # verification's batched rows decided every token
        assert all(op["accepted"] == op["width"] - 1 for op in verifications[:-1])
    else:  # both of verification's paths ran: a draft kept, a draft replaced by the target's token
        assert any(op["accepted"] > 0 for op in verifications)
        assert any(op["accepted"] < op["width"] - 1 for op in verifications)


def test_the_tiny_target_hears_its_audio(run_job, tiny_whisper, tmp_path):
    """Silence instead of the signal changes the transcript: the encoder's output reaches the decoder."""
    silence = tmp_path / "silence.s16"
    silence.write_bytes(bytes(tiny_whisper.audio.stat().st_size))
    tokens = []
    for audio in (tiny_whisper.audio, silence):
        out = run_job(decode_job(tiny_whisper.target, None, audio, [{"name": "target"}]))
        assert out.returncode == 0, out.error or out.stderr[-2000:]
        [result] = out.results
        tokens.append(result["tokens"])
    assert tokens[0] != tokens[1]


def test_write_whisper_refuses_what_whisper_cpp_cannot_load(tmp_path):
    """Unequal encoder and decoder widths (whisper.cpp asserts them equal) or a missing hyperparameter:
    one error line naming the file, and nothing written."""
    out = tmp_path / "bad.bin"
    wide = {**hparams(TARGET), "n_text_state": 2 * TARGET.width}
    with pytest.raises(SpecbenchError, match="n_text_state 128 != n_audio_state 64") as err:
        write_whisper(wide, tensors(TARGET, seed=1), vocabulary(), out)
    assert str(out) in str(err.value) and "\n" not in str(err.value)
    short = {k: v for k, v in hparams(TARGET).items() if k != "n_mels"}
    with pytest.raises(SpecbenchError, match="hyperparameters .* expected .*'n_mels'"):
        write_whisper(short, tensors(TARGET, seed=1), vocabulary(), out)
    assert list(tmp_path.iterdir()) == []
