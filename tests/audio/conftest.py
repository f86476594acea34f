"""Small speech sets synthesized with espeak-ng and sox (installed by the project's setup)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SENTENCES = {
    "1089-134686-0000": "he hoped there would be stew for dinner",
    "1089-134686-0001": "turnips and carrots and bruised potatoes",
    "1089-134686-0002": "after early nightfall the yellow lamps would light up",
}


def need_tools() -> None:
    missing = [tool for tool in ("espeak-ng", "sox") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (the Makefile's `deps` target installs them)")


def speak(text: str, out: Path, rate: int = 16000, channels: int = 1) -> Path:
    """Speech for `text` at `rate` Hz with `channels` channels, in the format of `out`'s suffix."""
    need_tools()
    out.parent.mkdir(parents=True, exist_ok=True)
    raw = out.with_suffix(".espeak.wav")
    subprocess.run(["espeak-ng", "-w", str(raw), text], check=True, capture_output=True)
    subprocess.run(["sox", str(raw), "-r", str(rate), "-c", str(channels), str(out)], check=True, capture_output=True)
    raw.unlink()
    return out


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
def audio_run_job():
    """run_job(job) -> RunnerOutput with the built native runner (or a skip saying how to build it)."""
    from tests.native.conftest import job_runner, runner_path

    path = runner_path()
    if not path.exists():
        pytest.skip(f"native runner not built ({path} missing): run scripts/build-runner")
    return job_runner(path)


@pytest.fixture(scope="session")
def tiny_asr(tmp_path_factory):
    """Tiny random-weight Qwen3-ASR-shaped models (qwen3vl + qwen3a mmproj): target width 64, drafter 32."""
    pytest.importorskip("gguf", reason="the tiny model fixtures need gguf==0.19.0")
    from .tiny_audio_gguf import write_tiny_asr

    return write_tiny_asr(tmp_path_factory.mktemp("tiny-asr"))


@pytest.fixture(scope="session")
def tiny_whisper(tmp_path_factory):
    """Tiny random-weight Whisper-shaped models in whisper.cpp's format (target, its one-layer early exit as
    drafter) and one second of audio: tests/audio/tiny_whisper.py."""
    from .tiny_whisper import write_tiny_whisper

    return write_tiny_whisper(tmp_path_factory.mktemp("tiny-whisper"))
