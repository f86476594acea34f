"""A numpy forward pass of the tiny qwen3 fixture: the independent greedy decode that the
native runner's target-only output is checked against (parity, as llm.c does)."""

from __future__ import annotations

import numpy as np

from .tiny_gguf import HEAD_DIM, N_HEAD, N_HEAD_KV, N_LAYER

EPS = 1e-6
ROPE_BASE = 10000.0


def _rms(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + EPS) * w


def _rope_neox(x: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """qwen3 uses NEOX rotation: dimension i pairs with i + d/2. x: (T, heads, d)."""
    half = HEAD_DIM // 2
    inv = ROPE_BASE ** (-np.arange(half, dtype=np.float64) * 2 / HEAD_DIM)
    ang = pos[:, None].astype(np.float64) * inv[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    a, b = x[..., :half], x[..., half:]
    return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)


def logits(w: dict[str, np.ndarray], tokens: list[int]) -> np.ndarray:
    """Logits (T, n_vocab) for every position of `tokens`, causal, from position 0."""
    w64 = {k: v.astype(np.float64) for k, v in w.items()}
    T = len(tokens)
    pos = np.arange(T)
    x = w64["token_embd.weight"][tokens]
    mask = np.triu(np.full((T, T), -np.inf), k=1)
    group = N_HEAD // N_HEAD_KV
    for i in range(N_LAYER):
        b = f"blk.{i}."
        h = _rms(x, w64[b + "attn_norm.weight"])
        q = (h @ w64[b + "attn_q.weight"].T).reshape(T, N_HEAD, HEAD_DIM)
        k = (h @ w64[b + "attn_k.weight"].T).reshape(T, N_HEAD_KV, HEAD_DIM)
        v = (h @ w64[b + "attn_v.weight"].T).reshape(T, N_HEAD_KV, HEAD_DIM)
        q = _rope_neox(_rms(q, w64[b + "attn_q_norm.weight"]), pos)
        k = _rope_neox(_rms(k, w64[b + "attn_k_norm.weight"]), pos)
        out = np.empty((T, N_HEAD, HEAD_DIM))
        for hd in range(N_HEAD):
            kv = hd // group
            s = q[:, hd, :] @ k[:, kv, :].T / np.sqrt(HEAD_DIM) + mask
            p = np.exp(s - s.max(axis=-1, keepdims=True))
            p /= p.sum(axis=-1, keepdims=True)
            out[:, hd, :] = p @ v[:, kv, :]
        x = x + out.reshape(T, -1) @ w64[b + "attn_output.weight"].T
        h = _rms(x, w64[b + "ffn_norm.weight"])
        g = h @ w64[b + "ffn_gate.weight"].T
        u = h @ w64[b + "ffn_up.weight"].T
        x = x + (g / (1 + np.exp(-g)) * u) @ w64[b + "ffn_down.weight"].T
    return _rms(x, w64["output_norm.weight"]) @ w64["output.weight"].T


def greedy(w: dict[str, np.ndarray], prompt: list[int], cap: int, eog: set[int]) -> tuple[list[int], float]:
    """(y, smallest top-1/top-2 logit margin seen): the reference decode and how safe it is."""
    y: list[int] = []
    margin = np.inf
    while len(y) < cap and not (y and y[-1] in eog):
        row = logits(w, prompt + y)[-1]
        top2 = np.sort(row)[-2:]
        margin = min(margin, float(top2[1] - top2[0]))
        y.append(int(np.argmax(row)))
    return y, margin
