"""Tiny random-weight `qwen3` GGUF models that llama.cpp loads and runs in milliseconds.

Random weights give meaningless acceptance, so these models test plumbing and
losslessness (every method must commit the target's greedy tokens), never speedups.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

N_EMBD = 64
N_HEAD = 4
N_HEAD_KV = 2
HEAD_DIM = 16
N_FF = 128
N_LAYER = 2

# GPT-2 byte-level BPE: 256 byte tokens, a few merges, then control tokens.
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
EOS_TEXT = "<|im_end|>"


def _byte_tokens() -> list[str]:
    """The GPT-2 byte-to-unicode table, in byte order."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    mapping, extra = {}, 0
    for b in range(256):
        if b in printable:
            mapping[b] = chr(b)
        else:
            mapping[b] = chr(256 + extra)
            extra += 1
    return [mapping[b] for b in range(256)]


MERGES = {
    "a": ["Ġ t", "Ġ a", "h e", "i n"],
    # A different vocabulary (cross-vocabulary drafting tests): other merges, other ids from 256 on.
    "b": ["l l", "Ġ w", "o r", "e r", "Ġ h", "Ġt h", "Ġth e"],
    # Vocabulary b with the newline byte marked CONTROL: detokenizing drops it, so the
    # tokenizer does not round-trip text and cross-vocabulary mapping must refuse it.
    "b-lossy": ["l l", "Ġ w", "o r", "e r", "Ġ h", "Ġt h", "Ġth e"],
}


def vocabulary(variant: str = "a") -> tuple[list[str], list[str], list[int]]:
    """(tokens, merges, token types); merges must be non-empty or llama.cpp refuses the vocab."""
    import gguf

    tokens = _byte_tokens()
    merges = MERGES[variant]
    tokens += [m.replace(" ", "") for m in merges]
    types = [gguf.TokenType.NORMAL] * len(tokens)
    if variant == "b-lossy":
        types[ord("\n")] = gguf.TokenType.CONTROL
    tokens += SPECIALS
    types += [gguf.TokenType.CONTROL] * len(SPECIALS)
    return tokens, merges, [int(t) for t in types]


def random_weights(seed: int, n_vocab: int, scale: float = 1.0) -> dict[str, np.ndarray]:
    """Tensors by GGUF name; numpy shapes are ggml's dims reversed."""
    rng = np.random.default_rng(seed)

    def mat(rows: int, cols: int, gain: float = 1.0) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) * gain * scale / np.sqrt(cols)).astype(np.float32)

    def norm(n: int) -> np.ndarray:
        return np.ones(n, dtype=np.float32)

    w = {
        "token_embd.weight": mat(n_vocab, N_EMBD, gain=np.sqrt(N_EMBD)),
        "output_norm.weight": norm(N_EMBD),
        # A large output gain keeps the logits far apart: fewer near-ties between the
        # batched and single-token forwards, whose float sums differ in the last bits.
        "output.weight": mat(n_vocab, N_EMBD, gain=8.0),
    }
    for i in range(N_LAYER):
        b = f"blk.{i}."
        w |= {
            b + "attn_norm.weight": norm(N_EMBD),
            b + "attn_q.weight": mat(N_HEAD * HEAD_DIM, N_EMBD),
            b + "attn_k.weight": mat(N_HEAD_KV * HEAD_DIM, N_EMBD),
            b + "attn_v.weight": mat(N_HEAD_KV * HEAD_DIM, N_EMBD),
            b + "attn_output.weight": mat(N_EMBD, N_HEAD * HEAD_DIM),
            b + "attn_q_norm.weight": norm(HEAD_DIM),
            b + "attn_k_norm.weight": norm(HEAD_DIM),
            b + "ffn_norm.weight": norm(N_EMBD),
            b + "ffn_gate.weight": mat(N_FF, N_EMBD),
            b + "ffn_up.weight": mat(N_FF, N_EMBD),
            b + "ffn_down.weight": mat(N_EMBD, N_FF),
        }
    return w


CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def add_tiny_tokenizer(w, vocab: str = "a", chat_template: str | None = CHATML) -> None:
    """The byte-level BPE vocabulary `vocab` and a chat template (None: none stored, like
    some repackaged GGUFs), on a gguf.GGUFWriter."""
    tokens, merges, types = vocabulary(vocab)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(tokens.index("<|endoftext|>"))
    w.add_eos_token_id(tokens.index(EOS_TEXT))
    w.add_add_bos_token(False)
    if chat_template is not None:
        w.add_chat_template(chat_template)


def write_tiny_qwen3(path: Path, weights: dict[str, np.ndarray], context_length: int = 2048,
                     vocab: str = "a", quant: str | None = None, chat_template: str | None = CHATML) -> Path:
    """Write a qwen3 GGUF with a tiny vocabulary (variant `vocab`), a chat template (None:
    none) and the given tensors; `quant` (a gguf.GGMLQuantizationType name, e.g. "Q4_1")
    quantizes the 2-D ones, as llama-quantize does."""
    import gguf

    arch = "qwen3"
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name("specbench-tiny-qwen3")
    w.add_context_length(context_length)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(len({k.split(".")[1] for k in weights if k.startswith("blk.")}))
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(10000.0)
    w.add_file_type(gguf.LlamaFileType[f"MOSTLY_{quant}"] if quant else gguf.LlamaFileType.ALL_F32)
    add_tiny_tokenizer(w, vocab, chat_template)
    qtype = gguf.GGMLQuantizationType[quant] if quant else None
    for name, t in weights.items():
        if qtype is not None and t.ndim == 2:
            w.add_tensor(name, gguf.quants.quantize(t, qtype), raw_dtype=qtype)
        else:
            w.add_tensor(name, t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def n_vocab(variant: str = "a") -> int:
    return len(vocabulary(variant)[0])


def perturbed(weights: dict[str, np.ndarray], seed: int, noise: float) -> dict[str, np.ndarray]:
    """A same-vocabulary "drafter" close to `weights`: it agrees with the target often, not always."""
    rng = np.random.default_rng(seed)
    return {k: (v + noise * v.std() * rng.standard_normal(v.shape)).astype(np.float32) if v.ndim == 2 else v
            for k, v in weights.items()}


def slowed(weights: dict[str, np.ndarray], extra_layers: int, seed: int = 7) -> dict[str, np.ndarray]:
    """The same function, computed more slowly: `extra_layers` more blocks whose attention
    output and FFN down projections are zero, so each adds exactly nothing to the residual
    stream (x + 0 == x) but costs a block's compute. A drafter of `weights` then runs ahead
    of this target and agrees with it (AS2D tests)."""
    n = len({k.split(".")[1] for k in weights if k.startswith("blk.")})
    donor = random_weights(seed, weights["token_embd.weight"].shape[0])
    out = dict(weights)
    for i in range(n, n + extra_layers):
        for k, v in donor.items():
            if k.startswith("blk.0."):
                name = f"blk.{i}." + k[len("blk.0."):]
                out[name] = np.zeros_like(v) if ("attn_output" in k or "ffn_down" in k) else v
    return out


@dataclass(frozen=True)
class TinyModels:
    """Paths of the tiny fixtures; `weights` are the target's, for the numpy reference."""

    target: Path
    near: Path      # the target plus a little noise: accepts some drafts, rejects others
    far: Path       # unrelated random weights: rejects almost everything
    weights: dict
    eog: frozenset  # token ids llama.cpp treats as end of generation


def write_tiny_models(directory: Path) -> TinyModels:
    """The target, its `near` and `far` drafters, written into `directory`."""
    weights = random_weights(seed=1, n_vocab=n_vocab())
    write_tiny_qwen3(directory / "target.gguf", weights)
    write_tiny_qwen3(directory / "near.gguf", perturbed(weights, seed=2, noise=0.05))
    write_tiny_qwen3(directory / "far.gguf", random_weights(seed=3, n_vocab=n_vocab()))
    tokens = vocabulary()[0]
    eog = frozenset(tokens.index(t) for t in SPECIALS if t != "<|im_start|>")
    return TinyModels(directory / "target.gguf", directory / "near.gguf", directory / "far.gguf", weights, eog)
