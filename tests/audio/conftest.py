"""Fixtures of the speech tests: a small LibriSpeech tree synthesized with espeak-ng and sox (tests/audio/speech.py)
and tiny Qwen3-ASR-shaped models."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.audio.speech import SENTENCES, speak


@pytest.fixture(scope="session")
def librispeech_tree(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("librispeech") / "test-clean"
    chapter = root / "1089" / "134686"
    for utt, text in SENTENCES.items():
        speak(text, chapter / f"{utt}.flac")
    (chapter / "1089-134686.trans.txt").write_text(
        "".join(f"{utt} {text.upper()}\n" for utt, text in SENTENCES.items()))
    return root


@pytest.fixture(scope="session")
def tiny_asr(tmp_path_factory):
    """Tiny random-weight Qwen3-ASR-shaped models (qwen3vl + qwen3a mmproj): target width 64, drafter 32."""
    pytest.importorskip("gguf", reason="the tiny model fixtures need gguf==0.19.0")
    from .tiny_audio_gguf import write_tiny_asr

    return write_tiny_asr(tmp_path_factory.mktemp("tiny-asr"))
