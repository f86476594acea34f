"""AS2D's target lane: candidates from published producer tokens, and cursor alignment.

The producer (drafter lane) runs on its own, from the input view and instruction only,
and publishes immutable batches; its timing is simulated by `reference.simulate_as2d`. This
module holds the decisions the target makes at each forward boundary: which published
tokens to verify and where the read cursor goes after a rejection. Only the cursor
moves; published tokens and the producer's state never change.

Alignment policies (config `align`), both causal — they read only committed target
tokens and published producer tokens:

* `anchor` (default): the last committed token is the root of the next forward. The
  cursor goes right after the root's match in the published stream, searched at the
  expected index e first, then e+1 .. e+H-1 (the producer had extra tokens), then e-1
  (the target inserted a token). With no match, it tests the substitution hypothesis
  (z[e] was the producer's wrong token for the root's position): candidates from e+1.
  Records before the last accepted or anchored token are exhausted and never matched.
* `positional`: no search; always the substitution hypothesis (an ablation baseline).

Every reused token is verified again under the current prefix.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specbench.core.methods.base import usable_drafts
from specbench.core.methods.configs import As2dConfig


@dataclass(frozen=True)
class Plan:
    """What the target does at one forward boundary."""

    start: int | None
    """Stream index of the first candidate (None: no usable position, a single step)."""
    candidates: tuple[int, ...]
    anchored: bool
    """The root was found in the stream (start - 1 holds it)."""
    searched: bool
    """An alignment search ran (charged `align_s`)."""


class As2dVerifier:
    """Cursor state and decisions of AS2D's target lane for one window."""

    def __init__(self, config: As2dConfig, cap: int):
        self.config = config
        self.cap = cap
        self.expected = 0
        """Stream index expected to hold the last committed token (y[0] <-> z[0] at the start)."""
        self.floor = 0
        """Stream indices below this are exhausted."""

    def plan(self, t: int, root: int, z: np.ndarray, pz: np.ndarray, published: int) -> Plan:
        """Decide the next forward from the committed count `t`, the root y[t-1] and a snapshot."""
        e = self.expected
        start, anchored, searched = self._align(root, z, published, e)
        room = min(self.config.budget, self.cap - t - 1)
        if start is None or start >= published or room <= 0:
            return Plan(start, (), anchored, searched)
        n = usable_drafts(z[start:published], pz[start:published], room, self.config.conf_stop)
        return Plan(start, tuple(int(v) for v in z[start:start + n]), anchored, searched)

    def _align(self, root: int, z: np.ndarray, published: int, e: int) -> tuple[int | None, bool, bool]:
        if self.config.align == "positional":
            return (e + 1 if e < published else None), False, False
        if self.floor <= e < published and z[e] == root:
            return e + 1, True, False
        order = list(range(e + 1, e + self.config.horizon)) + [e - 1]
        reachable = [k for k in order if self.floor <= k < published]
        for k in reachable:
            if z[k] == root:
                return k + 1, True, True
        return (e + 1 if e < published else None), False, bool(reachable)

    def observe(self, plan: Plan, accepted: int, committed: int) -> None:
        """Move the cursor after the forward committed `committed` tokens."""
        if plan.start is None:
            self.expected += committed
            return
        self.expected = plan.start + committed - 1
        if plan.anchored:
            self.floor = max(self.floor, plan.start)
        if accepted:
            self.floor = max(self.floor, plan.start + accepted)
