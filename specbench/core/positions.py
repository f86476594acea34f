"""Per-position acceptance (docs/METHODS.md §7.3): at draft position k, how often the target
accepted the candidate, among the verifications that reached k.

A verification with `proposed` candidates of which it accepted `accepted` (accepted <= proposed)
reached positions 1 .. accepted + 1 (the last one only when it proposed that many) and accepted
1 .. accepted. So reached[k] = accepted[k] + rejections at k, and one pair of histograms (of the
accepted count, and of the position of the rejection) gives both; every producer of rows
(serial replay, the AS2D lockstep, native op logs) fills them the same way.
"""

from __future__ import annotations

import numpy as np


def histograms(proposed: np.ndarray, accepted: np.ndarray, length: int) -> tuple[np.ndarray, np.ndarray]:
    """(verifications that accepted exactly j, verifications rejected at position j), j = 0..length."""
    proposed, accepted = np.asarray(proposed, dtype=np.int64), np.asarray(accepted, dtype=np.int64)
    kept = np.bincount(accepted, minlength=length + 1)
    rejected = accepted < proposed
    at = np.bincount(accepted[rejected] + 1, minlength=length + 1)
    return kept, at


def counts_from_histograms(kept: np.ndarray, rejected_at: np.ndarray) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(reached, accepted) at positions 1..L, L the last position any verification reached."""
    accepted = np.cumsum(kept[::-1])[::-1][1:]  # accepted[k-1] = verifications with >= k accepted
    reached = accepted + rejected_at[1:]
    length = int(np.flatnonzero(reached)[-1]) + 1 if reached.any() else 0
    return tuple(int(v) for v in reached[:length]), tuple(int(v) for v in accepted[:length])


def position_counts(proposed, accepted) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(reached, accepted) at draft positions 1..L of one decode's verifications."""
    proposed = np.asarray(proposed, dtype=np.int64)
    length = int(proposed.max()) if len(proposed) else 0
    return counts_from_histograms(*histograms(proposed, accepted, length))


def summed(vectors, length: int | None = None) -> np.ndarray:
    """Per-position counts of several rows added up, positions 1..length (default: the longest)."""
    vectors = list(vectors)
    length = max((len(v) for v in vectors), default=0) if length is None else length
    total = np.zeros(length, dtype=np.int64)
    for vector in vectors:
        total[: min(len(vector), length)] += np.asarray(vector[:length], dtype=np.int64)
    return total

