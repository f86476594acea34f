"""bench/whisper_speed.py's parts that decide what it compares, without timing anything: its parser of
whisper-cli's timings on a captured real printout, and, with the built runner and whisper-cli, that both sides
decode jfk.wav to the same text with the same number of decoder forwards (the float WAV the speech set's
clips take gives whisper-cli the same transcript as the 16-bit original).

The end-to-end part needs `make demo-model` and `make runners`; it skips, saying which, without them.
"""

from __future__ import annotations

import wave
from dataclasses import replace
from pathlib import Path

import pytest

from bench.runner_overhead import BenchError
from bench.whisper_speed import Clip, Setup, cli_side, float_wav, jfk_clip, mismatches, parse_timings, runner_side
from specbench.errors import SpecbenchError
from specbench.world import demo_models
from specbench.world.runner import runner_path

PRINTOUT = Path(__file__).resolve().parents[1] / "data" / "whisper" / "whisper-cli-1.8.5-base-jfk.stderr"
JFK_TEXT = "And so my fellow Americans, ask not what your country can do for you, ask what you can do for your country."


def test_parse_timings_reads_whisper_cli_1_8_5_printout():
    t = parse_timings(PRINTOUT.read_text())
    assert (t.decode_ms, t.decode_runs) == (1577.84, 25)  # 25 single-token forwards: jfk's 26 tokens with EOT
    assert (t.batchd_ms, t.batchd_tokens) == (147.38, 4)  # the task prompt: SOT, en, transcribe, notimestamps
    assert (t.sample_ms, t.encode_ms, t.mel_ms, t.prompt_ms, t.fallbacks) == (20.81, 2390.33, 40.20, 0.0, 0)


def test_parse_timings_names_the_missing_line():
    text = "".join(line for line in PRINTOUT.read_text().splitlines(keepends=True) if "decode time" not in line)
    with pytest.raises(BenchError, match="no 'decode time' line") as err:
        parse_timings(text)
    assert "\n" not in str(err.value)


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> Setup:
    runner = runner_path()
    cli = runner.parent / "whisper-cli"
    for path, how in ((runner, "scripts/build-runner"), (cli, "scripts/build-runner --whisper")):
        if not path.exists():
            pytest.skip(f"{path} missing: run {how} (`make runners`)")
    try:
        model = demo_models.demo_model("whisper-base", download=False)
    except SpecbenchError as err:
        pytest.skip(f"whisper-base not cached ({err}): run `make demo-model`")
    return Setup(runner, cli, model, 2, [jfk_clip(tmp_path_factory.mktemp("jfk"))])


@pytest.fixture(scope="module")
def cli_jfk(setup) -> dict:
    """whisper-cli's decode of the 16-bit jfk.wav, which both end-to-end tests compare against (run once)."""
    return cli_side(setup, setup.clips)


def test_both_sides_decode_jfk_alike(setup, cli_jfk):
    runner, cli = runner_side(setup, setup.clips), cli_jfk
    assert mismatches(runner, cli) == {}
    assert runner["jfk"].text == JFK_TEXT and runner["jfk"].tokens == 25 and runner["jfk"].prompt_tokens == 4
    # The check sees a difference: a transcript one token short is named, with both texts.
    short = {"jfk": replace(cli["jfk"], text=JFK_TEXT[:-1], tokens=24)}
    assert "whisper-cli 'And so" in mismatches(runner, short)["jfk"]


def test_float_wav_gives_whisper_cli_the_same_samples(setup, cli_jfk, tmp_path):
    np = pytest.importorskip("numpy")
    with wave.open(str(setup.clips[0].wav)) as w:
        s16 = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    f32 = (s16.astype(np.float32) / 32768.0).astype("<f4").tobytes()
    raw = tmp_path / "jfk.f32"
    raw.write_bytes(f32)
    clip = Clip("jfk", {"path": str(raw), "format": "f32"}, float_wav(f32, tmp_path / "jfk-float.wav"))
    assert (tmp_path / "jfk-float.wav").read_bytes()[-len(f32):] == f32
    original, floats = cli_jfk["jfk"], cli_side(setup, [clip])["jfk"]
    assert (floats.text, floats.tokens) == (original.text, original.tokens) == (JFK_TEXT, 25)
    assert mismatches(runner_side(setup, [clip]), {"jfk": floats}) == {}

