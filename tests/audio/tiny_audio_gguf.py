"""Tiny random-weight models of Qwen3-ASR's real architectures, written with `gguf`:
a `qwen3vl` text model (multi-axis RoPE) and a `qwen3a` audio projector (mmproj) for it.

Shapes follow llama.cpp's loaders (src/models/qwen3vl.cpp; tools/mtmd/clip.cpp and
models/qwen3a.cpp): 128 mel bins in 100-frame chunks, three stride-2 3x3 conv2d layers
(100 x 128 -> 13 x 16 per chunk), conv_out to the encoder width, per-chunk position
embeddings, a ViT block stack, then the mm.a.mlp.{1,2} projector to the text width
(projection_dim). numpy shapes are ggml's dims reversed. Random weights: plumbing and
losslessness only, never acceptance or speed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tests.native.tiny_gguf import add_tiny_tokenizer, vocabulary

N_MEL = 128
CONV_CHANNELS = 4
FREQ_AFTER_CONV = 16  # 128 mel bins after three stride-2 convolutions
N_POS_EMBD = 32       # >= 13 audio tokens per 100-frame chunk


@dataclass(frozen=True)
class TextShape:
    width: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_ff: int
    n_layer: int


TARGET = TextShape(width=64, n_head=4, n_head_kv=2, head_dim=16, n_ff=128, n_layer=2)
DRAFTER = TextShape(width=32, n_head=2, n_head_kv=1, head_dim=16, n_ff=64, n_layer=1)


def _mat(rng, rows: int, cols: int, gain: float = 1.0) -> np.ndarray:
    return (rng.standard_normal((rows, cols)) * gain / np.sqrt(cols)).astype(np.float32)


def text_weights(shape: TextShape, seed: int, n_vocab: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    d, hd = shape.width, shape.head_dim
    w = {"token_embd.weight": _mat(rng, n_vocab, d, np.sqrt(d)),
         "output_norm.weight": np.ones(d, np.float32),
         # a large output gain keeps logits apart (fewer batched/single-token near-ties)
         "output.weight": _mat(rng, n_vocab, d, 8.0)}
    for i in range(shape.n_layer):
        b = f"blk.{i}."
        w |= {b + "attn_norm.weight": np.ones(d, np.float32),
              b + "attn_q.weight": _mat(rng, shape.n_head * hd, d),
              b + "attn_k.weight": _mat(rng, shape.n_head_kv * hd, d),
              b + "attn_v.weight": _mat(rng, shape.n_head_kv * hd, d),
              b + "attn_output.weight": _mat(rng, d, shape.n_head * hd),
              b + "attn_q_norm.weight": np.ones(hd, np.float32),
              b + "attn_k_norm.weight": np.ones(hd, np.float32),
              b + "ffn_norm.weight": np.ones(d, np.float32),
              b + "ffn_gate.weight": _mat(rng, shape.n_ff, d),
              b + "ffn_up.weight": _mat(rng, shape.n_ff, d),
              b + "ffn_down.weight": _mat(rng, d, shape.n_ff)}
    return w


def write_qwen3vl(path: Path, shape: TextShape, seed: int, context_length: int = 4096) -> Path:
    """An ASR-shaped `qwen3vl` text model (IMROPE, sections [hd/4, hd/8, hd/8, 0]) with the
    tiny byte-level vocabulary of tests/native/tiny_gguf.py and a ChatML template."""
    import gguf

    n_vocab = len(vocabulary("a")[0])
    w = gguf.GGUFWriter(str(path), "qwen3vl")
    w.add_name(f"specbench-tiny-qwen3vl-{shape.width}")
    w.add_context_length(context_length)
    w.add_embedding_length(shape.width)
    w.add_block_count(shape.n_layer)
    w.add_feed_forward_length(shape.n_ff)
    w.add_head_count(shape.n_head)
    w.add_head_count_kv(shape.n_head_kv)
    w.add_key_length(shape.head_dim)
    w.add_value_length(shape.head_dim)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(1000000.0)
    half = shape.head_dim // 2
    w.add_rope_dimension_sections([half - 2 * (half // 4), half // 4, half // 4, 0])
    w.add_num_deepstack_layers(0)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    add_tiny_tokenizer(w, "a")
    for name, t in text_weights(shape, seed, n_vocab).items():
        w.add_tensor(name, t)
    _finish(w)
    return path


def write_qwen3a_mmproj(path: Path, projection_dim: int, seed: int, width: int = 32, n_layer: int = 1,
                        n_head: int = 2, n_ff: int = 64) -> Path:
    """A `qwen3a` audio projector whose output width is `projection_dim` (must equal the
    text model's width for libmtmd to accept the pair)."""
    import gguf

    rng = np.random.default_rng(seed)
    c = CONV_CHANNELS
    t: dict[str, np.ndarray] = {
        "a.conv2d.1.weight": (rng.standard_normal((c, 1, 3, 3)) / 3).astype(np.float32),
        "a.conv2d.1.bias": np.zeros(c, np.float32),
        "a.conv2d.2.weight": (rng.standard_normal((c, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32),
        "a.conv2d.2.bias": np.zeros(c, np.float32),
        "a.conv2d.3.weight": (rng.standard_normal((c, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32),
        "a.conv2d.3.bias": np.zeros(c, np.float32),
        "a.conv_out.weight": _mat(rng, width, FREQ_AFTER_CONV * c),
        "a.position_embd.weight": (0.1 * rng.standard_normal((N_POS_EMBD, width))).astype(np.float32),
        "a.post_ln.weight": np.ones(width, np.float32),
        "a.post_ln.bias": np.zeros(width, np.float32),
        "mm.a.mlp.1.weight": _mat(rng, width, width),
        "mm.a.mlp.1.bias": np.zeros(width, np.float32),
        "mm.a.mlp.2.weight": _mat(rng, projection_dim, width, 4.0),
        "mm.a.mlp.2.bias": np.zeros(projection_dim, np.float32),
    }
    for i in range(n_layer):
        b = f"a.blk.{i}."
        t |= {b + "ln1.weight": np.ones(width, np.float32), b + "ln1.bias": np.zeros(width, np.float32),
              b + "ln2.weight": np.ones(width, np.float32), b + "ln2.bias": np.zeros(width, np.float32),
              b + "attn_q.weight": _mat(rng, width, width), b + "attn_q.bias": np.zeros(width, np.float32),
              b + "attn_k.weight": _mat(rng, width, width),  # no bias, as in Qwen3-ASR
              b + "attn_v.weight": _mat(rng, width, width), b + "attn_v.bias": np.zeros(width, np.float32),
              b + "attn_out.weight": _mat(rng, width, width), b + "attn_out.bias": np.zeros(width, np.float32),
              b + "ffn_up.weight": _mat(rng, n_ff, width), b + "ffn_up.bias": np.zeros(n_ff, np.float32),
              b + "ffn_down.weight": _mat(rng, width, n_ff), b + "ffn_down.bias": np.zeros(width, np.float32)}
    w = gguf.GGUFWriter(str(path), "clip")
    w.add_name("specbench-tiny-qwen3a")
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_bool("clip.has_audio_encoder", True)
    w.add_bool("clip.has_vision_encoder", False)
    w.add_string("clip.projector_type", "qwen3a")
    w.add_uint32("clip.audio.embedding_length", width)
    w.add_uint32("clip.audio.feed_forward_length", n_ff)
    w.add_uint32("clip.audio.block_count", n_layer)
    w.add_uint32("clip.audio.attention.head_count", n_head)
    w.add_uint32("clip.audio.projection_dim", projection_dim)
    w.add_uint32("clip.audio.num_mel_bins", N_MEL)
    w.add_float32("clip.audio.attention.layer_norm_epsilon", 1e-5)
    for name, tensor in t.items():
        w.add_tensor(name, tensor)
    _finish(w)
    return path


def _finish(w) -> None:
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@dataclass(frozen=True)
class TinyAsr:
    target: Path
    target_mmproj: Path
    drafter: Path
    drafter_mmproj: Path


def write_tiny_asr(directory: Path) -> TinyAsr:
    """Target (width 64, two layers) and drafter (width 32, one layer), each with its mmproj."""
    directory.mkdir(parents=True, exist_ok=True)
    return TinyAsr(write_qwen3vl(directory / "asr-target.gguf", TARGET, seed=11),
                   write_qwen3a_mmproj(directory / "asr-target-mmproj.gguf", TARGET.width, seed=12),
                   write_qwen3vl(directory / "asr-drafter.gguf", DRAFTER, seed=13),
                   write_qwen3a_mmproj(directory / "asr-drafter-mmproj.gguf", DRAFTER.width, seed=14))
