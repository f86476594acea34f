"""`specbench windows` from the three dataset layouts, hashing, conversion and bad inputs."""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile
from click.testing import CliRunner

from specbench.cli import main
from specbench.schemas.windows import load_windows, split_of
from specbench.world.audio import audio_window_sha256, load_window_audio
from specbench.world.datasets import build_windows, read_nemo
from tests.audio.speech import SENTENCES, speak


def invoke(*args):
    result = CliRunner().invoke(main, [str(a) for a in args])
    return result.exit_code, result.output


def test_librispeech_tree(librispeech_tree, tmp_path):
    out = tmp_path / "w.jsonl"
    code, output = invoke("windows", librispeech_tree, "--out", out, "--dev-fraction", "0.5")
    assert code == 0, output
    windows = load_windows(out)
    assert [w.window_id for w in windows] == list(SENTENCES)
    assert windows[0].reference == SENTENCES["1089-134686-0000"].upper()
    assert windows[0].instruction == "Transcribe the audio." and windows[0].dataset == "test-clean"
    assert windows[0].input.conversion == {"source_rate": 16000, "source_channels": 1, "resampled": False,
                                           "downmixed": False, "cut_to_s": 30.0}
    assert {w.split.value for w in windows} <= {"dev", "test"}
    # the same audio always gives the same hash; a second build is identical
    again = tmp_path / "again.jsonl"
    assert invoke("windows", librispeech_tree, "--out", again, "--dev-fraction", "0.5")[0] == 0
    assert out.read_text() == again.read_text()


def test_nemo_manifest_with_conversion_and_offset(tmp_path):
    wav = speak("the quick brown fox", tmp_path / "audio" / "fox.wav", rate=22050, channels=2)
    duration = soundfile.info(str(wav)).duration
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text(json.dumps({"audio_filepath": "audio/fox.wav", "duration": duration - 0.2,
                                    "text": "the quick brown fox", "offset": 0.1}) + "\n")
    out = tmp_path / "w.jsonl"
    code, output = invoke("windows", manifest, "--task", "translate", "--language", "French", "--out", out)
    assert code == 0, output
    (window,) = load_windows(out)
    assert window.instruction == "Translate the speech into French."
    conversion = window.input.conversion
    assert (conversion["source_rate"], conversion["source_channels"]) == (22050, 2)
    assert conversion["resampled"] and conversion["downmixed"] and (conversion["up"], conversion["down"]) == (320, 441)
    assert window.input.offset_s == 0.1
    assert window.input.duration_s == pytest.approx(duration - 0.2, abs=1e-3)
    assert "1 converted to 16 kHz mono" in output


def test_kaldi_directory_with_segments(tmp_path):
    speak("one two three four five six", tmp_path / "rec1.wav")
    (tmp_path / "wav.scp").write_text("rec1 rec1.wav\n")
    (tmp_path / "segments").write_text("utt_a rec1 0.0 0.8\nutt_b rec1 0.8 1.6\n")
    (tmp_path / "text").write_text("utt_a one two three\nutt_b four five six\n")
    out = tmp_path / "w.jsonl"
    code, output = invoke("windows", tmp_path, "--out", out)
    assert code == 0, output
    windows = load_windows(out)
    assert [(w.window_id, w.input.offset_s, w.input.duration_s) for w in windows] == [
        ("utt_a", 0.0, 0.8), ("utt_b", 0.8, 0.8)]
    assert windows[0].window_sha256 != windows[1].window_sha256
    (tmp_path / "segments").write_text("utt_a rec1 0.0 0.8\nutt_b rec1 0.8 9.0\n")
    code, output = invoke("windows", tmp_path, "--out", tmp_path / "w2.jsonl")
    assert code == 1
    assert f"{tmp_path / 'segments'}: line 2: the span 0.8..9 s runs past the end of" in error_line(output)


def test_hash_changes_with_sample_prompt_and_cap(librispeech_tree):
    path = librispeech_tree / "1089" / "134686" / "1089-134686-0000.flac"
    samples, _ = load_window_audio(path, 0.0, None)
    base = audio_window_sha256(samples, "Transcribe the audio.", "chatml", 448)
    assert base == audio_window_sha256(samples.copy(), "Transcribe the audio.", "chatml", 448)
    changed = samples.copy()
    changed[100] += 0.01
    assert audio_window_sha256(changed, "Transcribe the audio.", "chatml", 448) != base
    assert audio_window_sha256(samples, "Transcribe this.", "chatml", 448) != base
    assert audio_window_sha256(samples, "Transcribe the audio.", "chatml", 447) != base


