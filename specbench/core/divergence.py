"""Which target forward committed a differing position, and whether the width of that forward explains
it as a near-tie (docs/METHODS.md §6.5 Divergences explained).

A native output differs from the reference (the target's width-1 greedy output) at position p when
the forward that committed p — a verification of width W, read at row r — ranked another token first.
The runner's `divergence` mode recomputes p both ways (width 1, and the decode's forwards replayed
with their widths) and measures δ, the largest difference between the two rows' logits over the
vocabulary. The expected token e beat the committed one g at width 1 by gap = l1[e] − l1[g] ≥ 0;
moving every logit by at most δ can reverse that order only when gap ≤ 2δ. That is the near-tie rule:
a divergence whose width-1 gap is within 2δ is the batched forward's rounding choosing the other side
of a tie; any other divergence (a wider gap, no committed token, a width-1 row that does not choose e)
is unexplained and fails the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from specbench.schemas.divergences import Divergence, Explanation, Margins


def committing_forward(forwards: Sequence[tuple[int, int]], position: int) -> int | None:
    """Index of the target forward ([width, accepted] in the order they ran) that committed `position`
    of the output, or None (position 0, which the prefill commits, or past the forwards). Forward k
    starting at output position t commits t .. t + accepted (its row j decides position t + j)."""
    t = 1
    for k, (width, accepted) in enumerate(forwards):
        if t <= position < t + width and position <= t + accepted:
            return k
        t += accepted + 1
    return None


def classify(expected: int | None, got: int | None, single_top1: int, single_gap: float,
             max_logit_diff: float) -> Explanation:
    """The near-tie rule (module docstring): `single_gap` = width-1 logit of `expected` minus that of `got`,
    `max_logit_diff` = δ between the width-1 row and the batched one."""
    if expected is None or got is None or single_top1 != expected:
        return Explanation.UNEXPLAINED
    return Explanation.NEAR_TIE if 0.0 <= single_gap <= 2.0 * max_logit_diff else Explanation.UNEXPLAINED


def explained(divergence: Divergence, margins: Margins | None) -> Divergence:
    """`divergence` classified from the runner's margins (None: they could not be measured)."""
    if margins is None:
        return replace(divergence, explanation=Explanation.UNEXPLAINED)
    return replace(divergence, margins=margins,
                   explanation=classify(divergence.expected, divergence.got, margins.single_top2[0],
                                        margins.single_gap, margins.max_logit_diff))
