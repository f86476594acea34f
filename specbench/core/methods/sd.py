"""Standard speculative decoding, serial and prefix-conditioned (docs/METHODS.md §2.3 Serial speculative decoding).

Each round the drafter ingests the committed tokens its KV lacks (1 after a rejection, 2
after full acceptance), drafts up to W-1 tokens greedily one forward at a time, and the
target verifies them in one forward of width k+1; both caches roll back to the committed
prefix. Drafting stops early at the drafter's end of sequence, below `p_min`, or where the
cap leaves no room (k <= cap - t - 1: a longer draft could not be committed). A stop on
confidence costs one more drafter forward (the "probe" that produced the low confidence).

The decisions are the same whatever the drafter's vocabulary; its forwards are not. A
same-vocabulary drafter's KV holds committed target tokens (`SameVocabKV`); a drafter of
another vocabulary drafts in its own tokens and re-reads the committed text retokenized
(`CrossVocabKV`, the runner's decode.cpp CrossSpecDecoder). The prompt-lookup drafter has
no model and no KV: one lookup per round (`lookup.LookupKV`, docs/METHODS.md §2.7 Prompt-lookup drafting).
"""

from __future__ import annotations

import numpy as np

from specbench.core.methods.base import (
    Decoded,
    DraftSource,
    Model,
    Op,
    TargetOracle,
    lcp,
    stopped_on_confidence,
    usable_drafts,
)
from specbench.core.methods.configs import SdConfig
from specbench.core.methods.lookup import MAX_NGRAM, LookupKV
from specbench.errors import SpecbenchError
from specbench.schemas.traces import PAD, CrossDrafts, WindowTrace


def draft_ops(new: int, k: int, t: int, valid: int, n_prompt_drafter: int, probe: bool = False) -> list[Op]:
    """The drafter's forwards for one round: one ingest of `new` tokens (its first output is
    the first draft), then k-1 single steps each feeding the previous draft, plus one on
    draft k when drafting stopped on confidence (`probe`)."""
    ops = [Op(Model.DRAFTER, new, n_prompt_drafter + valid)]
    ops += [Op(Model.DRAFTER, 1, n_prompt_drafter + t + i - 1) for i in range(1, k + probe)]
    return ops


class SameVocabKV:
    """The drafter's KV holds its prompt and the first `valid` committed tokens: each round
    ingests the committed tokens it lacks, and keeps the accepted drafts it was fed."""

    def __init__(self, n_prompt_drafter: int):
        self.n_prompt_drafter = n_prompt_drafter
        self.valid = 0
        self.in_kv = 0

    def draft(self, t: int, k: int, limit: int, probe: bool) -> list[Op]:
        self.in_kv = max(k - 1, 0) + probe  # drafts fed back to the drafter
        return draft_ops(t - self.valid, k, t, self.valid, self.n_prompt_drafter, probe)

    def observe(self, t: int, accepted: int) -> None:
        self.valid = t + min(accepted, self.in_kv)


def cross_draft_max_steps(width: int) -> int:
    """Drafter tokens a cross-vocabulary SD round may draft (decode.cpp CrossSpecDecoder)."""
    return max(96, 4 * (width - 1) + 16)


