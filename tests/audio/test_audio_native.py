"""The audio path for real: Qwen3-ASR-shaped tiny models (qwen3vl + qwen3a mmproj, random
weights) hear synthesized speech through libmtmd in the native runner. Every method must
commit target-only's tokens; traces recorded from audio must replay the runner's decisions;
bad inputs are one clear error. No timing is asserted."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from specbench.core.methods import base, sd, specasr
from specbench.core.methods.configs import As2dConfig, SdConfig, SpecAsrConfig, TargetConfig
from specbench.errors import SpecbenchError
from specbench.schemas.fileio import Where
from specbench.schemas.traces import Vocab, load_trace_file, window_trace_from_dict
from specbench.world.datasets import build_windows, read_librispeech
from specbench.world.model_files import ModelFile

WIDE = Vocab(1 << 20, 1 << 20)
"""Vocabulary sizes no token id of these tests reaches."""

CAP = 16
METHODS = [{"name": "target"}, {"name": "sd", "width": 5, "p_min": 0.0}, {"name": "specasr", "k_max": 4, "tau": 0.3},
           {"name": "as2d", "budget": 3, "batch": 4, "conf_stop": 0.0, "align": "anchor", "horizon": 8}]


@pytest.fixture(scope="module", autouse=True)
def _cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:  # the windows' raw PCM goes here
        patch.setenv("SPECBENCH_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


@pytest.fixture(scope="module")
def windows(librispeech_tree):
    built = build_windows(read_librispeech(librispeech_tree), "tiny-libri", "Transcribe the audio.", "chatml", CAP,
                          None, 0, 0.0)
    # An empty transcript: the window is decoded like any other, its reference is just "".
    return built[:-1] + [replace(built[-1], reference="")]


@pytest.fixture(scope="module")
def device():
    from specbench.world.devices.local import LocalDevice

    return LocalDevice()


def models(tiny_asr):
    return (ModelFile("asr-target", tiny_asr.target, tiny_asr.target_mmproj),
            ModelFile("small", tiny_asr.drafter, tiny_asr.drafter_mmproj))


def runner_job(device, tiny_asr, windows, mode: str, **keys) -> dict:
    from specbench.world.model_files import model_job
    from specbench.world.tracing import prompts_for

    target, drafter = models(tiny_asr)
    prompts = prompts_for(device, target, drafter, windows)
    return {"mode": mode, "threads": 1, "target": model_job(device, target), "drafter": model_job(device, drafter),
            "windows": [prompts.runner_window(w) for w in windows]} | keys


@pytest.fixture(scope="module")
def decoded(device, tiny_asr, windows, run_job):
    """All four methods on every window, one decode job: {window_id: {method name: result}}."""
    out = run_job(runner_job(device, tiny_asr, windows, "decode", methods=METHODS))
    assert out.returncode == 0, (out.error, out.stderr[-2000:])
    return by_method(out.results)


def by_method(results):
    out: dict[str, dict] = {}
    for r in results:
        out.setdefault(r["window_id"], {})[r["method"]["name"]] = r
    return out


def test_audio_prompts_hold_the_media_marker_and_the_samples(device, tiny_asr, windows):
    job = runner_job(device, tiny_asr, windows, "decode", methods=METHODS[:1])
    w = job["windows"][0]
    assert "prompt" not in w and w["audio"]["format"] == "f32"
    assert w["prompt_text"].count("<__media__>") == 1 and "Transcribe the audio." in w["prompt_text"]
    samples = Path(w["audio"]["path"]).stat().st_size // 4
    assert abs(samples - round(windows[0].input.duration_s * 16000)) <= 1


def test_all_four_methods_are_lossless_on_audio(windows, decoded):
    from tests.native.test_native_methods import check_as2d_against_python

    got = decoded
    assert set(got) == {w.window_id for w in windows}
    for window_id, runs in got.items():
        base_run = runs["target"]
        assert base_run["n_audio"] > 0 and base_run["n_prompt"] > base_run["n_audio"]
        for name, r in runs.items():
            assert r["kind"] == "decode", r
            assert r["tokens"] == base_run["tokens"], (window_id, name)
            assert r["text"] == base_run["text"]
            # the request clock beside the decode clock (values are not asserted: timing)
            for key in ("audio_prefill_us", "instruction_prefill_us", "first_token_us", "request_latency_us"):
                assert isinstance(r[key], int) and r[key] >= 0, key
            if name != "target":
                assert r["n_audio_drafter"] > 0 and r["first_draft_us"] >= r["first_token_us"]
            # KV depths count from the audio prompt's length (rollback to prompt + n)
            first_target = next((op for op in r["ops"] if op["model"] == "target"), None)
            if first_target is not None:
                assert first_target["depth"] == r["n_prompt"]
        check_as2d_against_python(runs["as2d"], CAP)


def test_audio_traces_replay_the_native_decisions(device, tiny_asr, windows, decoded, tmp_path):
    from specbench.world.tracing import trace_windows

    target, drafter = models(tiny_asr)
    configs = [SpecAsrConfig(k_max=4, tau=0.3)]
    path, count = trace_windows(device, windows, target, drafter, tmp_path / "traces", k_max=8, specasr=configs)
    assert count == len(windows)
    trace = load_trace_file(path)
    for window_id, runs in decoded.items():
        wt = trace.windows[window_id]
        assert wt.y.tolist() == runs["target"]["tokens"] and wt.text == runs["target"]["text"]
        assert wt.n_prompt == runs["target"]["n_prompt"] and wt.n_prompt_drafter == runs["sd"]["n_prompt_drafter"]
        # SD: the trace's prefix-conditioned drafts give the runner's verifications.
        ref = sd.decode_sd(base.TargetOracle(wt.y), base.TraceDrafts(wt), CAP, wt.n_prompt, wt.n_prompt_drafter,
                           SdConfig(width=5))
        assert list(ref.tokens) == runs["sd"]["tokens"]
        want = [(op.width, op.accepted) for op in ref.ops if op.model is base.Model.TARGET]
        assert [(op["width"], op["accepted"]) for op in runs["sd"]["ops"] if op["model"] == "target"] == want
        # SpecASR: the recorded recycling answers give the runner's whole op list.
        ref = specasr.decode_specasr(base.TargetOracle(wt.y), base.TraceDrafts(wt), CAP, wt.n_prompt,
                                     wt.n_prompt_drafter, configs[0])
        assert list(ref.tokens) == runs["specasr"]["tokens"]
        assert [(op.model.value, op.width, op.depth, op.accepted) for op in ref.ops] == \
            [(op["model"], op["width"], op["depth"], op.get("accepted", 0)) for op in runs["specasr"]["ops"]]
        # AS2D: the trace's producer stream is the runner's producer, prefix for prefix.
        z, native_z = wt.producer.tokens.tolist(), runs["as2d"]["producer"]["tokens"]
        assert native_z == z[:len(native_z)]


def test_native_run_of_audio_windows_records_rows_text_and_clocks(device, tiny_asr, windows, tmp_path):
    from specbench.schemas.placement import resolve
    from specbench.schemas.results import ResultsDir
    from specbench.world.decode_run import CLOCKS, NativePlan, run_native

    target, drafter = models(tiny_asr)
    configs = [TargetConfig(), SdConfig(width=5, drafter="small"), SpecAsrConfig(k_max=4, tau=0.3, drafter="small"),
               As2dConfig(budget=3, batch=4, drafter="small")]
    plan = NativePlan(device, windows, target, (drafter,), configs, resolve("shared", device.cpus(), device.processors()),
                      None, "windows.jsonl")
    outcome = run_native(plan, tmp_path / "run", resume=False)
    results, added, diverged = outcome.results, outcome.added, outcome.diverged
    assert (added, diverged) == (len(configs) * len(windows), 0)
    rows = [json.loads(line) for line in (tmp_path / "run" / "rows.jsonl").read_text().splitlines()]
    assert all(r["lossless"] and r["source"] == "native" for r in rows)
    for window in windows:
        texts = {r["text"] for r in rows if r["window_id"] == window.window_id}
        assert len(texts) == 1  # every method committed the same answer
    clocks = [json.loads(line) for line in (tmp_path / "run" / CLOCKS).read_text().splitlines()]
    assert len(clocks) == len(rows)
    assert all(c["n_audio"] > 0 and "audio_prefill_us" in c and "request_latency_us" in c for c in clocks)
    assert ResultsDir(tmp_path / "run").directory.exists()


def test_mmproj_of_another_width_is_one_clear_error(device, tiny_asr, windows, run_job):
    job = runner_job(device, tiny_asr, windows[:1], "decode", methods=METHODS[:2])
    job["drafter"]["mmproj"] = str(tiny_asr.target_mmproj)  # projects to 64, the drafter is 32 wide
    out = run_job(job)
    assert out.returncode == 1
    message = out.error["error"]
    assert "\n" not in message
    assert str(tiny_asr.target_mmproj) in message and str(tiny_asr.drafter) in message
    assert "n_embd = 32" in message and "n_embd = 64" in message

    from specbench.world.tracing import trace_windows

    target, drafter = models(tiny_asr)
    with pytest.raises(SpecbenchError, match="does not fit") as err:
        trace_windows(device, windows[:1], target, replace(drafter, mmproj=tiny_asr.target_mmproj),
                      Path(tiny_asr.target).parent / "bad-traces", k_max=4)
    assert str(tiny_asr.target_mmproj) in str(err.value)


def test_missing_audio_is_one_clear_error(device, tiny_asr, windows, run_job, tmp_path, monkeypatch):
    from specbench.world.tracing import prompts_for

    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path / "fresh"))  # the samples must be read from the file
    target, drafter = models(tiny_asr)
    gone = replace(windows[0], input=replace(windows[0].input, audio_path=str(tmp_path / "gone.flac")))
    with pytest.raises(SpecbenchError, match="gone.flac") as err:
        prompts_for(device, target, drafter, [gone])
    assert "\n" not in str(err.value) and gone.window_id in str(err.value)

    job = runner_job(device, tiny_asr, windows[:1], "decode", methods=METHODS[:1])
    missing = tmp_path / "gone.f32"
    job["windows"][0]["audio"]["path"] = str(missing)
    out = run_job(job)
    assert out.returncode == 1 and str(missing) in out.error["error"] and "cannot read audio" in out.error["error"]
    truncated = tmp_path / "odd.f32"
    truncated.write_bytes(b"\0" * 6)
    job["windows"][0]["audio"]["path"] = str(truncated)
    out = run_job(job)
    assert out.returncode == 1 and str(truncated) in out.error["error"]


def test_audio_windows_without_an_mmproj_are_refused(device, tiny_asr, windows, run_job):
    from specbench.world.tracing import prompts_for

    target, drafter = models(tiny_asr)
    with pytest.raises(SpecbenchError, match="no mmproj") as err:
        prompts_for(device, replace(target, mmproj=None), drafter, windows[:1])
    assert "--target-mmproj" in str(err.value)
    job = runner_job(device, tiny_asr, windows[:1], "decode", methods=METHODS[:1])
    del job["target"]["mmproj"]
    out = run_job(job)
    assert out.returncode == 1 and "no mmproj" in out.error["error"]


def test_empty_transcript_window_is_traced_and_loaded(device, tiny_asr, windows, tmp_path):
    from specbench.schemas.windows import load_windows, save_windows
    from specbench.world.tracing import trace_windows

    empty = windows[-1]
    assert empty.reference == ""
    save_windows(tmp_path / "w.jsonl", [empty])
    assert load_windows(tmp_path / "w.jsonl")[0].reference == ""
    target, drafter = models(tiny_asr)
    path, _ = trace_windows(device, [empty], target, drafter, tmp_path / "traces", k_max=4)
    wt = load_trace_file(path).windows[empty.window_id]
    assert len(wt.y) >= 1


def test_trace_text_field_is_optional():
    doc = {"window_id": "w", "window_sha256": "0" * 64, "y": [1, 2], "stop_reason": "cap", "n_prompt": 3}
    assert window_trace_from_dict(doc, Where("test"), WIDE).text == ""
    assert window_trace_from_dict(doc | {"text": "hi"}, Where("test"), WIDE).text == "hi"


def test_s16_samples_decode_like_f32(device, tiny_asr, windows, decoded, run_job, tmp_path):
    """The runner's other sample format: 16-bit PCM of the same (16-bit flac) samples, same output."""
    import numpy as np

    job = runner_job(device, tiny_asr, windows[:1], "decode", methods=METHODS[:1])
    samples = np.fromfile(job["windows"][0]["audio"]["path"], dtype="<f4")
    s16 = tmp_path / "w.s16"
    np.round(samples * 32768.0).astype("<i2").tofile(s16)
    job["windows"][0]["audio"] = {"path": str(s16), "format": "s16"}
    out = run_job(job)
    assert out.returncode == 0, out.error
    assert out.results[0]["tokens"] == decoded[windows[0].window_id]["target"]["tokens"]


