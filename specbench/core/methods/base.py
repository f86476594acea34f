"""What every decision procedure shares: operations, the target oracle, draft sources.

A decision procedure never reads the reference output `y` directly. It learns the
target's decisions only through `TargetOracle.verify`, which reveals the tokens a
verification commits and nothing beyond them — so a procedure is causal by construction,
and a test can check that by changing `y` past the committed prefix.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

import numpy as np

from specbench.core.methods.configs import SpecAsrConfig
from specbench.errors import SpecbenchError
from specbench.schemas.traces import PAD, RecycleAnswer, WindowTrace


class Model(str, Enum):
    TARGET = "target"
    DRAFTER = "drafter"


@dataclass(frozen=True)
class Op:
    """One forward pass of one model."""

    model: Model
    width: int
    """Tokens in the forward (a verification of k candidates has width k + 1)."""
    depth: int
    """KV entries before the forward."""
    proposed: int = 0
    """Target forwards: candidates verified (width - 1)."""
    accepted: int = 0
    """Target forwards: candidates accepted."""
    committed: int = 0
    """Target forwards: tokens committed (accepted + correction/bonus, cut at the end)."""
    all_rows: bool = False
    """Drafter forwards that keep a logits row per token (SpecASR's recycling ingest); the
    others keep the last row only. Target forwards always keep every row."""


@dataclass(frozen=True)
class Decoded:
    """A serial method's result: the committed tokens and the operations, in order."""

    tokens: tuple[int, ...]
    ops: tuple[Op, ...]


def lcp(candidates: Sequence[int], reference: Sequence[int]) -> int:
    """Length of the longest common prefix."""
    n = 0
    for c, r in zip(candidates, reference, strict=False):
        if c != r:
            break
        n += 1
    return n


class TargetOracle:
    """The target's greedy decisions, revealed one verification at a time.

    `y[0]` is committed by the prefill. `verify(c)` runs the target over
    `[root, c0..]`, accepts the longest prefix of `c` that matches its own greedy choices,
    adds its correction (or the bonus after full acceptance) and commits
    `min(accepted + 1, remaining)` tokens; the output ends at EOS or the cap, which is why
    commits stop at `len(y)`.
    """

    def __init__(self, y: Iterable[int]):
        self._y = [int(v) for v in y]
        if not self._y:
            raise SpecbenchError("the target output y is empty; y[0] must come from the prefill")
        self._committed = 1

    @property
    def committed(self) -> int:
        return self._committed

    @property
    def done(self) -> bool:
        return self._committed >= len(self._y)

    def tokens(self) -> tuple[int, ...]:
        return tuple(self._y[: self._committed])

    def last(self) -> int:
        return self._y[self._committed - 1]

    def verify(self, candidates: Sequence[int]) -> tuple[int, int]:
        """(accepted candidates, tokens committed) for one target forward."""
        if self.done:
            raise SpecbenchError("verify called after the output ended")
        t = self._committed
        accepted = lcp(candidates, self._y[t:])
        committed = min(accepted + 1, len(self._y) - t)
        self._committed = t + committed
        return accepted, committed


class DraftSource(Protocol):
    """The drafter's answers: from a trace (replay), or from a drafter function while a trace
    is built (bench/synthetic_study.py)."""

    def continuation(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """Greedy continuation after prompt + y[:t]: (tokens, top-1 probabilities), PAD-ended."""

    def recycle(self, config: SpecAsrConfig, t: int, tail: tuple[int, ...], limit: int) -> RecycleAnswer:
        """Answer to a SpecASR recycling query of `config` (see methods.specasr)."""


class TraceDrafts:
    """Draft answers read from a trace; a query it lacks is an error, never a guess."""

    def __init__(self, trace: WindowTrace, drafter: str = "drafter"):
        self._trace = trace
        self._drafter = drafter

    def continuation(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        drafts = self._trace.drafts
        if drafts is None:
            raise SpecbenchError(f"trace of window '{self._trace.window_id}' (drafter {self._drafter}) has no "
                                 "prefix-conditioned drafts", hint="trace again with drafts enabled")
        drafts.require_row(t, self._trace.window_id, self._drafter)
        return drafts.tokens[t], drafts.conf[t]

    def recycle(self, config: SpecAsrConfig, t: int, tail: tuple[int, ...], limit: int) -> RecycleAnswer:
        label = config.trace_label
        table = self._trace.recycle.get(label)
        if table is None:
            recorded = ", ".join(sorted(self._trace.recycle)) or "none"
            raise SpecbenchError(f"trace of window '{self._trace.window_id}' (drafter {self._drafter}) has no "
                                 f"recorded recycling queries for configuration {label} (recorded: {recorded})",
                                 hint=f"trace again with --specasr 'specasr:k_max={config.k_max},tau={config.tau:g}'")
        answer = table.get((t, tail))
        if answer is None:
            raise SpecbenchError(f"trace of window '{self._trace.window_id}' (drafter {self._drafter}), "
                                 f"configuration {label}: no recorded answer for t={t} tail={list(tail)}")
        return answer


def usable_drafts(tokens: np.ndarray, conf: np.ndarray, limit: int, min_conf: float) -> int:
    """How many leading drafts to propose: at most `limit`, none past the drafter's end
    of sequence, and none from the first one whose confidence is below `min_conf`."""
    n = 0
    for token, prob in zip(tokens[:limit], conf[:limit], strict=False):
        if token == PAD or prob < min_conf:
            break
        n += 1
    return n


def stopped_on_confidence(tokens: np.ndarray, conf: np.ndarray, k: int, limit: int, min_conf: float) -> bool:
    """Whether drafting `k >= 1` tokens ended at a confidence below `min_conf`. Then the
    drafter ran one more forward (on draft k) only to learn that confidence: a real cost,
    and draft k sits in its KV afterwards. At the limit or after an end of sequence there
    is no such forward."""
    return 0 < k < min(limit, len(tokens)) and tokens[k] != PAD and conf[k] < min_conf
