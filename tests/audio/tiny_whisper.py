"""Tiny random-weight models of Whisper's architecture in whisper.cpp's ggml format, written by the
project's own writer (specbench.world.whisper_ggml.write_whisper, what the CTranslate2 conversion uses).

whisper.cpp 1.8.5's loader (src/whisper.cpp, whisper_model_load) fixes the special tokens by the
vocabulary size: 51864 is English (`<|endoftext|>` 50256, `<|startoftranscript|>` 50257, ...), 51865 and
more multilingual; so the models keep Whisper's full English vocabulary of 51864 logits, and the
file's 50256 byte tokens below `<|endoftext|>` are made-up ASCII words (` t<id>`; readable junk text).
Everything else follows the hyperparameters: the encoder hears 2 * n_audio_ctx mel frames (whisper.cpp
reads n_audio_ctx from the file, nothing assumes 1500), so n_audio_ctx 50 is one second of audio;
n_text_ctx is Whisper's 448. Random weights: plumbing and losslessness only, never acceptance or speed.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from specbench.world.whisper_ggml import write_whisper

N_VOCAB = 51864  # Whisper's English vocabulary: whisper.cpp places the special tokens by this count
EOT = 50256      # <|endoftext|>: the file holds the tokens below it
N_MELS = 80
N_AUDIO_CTX = 50  # encoder positions: 100 mel frames of 10 ms, one second of audio
N_TEXT_CTX = 448  # Whisper's text context
SAMPLE_RATE_HZ = 16000


@dataclass(frozen=True)
class WhisperShape:
    width: int
    n_head: int
    n_layer: int


TARGET = WhisperShape(width=64, n_head=4, n_layer=2)
DRAFTER = WhisperShape(width=64, n_head=4, n_layer=1)


def hparams(shape: WhisperShape) -> dict[str, int]:
    return {"n_vocab": N_VOCAB, "n_audio_ctx": N_AUDIO_CTX, "n_audio_state": shape.width, "n_audio_head": shape.n_head,
            "n_audio_layer": shape.n_layer, "n_text_ctx": N_TEXT_CTX, "n_text_state": shape.width,
            "n_text_head": shape.n_head, "n_text_layer": shape.n_layer, "n_mels": N_MELS}


class _Weights:
    """Seeded random tensors, each drawn from its own name's stream: a model with fewer layers and the same
    seed holds the very tensors of the larger one's first layers (an early-exit drafter)."""

    def __init__(self, seed: int):
        self.seed = seed

    def normal(self, name: str, shape: tuple[int, ...], std: float) -> tuple[str, np.ndarray]:
        rng = np.random.default_rng([self.seed, zlib.crc32(name.encode())])
        return name, (rng.standard_normal(shape) * std).astype(np.float32)

    def linear(self, name: str, rows: int, cols: int) -> Iterator[tuple[str, np.ndarray]]:
        yield self.normal(f"{name}.weight", (rows, cols), 1 / np.sqrt(cols))
        yield f"{name}.bias", np.zeros(rows, np.float32)

    def attention(self, name: str, d: int) -> Iterator[tuple[str, np.ndarray]]:
        yield from _norm(f"{name}_ln", d)
        yield from self.linear(f"{name}.query", d, d)
        yield self.normal(f"{name}.key.weight", (d, d), 1 / np.sqrt(d))  # no bias, as in Whisper
        yield from self.linear(f"{name}.value", d, d)
        yield from self.linear(f"{name}.out", d, d)

    def mlp(self, name: str, d: int) -> Iterator[tuple[str, np.ndarray]]:
        yield from _norm(f"{name}.mlp_ln", d)
        yield from self.linear(f"{name}.mlp.0", 4 * d, d)
        yield from self.linear(f"{name}.mlp.2", d, 4 * d)


def _norm(name: str, d: int) -> Iterator[tuple[str, np.ndarray]]:
    yield f"{name}.weight", np.ones(d, np.float32)
    yield f"{name}.bias", np.zeros(d, np.float32)


def tensors(shape: WhisperShape, seed: int) -> Iterator[tuple[str, np.ndarray]]:
    """(whisper.cpp name, array in PyTorch's layout) of every tensor whisper.cpp's loader creates."""
    w, d = _Weights(seed), shape.width
    yield w.normal("encoder.positional_embedding", (N_AUDIO_CTX, d), 1.0)
    yield w.normal("encoder.conv1.weight", (d, N_MELS, 3), 1 / np.sqrt(3 * N_MELS))
    yield "encoder.conv1.bias", np.zeros((d, 1), np.float32)
    yield w.normal("encoder.conv2.weight", (d, d, 3), 1 / np.sqrt(3 * d))
    yield "encoder.conv2.bias", np.zeros((d, 1), np.float32)
    for i in range(shape.n_layer):
        yield from w.attention(f"encoder.blocks.{i}.attn", d)
        yield from w.mlp(f"encoder.blocks.{i}", d)
    yield from _norm("encoder.ln_post", d)
    yield w.normal("decoder.positional_embedding", (N_TEXT_CTX, d), 1.0)
    # unit-variance rows: the tied output projection's logits spread by sqrt(width), so greedy picks are
    # far apart (no batched/single-token near-ties)
    yield w.normal("decoder.token_embedding.weight", (N_VOCAB, d), 1.0)
    for i in range(shape.n_layer):
        yield from w.attention(f"decoder.blocks.{i}.attn", d)
        yield from w.attention(f"decoder.blocks.{i}.cross_attn", d)
        yield from w.mlp(f"decoder.blocks.{i}", d)
    # random gains: with the embedding tied to the output, unit gains would make each token its own
    # favourite next token (one token repeated)
    yield w.normal("decoder.ln.weight", (d,), 1.0)
    yield "decoder.ln.bias", np.zeros(d, np.float32)


def vocabulary() -> list[bytes]:
    """The token bytes of ids 0 .. EOT-1: ` t<id>` (distinct, ASCII)."""
    return [f" t{i}".encode() for i in range(EOT)]


def write_tiny_whisper_model(path: Path, shape: WhisperShape, seed: int) -> Path:
    write_whisper(hparams(shape), tensors(shape, seed), vocabulary(), path)
    return path


def write_signal(path: Path, seed: int, seconds: float = 1.0) -> Path:
    """`seconds` of a seeded signal (a 440 Hz tone under noise) as raw s16 16 kHz mono (a window's audio)."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * SAMPLE_RATE_HZ)) / SAMPLE_RATE_HZ
    x = 0.3 * np.sin(2 * np.pi * 440 * t) + 0.1 * rng.standard_normal(t.size)
    path.write_bytes((np.clip(x, -1, 1) * 32767).astype("<i2").tobytes())
    return path


@dataclass(frozen=True)
class TinyWhisper:
    target: Path
    """Width 64, two layers in the encoder and in the decoder."""
    drafter: Path
    """The target's first layer on each side (same seed, one layer)."""
    audio: Path
    """One second of a seeded signal, raw s16 16 kHz mono."""


def write_tiny_whisper(directory: Path) -> TinyWhisper:
    """Target (width 64, two layers each side), drafter (its early exit: the same seed with one layer each
    side, so it agrees with the target on some tokens and not on others), and one second of audio."""
    directory.mkdir(parents=True, exist_ok=True)
    return TinyWhisper(write_tiny_whisper_model(directory / "whisper-target.bin", TARGET, seed=21),
                       write_tiny_whisper_model(directory / "whisper-drafter.bin", DRAFTER, seed=21),
                       write_signal(directory / "signal.s16", seed=23))
