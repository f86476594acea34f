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

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from specbench.core.methods.base import (
    Decoded,
    DraftSource,
    Model,
    Op,
    TargetOracle,
    check_parameter,
    stopped_on_confidence,
    usable_drafts,
)
from specbench.core.methods.sd import draft_ops
from specbench.errors import SpecbenchError
from specbench.schemas.traces import PAD, RecycleAnswer


@dataclass(frozen=True)
class SpecAsrConfig:
    k_max: int = 8
    """Longest draft (physical width k_max + 1)."""
    tau: float = 0.5
    """Confidence threshold for drafting and for keeping recycled tokens."""
    drafter: str | None = None

    def __post_init__(self) -> None:
        check_parameter("k_max", self.k_max, 1)
        check_parameter("tau", self.tau, 0.0, 1.0)

    @property
    def label(self) -> str:
        return f"specasr[k_max={self.k_max},tau={self.tau:g}" + (f",drafter={self.drafter}" if self.drafter else "") + "]"

    @property
    def trace_label(self) -> str:
        """Names its recorded recycling answers in a trace (one trace file per drafter)."""
        return f"specasr[k_max={self.k_max},tau={self.tau:g}]"


def kept_tail(tail: Sequence[int], top1: Sequence[int], conf: Sequence[float], tau: float, limit: int) -> int:
    """Leading tail tokens the drafter still predicts, confidently, after the correction."""
    m = 0
    while m < len(tail) and m < limit and top1[m] == tail[m] and conf[m] >= tau:
        m += 1
    return m


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
            kept = kept_tail(tail, answer.top1, answer.conf, config.tau, limit)
            if kept != answer.kept:
                raise SpecbenchError(f"recorded recycling answer at t={t} kept {answer.kept} tail tokens, "
                                     f"{config.trace_label} keeps {kept}: recorded for another configuration")
            cont, cont_conf = np.asarray(answer.cont), np.asarray(answer.cont_conf)
            n_new = usable_drafts(cont, cont_conf, limit - kept, config.tau)
            probe = stopped_on_confidence(cont, cont_conf, n_new, limit - kept, config.tau)
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


NextToken = Callable[[tuple[int, ...]], tuple[int, float]]
"""A live drafter: context (committed + drafted tokens) -> (top-1 token, its probability)."""


class LiveDrafts:
    """Draft answers computed from a live drafter function, for building traces.

    It sees `y` because it stands where the real models stand when a trace is recorded;
    decision procedures still see only what the oracle commits.
    """

    def __init__(self, y: Sequence[int], next_token: NextToken, k_max: int, eos: int | None):
        self._y = tuple(int(v) for v in y)
        self._next = next_token
        self._k_max = k_max
        self._eos = eos
        self.recorded: dict[str, dict[tuple[int, tuple[int, ...]], RecycleAnswer]] = {}

    def greedy(self, context: tuple[int, ...], length: int) -> tuple[np.ndarray, np.ndarray]:
        tokens = np.full(length, PAD, dtype=np.int32)
        conf = np.zeros(length)
        for i in range(length):
            token, prob = self._next(context)
            tokens[i], conf[i] = token, prob
            if token == self._eos:
                break
            context += (token,)
        return tokens, conf

    def continuation(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        return self.greedy(self._y[:t], self._k_max)

    def recycle(self, config: SpecAsrConfig, t: int, tail: tuple[int, ...], limit: int) -> RecycleAnswer:
        context = self._y[:t]
        predictions = [self._next(context + tail[:i]) for i in range(len(tail) + 1)]
        top1 = tuple(p[0] for p in predictions)
        conf = tuple(p[1] for p in predictions)
        kept = kept_tail(tail, top1, conf, config.tau, limit)
        cont, cont_conf = self.greedy(context + tail[:kept], self._k_max)
        length = int(np.sum(cont != PAD))
        answer = RecycleAnswer(top1, conf, kept, tuple(cont[:length].tolist()), tuple(cont_conf[:length].tolist()))
        self.recorded.setdefault(config.trace_label, {})[(t, tail)] = answer
        return answer
