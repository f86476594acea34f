"""The divergence rule (docs/METHODS.md §6.5 Divergences explained): which target forward committed a
position, and near-tie against unexplained on given margins."""

from __future__ import annotations

import pytest

from specbench.core.divergence import Explanation, classify, committing_forward

# SD W=5 on a window: y[0] from the prefill; forward 0 commits 1..5 (4 accepted + bonus), forward 1
# commits 6..7 (1 accepted + correction), forward 2 (width 1, a plain step near the cap) commits 8.
FORWARDS = [(5, 4), (5, 1), (1, 0)]


@pytest.mark.parametrize("position, forward", [(0, None), (1, 0), (5, 0), (6, 1), (7, 1), (8, 2), (9, None)])
def test_committing_forward_walks_what_each_forward_committed(position, forward):
    assert committing_forward(FORWARDS, position) == forward


def test_a_row_past_the_accepted_ones_commits_nothing():
    # forward 1 verified 4 candidates and accepted 1: its rows 2 to 4 (positions 8 to 10) decided nothing
    assert committing_forward([(5, 4), (5, 1)], 8) is None


@pytest.mark.parametrize("expected, got, top1, gap, delta, explanation", [
    (7, 9, 7, 0.010, 0.006, Explanation.NEAR_TIE),     # gap 0.010 <= 2 x 0.006: a shift of 0.006 each way swaps them
    (7, 9, 7, 0.012, 0.006, Explanation.NEAR_TIE),     # exactly 2 delta
    (7, 9, 7, 0.013, 0.006, Explanation.UNEXPLAINED),  # wider than the measured perturbation can close
    (7, 9, 7, 0.0, 0.0, Explanation.NEAR_TIE),         # an exact tie: the lowest id wins at width 1
    (7, 9, 9, 0.0, 1.0, Explanation.UNEXPLAINED),      # width 1 did not choose the reference's token
    (7, 9, 7, -0.1, 1.0, Explanation.UNEXPLAINED),     # inconsistent: g above e at width 1
    (7, None, 7, 0.0, 1.0, Explanation.UNEXPLAINED),   # the output ended first
    (None, 9, 7, 0.0, 1.0, Explanation.UNEXPLAINED),   # the output ran past the reference
])
def test_near_tie_when_the_width_1_gap_is_within_twice_the_logit_difference(expected, got, top1, gap, delta,
                                                                          explanation):
    assert classify(expected, got, top1, gap, delta) is explanation
