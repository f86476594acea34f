"""Prompt-lookup (n-gram) drafting: a drafter with no model (docs/METHODS.md §2.7 Prompt-lookup drafting).

Spec-Bench's PLD, HF transformers' `prompt_lookup_num_tokens` and llama.cpp's lookup
decoding draft by copying: where the context's last few tokens occurred before, the tokens
that followed them then are proposed now. specbench's rule, the same in the runner
(specbench/native/src/lookup.cpp): for the longest suffix of `MAX_NGRAM` (3), then 2, then 1
tokens of prompt + committed output that occurs earlier in it, the tokens after its most
recent earlier occurrence, at most `limit` of them (SD's W − 1). No earlier occurrence: no
candidate, and the round is a plain target step.

Serial SD drives it like any drafter (methods.sd.decode_sd with `LookupKV`): one lookup per
round with room, which the runner times and replay prices as a drafter op of width 1 at
depth n_prompt + t (the context it searched), from the profile's `pld` drafter entry. As
AS2D's producer it has no decision to make: its stream is the window's input in target tokens,
published whole before the clock (the trace's producer stream; replay.reference.producer_costs).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from specbench.core.methods.base import Model, Op
from specbench.schemas.traces import PAD

NAME = "pld"
"""The drafter name: `--drafter pld`, `sd:drafter=pld`, traces/pld.jsonl, the profile's entry."""
MAX_NGRAM = 3
"""Longest suffix matched (Spec-Bench's PLD and HF use up to 2-3; longer matches are rarer)."""
IDENTITY = hashlib.sha256(f"specbench prompt lookup, max n-gram {MAX_NGRAM}".encode()).hexdigest()
"""Stands for a model file's sha256 in trace headers, profiles and manifests."""


def prompt_lookup(context: Sequence[int], limit: int) -> tuple[int, ...]:
    """Up to `limit` candidates after `context`: for the longest suffix (MAX_NGRAM tokens down to
    1) that occurs earlier in `context`, the tokens that followed its most recent earlier
    occurrence (which may overlap the suffix). Empty when no suffix recurs or limit <= 0."""
    tokens = [int(t) for t in context]
    n = len(tokens)
    if limit <= 0:
        return ()
    for size in range(min(MAX_NGRAM, n - 1), 0, -1):
        suffix = tokens[n - size:]
        for start in range(n - size - 1, -1, -1):  # most recent first; the suffix itself is no match
            if tokens[start:start + size] == suffix:
                follow = start + size
                return tuple(tokens[follow:follow + limit])
    return ()


def lookup_rows(prompt: Sequence[int], y: Sequence[int], k_max: int) -> np.ndarray:
    """int32 [len(y), k_max]: row t = prompt_lookup(prompt + y[:t], k_max), PAD-ended, as a
    trace records them (a row's first W − 1 tokens are the lookup's candidates at width W)."""
    context = [int(t) for t in prompt]
    rows = np.full((len(y), k_max), PAD, dtype=np.int32)
    for t in range(len(y)):
        if t:
            context.append(int(y[t - 1]))
        found = prompt_lookup(context, k_max)
        rows[t, :len(found)] = found
    return rows


class LookupKV:
    """SD's drafter side with the lookup drafter: no KV, one lookup per round with room."""

    def __init__(self, n_prompt: int):
        self.n_prompt = n_prompt

    def draft(self, t: int, k: int, limit: int, probe: bool) -> list[Op]:
        return [Op(Model.DRAFTER, 1, self.n_prompt + t)]

    def observe(self, t: int, accepted: int) -> None:
        """Nothing: the next lookup reads the committed tokens afresh."""
