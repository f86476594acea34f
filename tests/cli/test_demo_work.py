"""What the demo asks the runner to do: its profiles leave the Whisper encoders untimed (no figure it shows reads
them), the overheads' Whisper decodes encode each window once per model, and each placement is traced with its own
lanes' threads, in a folder of its own that its replay, budget and native run read. No timing is asserted."""

from __future__ import annotations

import dataclasses
import wave

import numpy as np
import pytest

from specbench.app.cost_cells import sweep_plan
from specbench.app.demo import SPEECH_SUITE, trace_threads, traces_dir
from specbench.core.methods.configs import parse_method_specs
from specbench.errors import SpecbenchError
from specbench.schemas.fileio import file_sha256
from specbench.schemas.placement import resolve
from specbench.world.devices.local import LocalDevice
from specbench.world.model_files import ModelFile
from specbench.schemas.windows import InputView, make_text_window
from specbench.world.overheads import bundled_speech_sample, overheads_audio, overheads_job, workload_selection
from specbench.world.profiling import sweep_job


def test_the_demos_profiles_leave_the_encoders_untimed_and_a_plain_profile_times_them(tmp_path):
    for name in ("base.bin", "tiny.bin"):
        (tmp_path / name).write_bytes(b"")
    target, drafter = ModelFile("base", tmp_path / "base.bin"), ModelFile("tiny.en", tmp_path / "tiny.bin")
    configs = parse_method_specs(list(SPEECH_SUITE.methods))
    placement = resolve("split", [0, 1])
    device = LocalDevice()
    demo = sweep_plan(configs, placement, SPEECH_SUITE.depths, encoder=False)
    plain = sweep_plan(configs, placement, SPEECH_SUITE.depths)
    assert sweep_job(device, target, drafter, demo)["encoder"] is False
    assert sweep_job(device, target, drafter, demo, [])["encoder"] is False
    assert "encoder" not in sweep_job(device, target, drafter, plain)  # the runner's default: timed
    assert "encoder" not in sweep_job(device, target, drafter, plain, [])
    assert sweep_job(device, target, drafter, plain, [], "all")["encoder"] is False  # timed once per drafter
    # the same cells either way
    assert (demo.widths, demo.drafter_widths_of, demo.cosched_widths, demo.all_rows) == \
        (plain.widths, plain.drafter_widths_of, plain.cosched_widths, plain.all_rows)


def test_the_overheads_whisper_decodes_encode_each_window_once_per_model():
    audio = overheads_job({"path": "base.bin"}, {"path": "tiny.bin"}, audio="noise.f32").to_dict()
    assert audio["reuse_audio_prefill"] is True
    assert len(audio["windows"]) == 3 and audio["runs"] == 2 and audio["alternate"] is True
    assert all(w["audio"]["path"] == "noise.f32" for w in audio["windows"])
    tokens = overheads_job({"path": "t.gguf"}, {"path": "d.gguf"}, ([1, 2, 3], [4, 5])).to_dict()
    assert "reuse_audio_prefill" not in tokens
    assert all(w["prompt"] == [1, 2, 3] and w["drafter_prompt"] == [4, 5] for w in tokens["windows"])


def caps(*values: int) -> list:
    return [make_text_window(f"w{i}", "text", "Repeat this.", cap, "demo", "dev") for i, cap in enumerate(values)]


def test_the_overheads_decodes_take_the_workloads_windows_of_the_copies_tokens():
    # 3 copies of the 48-token passage: 144 tokens of cap, the fewest windows spread over the file that hold them
    ids = [w.window_id for w in workload_selection(caps(*[24] * 24), 3)]
    assert ids == ["w0", "w5", "w9", "w14", "w18", "w23"]
    assert [w.window_id for w in workload_selection(caps(100, 10, 10, 100), 3)] == ["w0", "w3"]
    # fewer tokens than the copies hold: every window, again and again
    assert [w.window_id for w in workload_selection(caps(6, 10), 1)] == ["w0", "w1"] * 3  # 48 tokens
    assert workload_selection([], 3) == []
    job = overheads_job({"path": "t.gguf"}, {"path": "d.gguf"}, budget=3,
                        workload=[{"id": "a", "prompt": [1], "cap": 6}, {"id": "b", "prompt": [2], "cap": 9}]).to_dict()
    assert [w["id"] for w in job["windows"]] == ["a", "b"] and job["runs"] == 2 and job["alternate"] is True
    # SD beside AS2D, as wide as the AS2D decodes' widest forward: each model's forwards as a serial decode meets them
    assert job["methods"] == [{"name": "target"}, {"name": "as2d", "budget": 3, "batch": 8}, {"name": "sd", "width": 4}]
    serial = overheads_job({"path": "t.gguf"}, {"path": "d.gguf"}, ([1], [2]), budget=7, as2d=False).to_dict()
    assert serial["methods"] == [{"name": "target"}, {"name": "sd", "width": 5}]


