"""Whisper models through the documented commands, as a user runs them: `specbench trace`, `profile`, `run`
(replay) and `run --native` on audio windows with the tiny random-weight Whisper pair (tests/audio/tiny_whisper.py):
no mmproj and no chat template, every method lossless in replay and natively, native decisions equal to the
trace's, the encoder kept across a window's decodes with --reuse-encoder and said so; a text window for a Whisper
target and a GGUF drafter for a Whisper target are one-line errors. No timing is asserted."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from specbench.cli import main
from specbench.schemas.profiles import load_profile
from specbench.schemas.results import load_results
from specbench.schemas.traces import load_trace_file
from specbench.schemas.windows import make_text_window, save_windows
from specbench.world.datasets import build_windows, read_librispeech

pytestmark = pytest.mark.serial  # the split profile refuses co-scheduling ratios a busy host makes below 1

CAP = 12
METHODS = ["--method", "target", "--method", "sd:W=4", "--method", "specasr:k_max=4,tau=0.5",
           "--method", "as2d:B=3"]


@pytest.fixture(scope="module", autouse=True)
def _cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:  # the windows' raw PCM goes here
        patch.setenv("SPECBENCH_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


def invoke(*args) -> tuple[int, str]:
    result = CliRunner().invoke(main, [str(a) for a in args])
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def study(tiny_whisper, librispeech_tree, run_job, tmp_path_factory):
    """Windows, traces and a split profile of the tiny Whisper pair, made by the CLI."""
    root = tmp_path_factory.mktemp("whisper-cli")
    windows = build_windows(read_librispeech(librispeech_tree), "tiny-libri", "Transcribe the audio.", "model", CAP,
                            None, 0, 0.0)
    save_windows(root / "windows.jsonl", windows)
    models = ["--target", tiny_whisper.target, "--drafter", f"early={tiny_whisper.drafter}"]
    code, output = invoke("trace", root / "windows.jsonl", *models, "--k-max", 4, "--specasr",
                          "specasr:k_max=4,tau=0.5", "--threads", 1, "--out", root / "traces")
    assert code == 0, output
    code, output = invoke("profile", "local", *models, "--max-width", 5, "--depths", "0,16", "--repetitions", 5,
                          "--placement", "split", "--windows", root / "windows.jsonl", "--out", root / "split.yaml")
    assert code == 0, output
    return root, models, windows


def test_trace_records_the_whisper_prompt_and_no_template(study):
    root, _, windows = study
    trace = load_trace_file(root / "traces" / "early.jsonl")
    assert set(trace.windows) == {w.window_id for w in windows}
    assert trace.templates == {"target": "whisper-task", "drafter": "whisper-task"}
    assert trace.target.n_vocab == 50257  # an English-only vocabulary: the text tokens and <|endoftext|>
    assert all(t.n_prompt == 2 for t in trace.windows.values())  # <|startoftranscript|> <|notimestamps|>


def test_the_profiles_overheads_decodes_hear_the_workloads_speech(study):
    notes = load_profile(study[0] / "split.yaml").notes
    assert "windows of the workload (speech, each encoded once per model)" in notes, notes
    assert "jfk.wav" not in notes


def test_replay_and_native_runs_are_lossless_and_decide_as_traced(study):
    root, models, windows = study
    code, output = invoke("run", root / "windows.jsonl", "--traces", root / "traces", "--profile",
                          root / "split.yaml", *METHODS, "--out", root / "replay")
    assert code == 0, output
    _, replayed = load_results(root / "replay")
    assert len(replayed) == 4 * len(windows) and replayed["lossless"].all()
    code, output = invoke("run", root / "windows.jsonl", "--native", "--device", "local", *models, "--traces",
                          root / "traces", "--profile", root / "split.yaml", *METHODS, "--reuse-encoder",
                          "--out", root / "native")
    assert code == 0, output
    _, native = load_results(root / "native")
    assert len(native) == 4 * len(windows)
    assert native["lossless"].all() and native["decisions_match"].all()
    clocks = [json.loads(line) for line in (root / "native" / "request_clocks.jsonl").read_text().splitlines()]
    for window in windows:  # the first decode of a window encodes it, every later one keeps that output
        mine = [c for c in clocks if c["window_id"] == window.window_id]
        assert len(mine) == 4
        assert mine[0]["audio_prefill_us"] > 0 and "audio_prefill_reused" not in mine[0]
        assert all(c.get("audio_prefill_reused") is True for c in mine[1:])


def test_text_windows_and_mixed_engines_are_one_line_errors(study, tiny_whisper, tmp_path):
    root, models, _ = study
    text = tmp_path / "text.jsonl"
    save_windows(text, [make_text_window("t0", "Hello there.", "Repeat.", 8, "hand", "test")])
    code, output = invoke("trace", text, *models, "--out", tmp_path / "t")
    assert code != 0 and "window 't0' is text" in output and "Whisper model" in output
    assert not (tmp_path / "t" / "early.jsonl").exists()
    code, output = invoke("run", root / "windows.jsonl", "--traces", root / "traces", "--profile",
                          root / "split.yaml", "--method", "target", "--reuse-encoder", "--out", tmp_path / "r")
    assert code != 0 and "--reuse-encoder is for --native runs" in output