class CrossVocabKV:
    """The drafter's KV as the runner keeps it with another vocabulary: its prompt + the
    committed text retokenized by the drafter (the context), then the drafter tokens fed
    while drafting. Each round keeps the longest common prefix with the new context
    (re-reading at least its last token, whose logits start the draft) and ingests the rest in
    one forward; it then feeds drafter tokens one forward each until the mapped candidates
    are decided: `limit` of them, one below `p_min`, or the drafter's end."""

    def __init__(self, cross: CrossDrafts, n_prompt_drafter: int, width: int, window_id: str):
        self.cross = cross
        self.n_prompt_drafter = n_prompt_drafter
        self.max_steps = cross_draft_max_steps(width)
        self.window_id = window_id
        self.kv = np.zeros(0, dtype=np.int32)
        """The drafter's KV after its prompt."""
        self._contexts = cross.contexts()
        self._t = -1
        self._context = self.kv

    def context(self, t: int) -> np.ndarray:
        """y[:t] as drafter tokens (t never decreases)."""
        while self._t < t:
            self._context = next(self._contexts)
            self._t += 1
        return self._context

    def fed(self, t: int, k: int, limit: int) -> int:
        """Drafter forwards while drafting row t: one per drafter token before the one that
        decided the candidates (k usable of at most `limit`)."""
        steps = self.cross.step[t]
        length = int(np.sum(steps != PAD))
        if k == limit:
            fed = int(steps[k - 1])
        elif k < length:  # the first unusable token (below p_min) decided it
            fed = int(steps[k])
        elif length < len(steps):  # the row ended: the drafter's end, or the trace's step limit
            fed = len(self.cross.drafter_tokens[t]) - 1
        else:
            raise SpecbenchError(f"trace of window '{self.window_id}': cross-vocabulary SD drafting {limit} tokens "
                                 f"needs draft rows longer than the trace's k_max={len(steps)}",
                                 hint=f"trace again with --k-max {limit} or more")
        if fed >= self.max_steps:
            raise SpecbenchError(f"trace of window '{self.window_id}', t={t}: the runner's cross-vocabulary draft "
                                 f"stops at {self.max_steps} drafter tokens, before the trace's row is decided; "
                                 "replay cannot price it")
        return fed

    def draft(self, t: int, k: int, limit: int, probe: bool) -> list[Op]:
        context = self.context(t)
        fed = self.fed(t, k, limit)
        keep = min(lcp(self.kv.tolist(), context.tolist()), len(context) - 1)
        depth = self.n_prompt_drafter + len(context)
        ops = [Op(Model.DRAFTER, len(context) - keep, self.n_prompt_drafter + keep)]
        ops += [Op(Model.DRAFTER, 1, depth + i) for i in range(fed)]
        self.kv = np.concatenate([context, self.cross.drafter_tokens[t][:fed]])
        return ops

    def observe(self, t: int, accepted: int) -> None:
        """Nothing: the next round's common prefix drops what was rejected."""


DrafterKV = SameVocabKV | CrossVocabKV | LookupKV


def check_draft_rows(trace: WindowTrace, config: SdConfig) -> None:
    """A same-vocabulary trace row holds k_max drafts: SD at W − 1 > k_max would read truncated
    rows and price drafts shorter than the runner's, so it is refused (as the cross-vocabulary
    path refuses rows it cannot decide)."""
    if trace.drafts is not None and config.width - 1 > trace.drafts.k_max:
        raise SpecbenchError(f"{config.label}: drafts up to W-1 = {config.width - 1} tokens, but the trace of window "
                             f"'{trace.window_id}' holds k_max = {trace.drafts.k_max} drafts per row",
                             hint=f"trace again with --k-max {config.width - 1} or more")


def drafter_kv(trace: WindowTrace, config: SdConfig) -> DrafterKV:
    """How the runner's drafter KV evolves for this trace's drafter."""
    lookup = trace.drafts.lookup if trace.drafts is not None else None
    if lookup is not None:
        if lookup.max_ngram != MAX_NGRAM:
            raise SpecbenchError(f"trace of window '{trace.window_id}': the lookup drafter '{lookup.name}' matched "
                                 f"n-grams up to {lookup.max_ngram}; this specbench's lookup matches up to {MAX_NGRAM}",
                                 hint="trace again with this specbench's runner")
        return LookupKV(trace.n_prompt_drafter)
    cross = trace.drafts.cross if trace.drafts is not None else None
    if cross is None:
        check_draft_rows(trace, config)
        return SameVocabKV(trace.n_prompt_drafter)
    return CrossVocabKV(cross, trace.n_prompt_drafter, config.width, trace.window_id)


def decode_sd(oracle: TargetOracle, drafts: DraftSource, cap: int, n_prompt: int, n_prompt_drafter: int,
              config: SdConfig, kv: DrafterKV | None = None) -> Decoded:
    kv = SameVocabKV(n_prompt_drafter) if kv is None else kv
    ops: list[Op] = []
    while not oracle.done:
        t = oracle.committed
        limit = min(config.width - 1, cap - t - 1)
        candidates: tuple[int, ...] = ()
        if limit > 0:
            tokens, conf = drafts.continuation(t)
            k = usable_drafts(tokens, conf, limit, config.p_min)
            ops += kv.draft(t, k, limit, stopped_on_confidence(tokens, conf, k, limit, config.p_min))
            candidates = tuple(int(c) for c in tokens[:k])
        accepted, committed = oracle.verify(candidates)
        ops.append(Op(Model.TARGET, len(candidates) + 1, n_prompt + t - 1, len(candidates), accepted, committed))
        if limit > 0:
            kv.observe(t, accepted)
    return Decoded(oracle.tokens(), tuple(ops))
