"""The runner's whisper.cpp engine on jfk.wav (recorded speech) with the converted Whisper models: target-only,
SD, SpecASR and AS2D decode losslessly with each drafter (the Q8_0 copy of base: same vocabulary; tiny.en:
through the text mapping; base itself: every draft accepted, so greedy decoding by verification alone), `trace`
records the same y, and a Whisper file where a GGUF is expected (or the reverse) is refused before anything
runs. No timing is asserted.

Needs `make demo-model` and `make runners`; skips, saying which, without them.
"""

from __future__ import annotations

import os
import wave
from pathlib import Path

import pytest

from specbench.errors import SpecbenchError
from specbench.world import demo_models
from specbench.world.build import whisper_source

JFK_TEXT = "And so my fellow Americans, ask not what your country can do for you, ask what you can do for your country."


def cached(name: str) -> str:
    try:
        return str(demo_models.demo_model(name, download=False))
    except SpecbenchError as err:
        pytest.skip(f"{name} not cached ({err}): run `make demo-model`")


@pytest.fixture(scope="module")
def jfk(tmp_path_factory) -> Path:
    """jfk.wav's samples as raw s16 (the runner's audio window format)."""
    with wave.open(str(whisper_source() / "samples" / "jfk.wav")) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (16000, 1, 2)
        out = tmp_path_factory.mktemp("whisper") / "jfk.s16"
        out.write_bytes(w.readframes(w.getnframes()))
    return out


def window(audio: Path, cap: int = 96) -> dict:
    return {"id": "jfk", "audio": {"path": str(audio), "format": "s16"}, "prompt_text": "", "cap": cap}


def decode(run, target: str, drafter: str, methods: list[dict], audio: Path):
    # each model encodes the window once for all methods (decodes never change the encoder's output)
    return run({"mode": "decode", "threads": 1, "reuse_audio_prefill": True, "target": {"path": target},
                "drafter": {"path": drafter}, "methods": methods, "windows": [window(audio)]}, timeout=900)


@pytest.mark.parametrize("drafter", ["whisper-base-q8_0", "whisper-tiny.en", "whisper-base"])
def test_every_method_decodes_jfk_losslessly(run_job, jfk, drafter):
    same_vocab = drafter != "whisper-tiny.en"
    methods = [{"name": "target"}, {"name": "sd", "width": 6}, {"name": "as2d"}]
    if same_vocab:  # SpecASR recycles drafter top-1s as target tokens: same vocabulary only
        methods.append({"name": "specasr", "k_max": 8, "tau": 0.5})
    out = decode(run_job, cached("whisper-base"), cached(drafter), methods, jfk)
    assert out.returncode == 0, out.error or out.stderr[-2000:]
    loaded = {e["model"]: e for e in out.events if e.get("event") == "loaded"}
    assert {e["engine"] for e in loaded.values()} == {"whisper.cpp"}
    assert 72_500_000 < loaded["target"]["n_params"] < 72_700_000  # Whisper base: 72.6 M parameters
    assert 0 < loaded["target"]["size_bytes"] < Path(loaded["target"]["path"]).stat().st_size
    by_method = {r["method"]["name"]: r for r in out.results if r["kind"] == "decode"}
    assert set(by_method) == {m["name"] for m in methods}
    target = by_method["target"]
    assert target["text"].strip() == JFK_TEXT and target["stop_reason"] == "eos"
    assert target["audio_prefill_us"] > 0  # the encoder ran as the window's prefill
    for name, result in by_method.items():
        assert result["tokens"] == target["tokens"], name
    if drafter == "whisper-base":  # drafting for itself: verification's rows decided every token
        verifications = [op for op in by_method["sd"]["ops"] if op["model"] == "target"]
        assert all(op["accepted"] == op["width"] - 1 for op in verifications[:-1])


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="two lanes apart need two CPUs")
def test_lanes_apart_encode_a_window_at_once_each_on_its_own_lane_and_report_it_once(run_job, jfk):
    cpus = sorted(os.sched_getaffinity(0))[:2]
    job = {"mode": "decode", "threads": 1, "reuse_audio_prefill": True, "warmup": False,
           "target": {"path": cached("whisper-base"), "cpus": cpus[:1]},
           "drafter": {"path": cached("whisper-tiny.en"), "cpus": cpus[1:]},
           "methods": [{"name": "target"}, {"name": "sd", "width": 4}, {"name": "target"}], "windows": [window(jfk)]}
    out = run_job(job, timeout=900)
    assert out.returncode == 0, out.error or out.stderr[-2000:]
    first, sd, again = [r for r in out.results if r["kind"] == "decode"]
    assert first["tokens"] == sd["tokens"] == again["tokens"] and first["text"].strip() == JFK_TEXT
    # each encode is reported once, by the window's first decode that uses its model: the target's by the
    # target-only decode, tiny.en's by SD's (which keeps the target's output); the third keeps both
    assert first["audio_prefill_us"] > 0 and "audio_prefill_reused" not in first
    assert sd["audio_prefill_us"] > 0 and sd["audio_prefill_reused"] is True
    assert again["audio_prefill_us"] == 0 and again["audio_prefill_reused"] is True
    # tiny.en encoded on a thread of its own, pinned to its lane, beside the target's: SD's drafter forwards
    # run on the job's thread, so the drafter lane was pinned from two threads, each read back on its CPU
    [pinning] = [e for e in out.events if e.get("event") == "pinning"]
    lanes = [lane for lane in pinning["lanes"] if lane["lane"] == "drafter"]
    assert len({lane["tid"] for lane in lanes}) == 2 and all(lane["read_back"] == cpus[1:] for lane in lanes)


