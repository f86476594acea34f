"""SpecASR-style decoding: adaptive single sequence with recycling (docs/METHODS.md §2.4 SpecASR-style).

A named reconstruction (the SpecASR paper's method section was not available):

* adaptive length: draft while the drafter's top-1 probability >= tau and the draft is
  shorter than k_max (and the cap leaves room);
* recycling: after a rejection at draft position a, the unused tail c[a+1:] is kept. Next
  round the drafter ingests the correction and the tail in one batched forward, keeps the
  leading tail tokens whose top-1 still agrees with confidence >= tau, and continues
  drafting after them (the batched forward's prediction after the kept part is the first
  new draft, for free);
* cost per round: the (batched) ingest, the new single-token drafter steps, CT(k+1).

Recycling asks the drafter about contexts holding unverified tokens, which the
prefix-conditioned draft table cannot answer: traces record those answers per
configuration (`recycle[label]`), and replay fails on a query the trace lacks.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from specbench.core.methods.base import (
    Decoded,
    DraftSource,
    Model,
    Op,
    TargetOracle,
    stopped_on_confidence,
    usable_drafts,
)
from specbench.core.methods.configs import SpecAsrConfig
from specbench.core.methods.sd import draft_ops
from specbench.errors import SpecbenchError
from specbench.schemas.traces import RecycleAnswer


def kept_tail(tail: Sequence[int], top1: Sequence[int], conf: Sequence[float], tau: float, limit: int) -> int:
    """Leading tail tokens the drafter still predicts, confidently, after the correction."""
    m = 0
    while m < len(tail) and m < limit and top1[m] == tail[m] and conf[m] >= tau:
        m += 1
    return m


def recycled_round(config: SpecAsrConfig, t: int, tail: Sequence[int], answer: RecycleAnswer,
                   limit: int) -> tuple[int, int, bool]:
    """A recycling round's decisions from the drafter's recorded answer: (tail tokens kept, new
    drafts after them, whether drafting stopped on confidence). Refuses an answer recorded for
    another configuration (it kept a different number of tail tokens)."""
    kept = kept_tail(tail, answer.top1, answer.conf, config.tau, limit)
    if kept != answer.kept:
        raise SpecbenchError(f"recorded recycling answer at t={t} kept {answer.kept} tail tokens, "
                             f"{config.trace_label} keeps {kept}: recorded for another configuration")
    cont, cont_conf = np.asarray(answer.cont), np.asarray(answer.cont_conf)
    n_new = usable_drafts(cont, cont_conf, limit - kept, config.tau)
    return kept, n_new, stopped_on_confidence(cont, cont_conf, n_new, limit - kept, config.tau)


def decode_specasr(oracle: TargetOracle, drafts: DraftSource, cap: int, n_prompt: int, n_prompt_drafter: int,
                   config: SpecAsrConfig) -> Decoded:
    ops: list[Op] = []
    valid = 0  # committed tokens (after the prompt) held in the drafter's KV
    tail: tuple[int, ...] = ()
    while not oracle.done:
        t = oracle.committed
        limit = min(config.k_max, cap - t - 1)
        candidates: tuple[int, ...] = ()
        in_kv = 0  # candidates the drafter's KV holds after drafting
        if limit > 0 and tail:
            answer = drafts.recycle(config, t, tail, limit)
            kept, n_new, probe = recycled_round(config, t, tail, answer, limit)
            ops.append(Op(Model.DRAFTER, (t - valid) + len(tail), n_prompt_drafter + valid, all_rows=True))
            ops += [Op(Model.DRAFTER, 1, n_prompt_drafter + t + kept + i - 1) for i in range(1, n_new + probe)]
            candidates = tuple(tail[:kept]) + tuple(int(c) for c in answer.cont[:n_new])
            in_kv = kept + max(n_new - 1, 0) + probe
        elif limit > 0:
            tokens, conf = drafts.continuation(t)
            k = usable_drafts(tokens, conf, limit, config.tau)
            probe = stopped_on_confidence(tokens, conf, k, limit, config.tau)
            ops += draft_ops(t - valid, k, t, valid, n_prompt_drafter, probe)
            candidates = tuple(int(c) for c in tokens[:k])
            in_kv = max(k - 1, 0) + probe
        accepted, committed = oracle.verify(candidates)
        ops.append(Op(Model.TARGET, len(candidates) + 1, n_prompt + t - 1, len(candidates), accepted, committed))
        if limit > 0:
            valid = t + min(accepted, in_kv)
        tail = candidates[accepted + 1:] if accepted < len(candidates) else ()
    return Decoded(oracle.tokens(), tuple(ops))