def test_splits_are_reproducible_and_order_free():
    ids = [f"utt-{i}" for i in range(200)]
    splits = [split_of(i, 7, 0.25) for i in ids]
    assert splits == [split_of(i, 7, 0.25) for i in ids]
    assert 20 < sum(s.value == "dev" for s in splits) < 80
    assert [split_of(i, 8, 0.25) for i in ids] != splits


def test_long_audio_is_cut(librispeech_tree):
    utterances = [u for u in __import__("specbench.world.datasets", fromlist=["read_librispeech"])
                  .read_librispeech(librispeech_tree)][:1]
    (window,) = build_windows(iter(utterances), "d", "Transcribe the audio.", "chatml", 448, 0.5, 0, 0.2)
    assert window.input.duration_s == 0.5 and window.input.conversion["cut_to_s"] == 0.5


# --- bad inputs ------------------------------------------------------------------------


def error_line(output):
    lines = [line for line in output.splitlines() if line.startswith("Error: ")]
    assert len(lines) == 1 and "Traceback" not in output, output
    return lines[0]


def test_manifest_line_missing_a_field(tmp_path):
    wav = speak("hello", tmp_path / "a.wav")
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"audio_filepath": str(wav), "duration": 0.5, "text": "hello"}) + "\n"
                        + json.dumps({"audio_filepath": str(wav), "text": "hello"}) + "\n")
    code, output = invoke("windows", manifest, "--out", tmp_path / "w.jsonl")
    assert code == 1
    assert error_line(output) == f"Error: {manifest}: line 2: missing field 'duration'"
    assert not (tmp_path / "w.jsonl").exists()


def test_empty_transcript_is_an_error_not_a_dropped_window(tmp_path):
    wav = speak("hello", tmp_path / "a.wav")
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"audio_filepath": str(wav), "duration": 0.5, "text": "  "}) + "\n")
    code, output = invoke("windows", manifest, "--out", tmp_path / "w.jsonl")
    assert code == 1 and f"{manifest}: line 1: empty transcript" in error_line(output)


def test_missing_and_unreadable_audio(tmp_path):
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"audio_filepath": "nope.wav", "duration": 1.0, "text": "x"}) + "\n")
    code, output = invoke("windows", manifest, "--out", tmp_path / "w.jsonl")
    assert code == 1
    assert error_line(output) == f"Error: {manifest}: line 1: {tmp_path / 'nope.wav'}: audio file not found"
    (tmp_path / "junk.wav").write_bytes(b"RIFF....not audio at all")
    manifest.write_text(json.dumps({"audio_filepath": "junk.wav", "duration": 1.0, "text": "x"}) + "\n")
    code, output = invoke("windows", manifest, "--out", tmp_path / "w.jsonl")
    assert code == 1 and f"{tmp_path / 'junk.wav'}: cannot read audio" in error_line(output)


def test_translate_without_language(librispeech_tree, tmp_path):
    code, output = invoke("windows", librispeech_tree, "--task", "translate", "--out", tmp_path / "w.jsonl")
    assert code == 1 and error_line(output) == "Error: task 'translate' needs --language"


def test_unknown_layout_directory(tmp_path):
    code, output = invoke("windows", tmp_path, "--out", tmp_path / "w.jsonl")
    assert code == 1 and "cannot tell the layout" in error_line(output)


def test_read_nemo_names_bad_json_line(tmp_path):
    manifest = tmp_path / "m.jsonl"
    manifest.write_text('{"audio_filepath": "a.wav", "duration": 1, "text": "x"}\n{oops\n')
    reader = read_nemo(manifest)
    next(reader)
    with pytest.raises(Exception, match=r"line 2 is not valid JSON"):
        next(reader)


def test_resampling_keeps_a_tone(tmp_path):
    rate = 44100
    t = np.arange(rate) / rate
    soundfile.write(str(tmp_path / "tone.wav"), np.stack([np.sin(2 * np.pi * 440 * t)] * 2, axis=1) * 0.5, rate)
    samples, conversion = load_window_audio(tmp_path / "tone.wav", 0.0, None)
    assert len(samples) == 16000 and conversion.downmixed and conversion.resampled
    spectrum = np.abs(np.fft.rfft(samples))
    assert abs(int(np.argmax(spectrum)) - 440) <= 1  # 1 Hz bins over one second


def test_an_audio_window_read_to_the_end_round_trips(librispeech_tree, tmp_path):
    """duration_s None (read to the end of the file) is written as null and loads back."""
    from dataclasses import replace

    from specbench.schemas.windows import save_windows

    out = tmp_path / "windows.jsonl"
    assert invoke("windows", str(librispeech_tree), "--out", str(out))[0] == 0
    window = load_windows(out)[0]
    open_ended = replace(window, input=replace(window.input, duration_s=None))
    save_windows(tmp_path / "again.jsonl", [open_ended])
    assert load_windows(tmp_path / "again.jsonl") == [open_ended]