def test_trace_records_target_only_y(run_job, jfk):
    job = {"mode": "trace", "threads": 1, "target": {"path": cached("whisper-base")},
           "drafter": {"path": cached("whisper-tiny.en")}, "k_max": 4, "producer": True, "windows": [window(jfk)]}
    out = run_job(job, timeout=900)
    assert out.returncode == 0, out.error or out.stderr[-2000:]
    [trace] = [r for r in out.results if r["kind"] == "trace"]
    assert trace["text"].strip() == JFK_TEXT
    assert len(trace["drafts"]["tokens"]) == len(trace["y"])
    assert trace["producer"]["tokens"]  # tiny.en's own transcript, mapped to base's vocabulary


def refused(out, *words: str) -> None:
    """One error line naming `words`, exit non-zero, no result written."""
    assert out.returncode != 0 and out.results == []
    assert out.error is not None and "\n" not in out.error["error"]
    for word in words:
        assert word in out.error["error"]


def test_whisper_drafter_for_a_gguf_target_is_refused(run_job, jfk):
    gguf, whisper = cached("smollm2-135m"), cached("whisper-tiny.en")
    out = run_job({"mode": "decode", "target": {"path": gguf}, "drafter": {"path": whisper},
                         "methods": [{"name": "sd", "width": 4}], "windows": [{"id": "w", "prompt": [1, 2], "cap": 4}]})
    refused(out, whisper, "whisper.cpp", gguf, "GGUF")
    out = decode(run_job, whisper, gguf, [{"name": "sd", "width": 4}], jfk)  # and the reverse
    refused(out, whisper, gguf)


def test_whisper_file_where_a_gguf_is_expected_is_refused(run_job):
    whisper = cached("whisper-base")
    out = run_job({"mode": "tokenize", "model": {"path": whisper}, "texts": ["hello"]})
    refused(out, whisper, "whisper.cpp", "GGUF")
    out = run_job({"mode": "decode", "target": {"path": whisper}, "methods": [{"name": "target"}],
                         "windows": [{"id": "w", "prompt": [1, 2], "cap": 4}]})
    refused(out, "window 'w'", "no audio", whisper)


def test_a_window_longer_than_30_s_is_refused(run_job, jfk, tmp_path):
    long = tmp_path / "jfk-x3.s16"
    long.write_bytes(jfk.read_bytes() * 3)  # 33 s
    out = run_job({"mode": "decode", "target": {"path": cached("whisper-base")}, "methods": [{"name": "target"}],
                         "windows": [window(long)]})
    refused(out, "window 'jfk'", str(long), "33.00 s", "30 s")


def test_sweep_times_the_encoder_per_window_and_the_decoder_per_width_and_depth(run_job):
    job = {"mode": "sweep", "threads": 1, "target": {"path": cached("whisper-tiny.en")}, "widths": [1, 4],
           "depths": [0, 32], "warmup": 0, "repetitions": 5}
    out = run_job(job, timeout=900)
    assert out.returncode == 0, out.error or out.stderr[-2000:]
    [encoder] = [r for r in out.results if r["kind"] == "encoder"]
    assert encoder["model"] == "target" and encoder["audio_s"] == 30 and len(encoder["samples_us"]) == 5
    cells = {(r["width"], r["depth"]) for r in out.results if r["kind"] == "forward"}
    assert cells == {(1, 0), (4, 0), (1, 32), (4, 32)}
    out = run_job({**job, "depths": [445]})  # past Whisper's 448 text positions
    assert out.returncode != 0 and "448" in out.error["error"]


def test_cosched_and_probe_run_whisper_decoders(run_job):
    tiny = cached("whisper-tiny.en")
    lane = {"path": tiny, "threads": 1}
    out = run_job({"mode": "cosched", "target": lane, "drafter": lane,
                         "widths": [1, 4], "depths": [0], "warmup": 0, "repetitions": 5, "drafter_steps": 5})
    assert out.returncode == 0, out.error or out.stderr[-2000:]
    assert [(r["width"], r["depth"]) for r in out.results] == [(1, 0), (4, 0)]
    out = run_job({"mode": "probe", "target": {"path": tiny}, "drafter": {"path": tiny},
                         "probe": {"repetitions": 5}})
    assert out.returncode == 0, out.error or out.stderr[-2000:]
    [probe] = out.results
    assert len(probe["target_samples_us"]) == 5 and len(probe["drafter_samples_us"]) == 5
