"""Standard speculative decoding, serial and prefix-conditioned (METHODS §3.2).

Each round the drafter ingests the committed tokens its KV lacks (1 after a rejection, 2
after full acceptance), drafts up to W-1 tokens greedily one forward at a time, and the
target verifies them in one forward of width k+1; both caches roll back to the committed
prefix. Drafting stops early at the drafter's end of sequence, below `p_min`, or where the
cap leaves no room (k <= cap - t - 1: a longer draft could not be committed). A stop on
confidence costs one more drafter forward (the "probe" that produced the low confidence).
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import (Decoded, DraftSource, Model, Op, TargetOracle, check_parameter, stopped_on_confidence,
                   usable_drafts)

REPORTED_WIDTHS = (5, 6, 7, 8)
"""AS2D's reporting convention: SD is the mean over these physical widths."""


@dataclass(frozen=True)
class SdConfig:
    width: int
    """Physical verification width W (W - 1 drafts)."""
    p_min: float = 0.0
    """Confidence stop: drafting ends below this top-1 probability."""
    drafter: str | None = None

    def __post_init__(self) -> None:
        check_parameter("W", self.width, 2)  # W = 1 would verify no draft at all
        check_parameter("p_min", self.p_min, 0.0, 1.0)

    @property
    def label(self) -> str:
        extra = (f",p_min={self.p_min:g}" if self.p_min else "") + (f",drafter={self.drafter}" if self.drafter else "")
        return f"sd[W={self.width}{extra}]"


def draft_ops(new: int, k: int, t: int, valid: int, n_prompt_drafter: int, probe: bool = False) -> list[Op]:
    """The drafter's forwards for one round: one ingest of `new` tokens (its first output is
    the first draft), then k-1 single steps each feeding the previous draft, plus one on
    draft k when drafting stopped on confidence (`probe`)."""
    ops = [Op(Model.DRAFTER, new, n_prompt_drafter + valid)]
    ops += [Op(Model.DRAFTER, 1, n_prompt_drafter + t + i - 1) for i in range(1, k + probe)]
    return ops


def decode_sd(oracle: TargetOracle, drafts: DraftSource, cap: int, n_prompt: int, n_prompt_drafter: int,
              config: SdConfig) -> Decoded:
    ops: list[Op] = []
    valid = 0  # committed tokens (after the prompt) held in the drafter's KV
    while not oracle.done:
        t = oracle.committed
        limit = min(config.width - 1, cap - t - 1)
        candidates: tuple[int, ...] = ()
        if limit > 0:
            tokens, conf = drafts.continuation(t)
            k = usable_drafts(tokens, conf, limit, config.p_min)
            probe = stopped_on_confidence(tokens, conf, k, limit, config.p_min)
            ops += draft_ops(t - valid, k, t, valid, n_prompt_drafter, probe)
            candidates = tuple(int(c) for c in tokens[:k])
            in_kv = max(k - 1, 0) + probe  # drafts fed back to the drafter
        accepted, committed = oracle.verify(candidates)
        ops.append(Op(Model.TARGET, len(candidates) + 1, n_prompt + t - 1, len(candidates), accepted, committed))
        if limit > 0:
            valid = t + min(accepted, in_kv)
    return Decoded(oracle.tokens(), tuple(ops))
