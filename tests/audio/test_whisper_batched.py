"""Batched verification on whisper.cpp (the patched `whisper_decode_all_logits_with_state`, built by
`scripts/build-runner --whisper` into specbench-whisper-check): every row of a width-W forward equals width-1
decoding of the same prefix within TOLERANCE, greedy decoding gives jfk.wav's reference, and a forward with
rejected drafts is undone by decoding at the rolled-back n_past; the encoder's output does not depend on its
thread count (the decoder's thread count is what can change a stream, docs/SPEECH.md "Threads decide").

Needs `make demo-model` and `make runners`; skips, saying which, without them.
"""

from __future__ import annotations

import functools
import json
import subprocess
from pathlib import Path

import pytest

from specbench.errors import SpecbenchError
from specbench.world import demo_models
from specbench.world.build import host_abi, whisper_source

REPO = Path(__file__).resolve().parents[2]
JFK_TEXT = "And so my fellow Americans, ask not what your country can do for you, ask what you can do for your country."
TOLERANCE = {"f16": 0.25, "q8_0": 0.75}
"""Largest |logit difference| allowed between a row of a width-W forward and width-1 decoding of its prefix, by
the weights' type. ggml's CPU matrix products take other kernels at other widths (activations rounded to F16 for
F16 weights, quantized to 8 bits for Q8_0 ones, in other blocks), so the rows differ by rounding. Measured on
jfk.wav (2026-12-02): base 0.13 (width 4), tiny.en 0.19 / 0.17 (widths 4 / 7), base Q8_0 0.47 (widths 4 and 7),
no argmax changed; through the added call at width 1 they are equal."""


def check(model: str, width: int, threads: int = 1, encoder_threads: int = 1) -> dict:
    tool = REPO / "runners" / host_abi() / "specbench-whisper-check"
    if not tool.exists():
        pytest.skip(f"{tool} missing: run `scripts/build-runner --whisper` (`make runners`)")
    try:
        path = demo_models.demo_model(model, download=False)
    except SpecbenchError as err:
        pytest.skip(f"{model} not cached ({err}): run `make demo-model`")
    return checked(tool, path, width, threads, encoder_threads)


@functools.cache
def checked(tool: Path, model: Path, width: int, threads: int, encoder_threads: int) -> dict:
    """specbench-whisper-check's report on jfk.wav, run once per (model, width, threads): two tests read base at
    width 4."""
    jfk = whisper_source() / "samples" / "jfk.wav"
    done = subprocess.run([str(tool), str(model), str(jfk), str(width), str(threads), str(encoder_threads)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize("model, width", [("whisper-base", 4), ("whisper-base", 7), ("whisper-tiny.en", 7),
                                          ("whisper-base-q8_0", 4)])
def test_every_row_of_a_wide_forward_is_width_1_decoding(model, width):
    got = check(model, width)
    tolerance = TOLERANCE["q8_0" if model.endswith("q8_0") else "f16"]
    assert got["rows"] == len(got["tokens"]) + 1  # every prediction after the prompt, the last one <|endoftext|>
    assert got["max_abs_diff"] < tolerance, got
    # a near tie could flip an argmax within the tolerance: it would be listed with its margin, never hidden
    assert all(m["margin"] < 2 * tolerance for m in got["argmax_mismatches"]), got["argmax_mismatches"]
    assert 0 <= got["rollback_max_abs_diff"] < tolerance, got


def test_width_1_through_the_added_call_is_width_1_decoding_exactly():
    got = check("whisper-base", 1)
    assert got["max_abs_diff"] == 0 and got["argmax_mismatches"] == []


def test_greedy_decoding_gives_jfk_reference():
    got = check("whisper-base", 4)
    assert got["text"].strip() == JFK_TEXT
    assert got["argmax_mismatches"] == []  # verification's tokens are width-1 greedy's on jfk.wav


@pytest.mark.parametrize("model", ["whisper-base", "whisper-tiny.en"])
def test_the_encoders_output_does_not_depend_on_its_threads(model):
    # decoding on one thread after an encoder on one and on two: every width-1 logit equal to the bit
    one, two = check(model, 1, threads=1, encoder_threads=1), check(model, 1, threads=1, encoder_threads=2)
    assert one["tokens"] and one["tokens"] == two["tokens"]
    assert one["logits_fnv1a"] == two["logits_fnv1a"]


def test_encoder_threads_below_1_are_one_line_errors():
    tool = REPO / "runners" / host_abi() / "specbench-whisper-check"
    if not tool.exists():
        pytest.skip(f"{tool} missing: run `scripts/build-runner --whisper` (`make runners`)")
    jfk = whisper_source() / "samples" / "jfk.wav"
    done = subprocess.run([str(tool), "model.bin", str(jfk), "1", "1", "0"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == "error: WIDTH must be 1..64, THREADS and ENCODER_THREADS >= 1 (got 1, 1, 0)\n"