def test_changed_audio_is_refused(device, tiny_asr, windows, tmp_path, monkeypatch):
    """The samples must still hash to the window: a re-recorded file is not silently used."""
    import shutil

    from specbench.world.tracing import prompts_for

    from .speech import speak

    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path / "fresh"))
    other = speak("a different sentence entirely", tmp_path / "other.flac")
    moved = tmp_path / "moved.flac"
    shutil.copy(other, moved)
    changed = replace(windows[0], input=replace(windows[0].input, audio_path=str(moved), duration_s=None))
    target, drafter = models(tiny_asr)
    with pytest.raises(SpecbenchError, match="no longer matches"):
        prompts_for(device, target, drafter, [changed])


def test_cli_trace_and_native_run_take_the_mmproj_options(tiny_asr, windows, tmp_path):
    """The documented commands: `specbench trace` and `specbench run --native` with
    --target-mmproj / --drafter-mmproj on an audio windows file; a missing mmproj is one line."""
    from click.testing import CliRunner

    from specbench.cli import main
    from specbench.schemas.windows import save_windows

    def invoke(*args):
        result = CliRunner().invoke(main, [str(a) for a in args])
        return result.exit_code, result.output

    path = tmp_path / "windows.jsonl"
    save_windows(path, windows[:2])
    models = ["--target", tiny_asr.target, "--target-mmproj", tiny_asr.target_mmproj]
    drafter = ["--drafter", f"asr06={tiny_asr.drafter}", "--drafter-mmproj", tiny_asr.drafter_mmproj]
    code, output = invoke("trace", path, *models, *drafter, "--k-max", 4, "--threads", 1, "--out", tmp_path / "traces")
    assert code == 0, output
    assert {w.window_id for w in windows[:2]} == set(load_trace_file(tmp_path / "traces" / "asr06.jsonl").windows)
    code, output = invoke("run", path, "--native", "--device", "local", *models, *drafter, "--traces",
                          tmp_path / "traces", "--methods", "target,sd", "--placement", "split", "--out", tmp_path / "run")
    assert code == 0, output
    assert (tmp_path / "run" / "request_clocks.jsonl").exists()
    code, output = invoke("trace", path, "--target", tiny_asr.target, *drafter, "--out", tmp_path / "t2")
    assert code != 0 and "no mmproj" in output and "--target-mmproj" in output
    code, output = invoke("trace", path, *models, "--drafter", f"asr06={tiny_asr.drafter}", "--drafter-mmproj",
                          tmp_path / "nope.gguf", "--out", tmp_path / "t3")
    assert code != 0 and "nope.gguf" in output