def test_speech_overheads_take_the_workloads_windows_of_the_samples_seconds():
    def speech(*seconds):  # an audio window of each length (None: to the end of its file)
        return [dataclasses.replace(w, input=InputView("audio", audio_path=f"{w.window_id}.wav", duration_s=s))
                for w, s in zip(caps(*[96] * len(seconds)), seconds, strict=True)]

    # 3 copies of the 11 s sample: 33 s of speech, whatever the caps (a speech window ends long before its cap)
    assert [w.window_id for w in workload_selection(speech(*[4.0] * 12), 3, hears_audio=True)] == [
        "w0", "w1", "w3", "w4", "w6", "w7", "w8", "w10", "w11"]
    assert [w.window_id for w in workload_selection(speech(20.0, 1.0, 15.0), 3, hears_audio=True)] == ["w0", "w2"]
    assert [w.window_id for w in workload_selection(speech(None, 2.0), 1, hears_audio=True)] == ["w0"]  # one sample
    assert [w.window_id for w in workload_selection(speech(5.0), 1, hears_audio=True)] == ["w0"] * 3  # 15 s
    job = overheads_job({"path": "base.bin"}, {"path": "tiny.bin"}, budget=3,
                        workload=[{"id": "a", "audio": {"path": "a.f32", "format": "f32"}, "cap": 96}]).to_dict()
    assert job["reuse_audio_prefill"] is True  # each window encoded once per model for its four decodes


def test_each_placement_is_traced_with_its_lanes_threads_in_its_own_folder(tmp_path):
    split, shared = resolve("split", [0, 1]), resolve("shared", [0, 1])
    assert trace_threads(split) == 1 and trace_threads(shared) == 2
    assert traces_dir(tmp_path, "split") != traces_dir(tmp_path, "shared")
    assert traces_dir(tmp_path, "split").parent == tmp_path / "traces"


def test_the_speech_demo_runs_natively_only_what_its_tiny_en_job_decodes():
    native = set(SPEECH_SUITE.native)
    assert native == {"target", "sd[W=5,drafter=tiny.en]", "as2d[B=3,drafter=tiny.en]"}
    replayed = {c.label for c in parse_method_specs(list(SPEECH_SUITE.methods))}
    assert {"sd[W=5,drafter=base-q8_0]", "as2d[B=3,drafter=base-q8_0]"} <= replayed - native


def test_whisper_overheads_hear_the_speech_sample_as_float32_and_a_wrong_format_is_one_line(tmp_path, monkeypatch):
    def write_wav(path, rate, samples):
        with wave.open(str(path), "wb") as handle:
            handle.setnchannels(1)
            handle.setsampwidth(2)
            handle.setframerate(rate)
            handle.writeframes(np.asarray(samples, dtype="<i2").tobytes())
        return path

    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path / "cache"))
    got = np.fromfile(overheads_audio(write_wav(tmp_path / "a.wav", 16000, [0, 16384, -32768, 32767])), dtype="<f4")
    assert got.tolist() == [0.0, 0.5, -1.0, 32767 / 32768]
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path / "other-cache"))
    wrong = write_wav(tmp_path / "b.wav", 8000, [0, 1])
    with pytest.raises(SpecbenchError) as error:
        overheads_audio(wrong)
    assert str(error.value) == f"{wrong}: expected 16 kHz mono 16-bit PCM, got 8000 Hz, 1 channels, 16-bit"
    assert not list((tmp_path / "other-cache").rglob("*.f32"))
    # the bundled sample: whisper.cpp's, 11 s of speech
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path / "bundled"))
    assert file_sha256(bundled_speech_sample()) == "59dfb9a4acb36fe2a2affc14bacbee2920ff435cb13cc314a08c13f66ba7860e"
    assert len(np.fromfile(overheads_audio(), dtype="<f4")) == 176000
