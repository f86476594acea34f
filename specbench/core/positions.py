"""Per-position acceptance (docs/METHODS.md §7.3 Acceptance, counts and time decomposition): at draft position k,
how often the target accepted the candidate, among the verifications that reached k.

A verification with `proposed` candidates of which it accepted `accepted` (accepted <= proposed)
reached positions 1 .. accepted + 1 (the last one only when it proposed that many) and accepted
1 .. accepted. So reached[k] = accepted[k] + rejections at k, and one pair of histograms (of the
accepted count, and of the position of the rejection) gives both; every producer of rows
(serial replay, the AS2D lockstep, native op logs) fills them the same way.
"""

from __future__ import annotations

import numpy as np


def histograms(owner, proposed, accepted, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Per owner (a decode, 0..count-1) of each verification: [count, L + 1] counts of the
    verifications that accepted exactly j, and of those rejected at position j (L: the most
    candidates any verification proposed)."""
    owner, proposed = np.asarray(owner, dtype=np.int64), np.asarray(proposed, dtype=np.int64)
    accepted = np.asarray(accepted, dtype=np.int64)
    width = (int(proposed.max()) if len(proposed) else 0) + 1
    kept = np.bincount(owner * width + accepted, minlength=count * width).reshape(count, width)
    rejected = accepted < proposed
    at = np.bincount(owner[rejected] * width + accepted[rejected] + 1, minlength=count * width)
    return kept, at.reshape(count, width)


def counts(kept: np.ndarray, rejected_at: np.ndarray) -> tuple[list[tuple[int, ...]], list[tuple[int, ...]]]:
    """(reached, accepted) at positions 1..L of each owner's histograms, L the last position
    that owner's verifications reached."""
    accepted = np.cumsum(kept[:, ::-1], axis=1)[:, ::-1][:, 1:]  # [:, k-1]: verifications with >= k accepted
    reached = accepted + rejected_at[:, 1:]
    some = reached > 0
    if not some.any():  # no verification had a candidate (or no position at all)
        return [()] * len(kept), [()] * len(kept)
    lengths = np.where(some.any(axis=1), reached.shape[1] - np.argmax(some[:, ::-1], axis=1), 0).tolist()
    return ([tuple(r[:n]) for r, n in zip(reached.tolist(), lengths, strict=False)],
            [tuple(a[:n]) for a, n in zip(accepted.tolist(), lengths, strict=False)])


def position_counts(proposed, accepted) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(reached, accepted) at draft positions 1..L of one decode's verifications."""
    reached, accepted = counts(*histograms(np.zeros(len(proposed), dtype=np.int64), proposed, accepted, 1))
    return reached[0], accepted[0]


def summed(vectors, length: int | None = None) -> np.ndarray:
    """Per-position counts of several rows added up, positions 1..length (default: the longest)."""
    vectors = list(vectors)
    length = max((len(v) for v in vectors), default=0) if length is None else length
    total = np.zeros(length, dtype=np.int64)
    for vector in vectors:
        total[: min(len(vector), length)] += np.asarray(vector[:length], dtype=np.int64)
    return total

