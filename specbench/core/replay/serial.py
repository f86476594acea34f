"""The operations of a serial decode (target-only, SD, SpecASR) as arrays, for `bulk`'s pricing.

Target-only and same-vocabulary SD and SpecASR walk their rounds on per-row arrays (usable
draft length and agreement with y at every t) instead of calling the decision procedure
(`core.methods`) round by round; tests check that each yields the procedure's operations
exactly. Cross-vocabulary SD and SD with the prompt-lookup drafter run the procedure itself
(`reference_ops`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from specbench.core.methods.base import Model, TraceDrafts
from specbench.core.methods.configs import MethodConfig, SdConfig, SpecAsrConfig, TargetConfig
from specbench.core.methods.sd import check_draft_rows
from specbench.core.methods.specasr import recycled_round
from specbench.core.replay.reference import decode_serial
from specbench.errors import SpecbenchError
from specbench.schemas.traces import PAD, WindowTrace


@dataclass
class SerialOps:
    """The operations of one serial decode, as arrays in execution order."""

    target_width: np.ndarray
    target_depth: np.ndarray
    drafter_width: np.ndarray
    drafter_depth: np.ndarray
    target_forwards: int
    proposed: int
    accepted: int
    multi_token_forwards: int
    lossless: bool = True
    target_accepted: np.ndarray | None = None
    """Accepted candidates of each target forward (for per-position acceptance)."""
    drafter_all_rows: np.ndarray | None = None
    """Per drafter forward: keeps a logits row per token (priced from the all-rows table)."""


def target_ops(trace: WindowTrace) -> SerialOps:
    steps = trace.n_tokens - 1
    empty = np.zeros(0, dtype=np.int64)
    return SerialOps(np.ones(steps, dtype=np.int64), trace.n_prompt + np.arange(steps, dtype=np.int64), empty, empty,
                     steps, 0, 0, 0, target_accepted=np.zeros(steps, dtype=np.int64))


def sd_ops(trace: WindowTrace, cap: int, config: SdConfig) -> SerialOps:
    """`methods.sd.decode_sd` on arrays: the same rounds and operations (tests check it)."""
    if trace.drafts is None:
        raise SpecbenchError(f"trace of window '{trace.window_id}' has no prefix-conditioned drafts")
    check_draft_rows(trace, config)
    y, drafts = trace.y, trace.drafts
    n, k_max = len(y), drafts.k_max
    y_pad = np.concatenate([y, np.full(k_max, -2, dtype=y.dtype)])
    match = drafts.tokens == y_pad[np.arange(n)[:, None] + np.arange(k_max)[None, :]]
    agree = np.where(match.all(axis=1), k_max, np.argmin(match, axis=1)).tolist()
    usable_arr, low_conf_arr = draft_stops(drafts.tokens, drafts.conf, config.p_min)
    usable, low_conf = usable_arr.tolist(), low_conf_arr.tolist()
    t, valid = 1, 0
    dp, tp = trace.n_prompt_drafter, trace.n_prompt
    t_width, t_depth, t_accepted, d_width, d_depth = [], [], [], [], []
    proposed = accepted_total = multi = 0
    while t < n:
        limit = min(config.width - 1, cap - t - 1)
        k = a = 0
        if limit > 0:
            drafts.require_row(t, trace.window_id, config.drafter or "drafter")
            k = min(limit, usable[t])
            a = min(agree[t], k)
            probe = 0 < k < limit and low_conf[t]
            d_width.append(t - valid)
            d_depth.append(dp + valid)
            d_width += [1] * (k - 1 + probe)
            d_depth += range(dp + t, dp + t + k - 1 + probe)
        committed = min(a + 1, n - t)
        t_width.append(k + 1)
        t_depth.append(tp + t - 1)
        t_accepted.append(a)
        proposed += k
        accepted_total += a
        multi += committed > 1
        if limit > 0:
            valid = t + min(a, max(k - 1, 0) + probe)
        t += committed
    return SerialOps(np.array(t_width), np.array(t_depth), np.array(d_width, dtype=np.int64),
                     np.array(d_depth, dtype=np.int64), len(t_width), proposed, accepted_total, multi,
                     target_accepted=np.array(t_accepted, dtype=np.int64))


def sd_ops_many(traces: Sequence[WindowTrace], caps: Sequence[int], config: SdConfig) -> list[SerialOps]:
    """`sd_ops` of many same-vocabulary windows at once (the same operations, tests check it):
    per-row quantities for all windows' rows as one array, the rounds' path (t -> t + committed)
    walked in plain Python, the operations built from the visited rows. A trace it cannot take
    as a whole (no drafts, rows too short, an unrecorded row) goes to `sd_ops` window by window,
    which refuses it with the same error in the same order."""
    if not traces:
        return []
    if any(t.drafts is None or config.width - 1 > t.drafts.k_max for t in traces):
        return [sd_ops(trace, cap, config) for trace, cap in zip(traces, caps, strict=False)]
    tables = [t.drafts for t in traces if t.drafts is not None]  # every trace's, checked just above
    k_max = max(d.k_max for d in tables)
    n = np.array([len(t.y) for t in traces], dtype=np.int64)
    first = np.concatenate([[0], np.cumsum(n)[:-1]])  # each window's first row
    owner = np.repeat(np.arange(len(traces)), n)
    local = np.arange(int(n.sum())) - first[owner]  # t within its window
    tokens = np.concatenate([_widen(d.tokens, k_max, PAD) for d in tables])
    conf = np.concatenate([_widen(d.conf, k_max, 0.0) for d in tables])
    # y of each window followed by k_max never-matching entries, so row t compares with y[t:t + k_max]
    y_pad = np.concatenate([np.concatenate([t.y, np.full(k_max, -2, dtype=t.y.dtype)]) for t in traces])
    match = tokens == y_pad[(first + np.arange(len(traces)) * k_max)[owner, None] + local[:, None] + np.arange(k_max)]
    agree = np.where(match.all(axis=1), k_max, np.argmin(match, axis=1))
    usable, low_conf = draft_stops(tokens, conf, config.p_min)
    limit = np.minimum(config.width - 1, np.asarray(caps, dtype=np.int64)[owner] - local - 1)
    k = np.where(limit > 0, np.minimum(limit, usable), 0)
    a = np.minimum(agree, k)
    probe = (0 < k) & (k < limit) & low_conf
    committed = np.minimum(a + 1, n[owner] - local)

    following = (np.arange(len(local)) + committed).tolist()
    visited: list[int] = []
    for start, count in zip(first.tolist(), n.tolist(), strict=False):
        row, end = start + 1, start + count
        while row < end:
            visited.append(row)
            row = following[row]
    rows = np.array(visited, dtype=np.int64)
    r_owner, t = owner[rows], local[rows]
    r_k, r_a, r_probe, drafting = k[rows], a[rows], probe[rows].astype(np.int64), limit[rows] > 0
    recorded = [(i, d.recorded) for i, d in enumerate(tables) if d.recorded is not None]
    if recorded and not all(rec[t[(r_owner == i) & drafting]].all() for i, rec in recorded):
        return [sd_ops(trace, cap, config) for trace, cap in zip(traces, caps, strict=False)]

    # Drafter: per drafting round, the catch-up forward from the last valid position, then
    # k - 1 (+ the probe) single-token forwards; the valid position moves after each round.
    valid_after = t + np.minimum(r_a, np.maximum(r_k - 1, 0) + r_probe)
    new_window = np.ones(len(rows), dtype=bool)
    new_window[1:] = r_owner[1:] != r_owner[:-1]
    valid_before = np.where(new_window, 0, np.concatenate([[0], valid_after[:-1]]))
    d_rounds = np.nonzero(drafting)[0]
    singles = np.maximum(r_k[d_rounds] - 1 + r_probe[d_rounds], 0)
    op_round = np.repeat(d_rounds, singles + 1)
    op_index = np.arange(len(op_round)) - np.repeat(np.cumsum(singles + 1) - (singles + 1), singles + 1)
    dp = np.array([trace.n_prompt_drafter for trace in traces], dtype=np.int64)[r_owner[op_round]]
    catch_up = op_index == 0
    d_width = np.where(catch_up, t[op_round] - valid_before[op_round], 1)
    d_depth = np.where(catch_up, dp + valid_before[op_round], dp + t[op_round] + op_index - 1)

    tp = np.array([trace.n_prompt for trace in traces], dtype=np.int64)[r_owner]
    t_bounds = np.searchsorted(r_owner, np.arange(len(traces) + 1))
    d_bounds = np.searchsorted(r_owner[op_round], np.arange(len(traces) + 1))
    t_width, t_depth, r_a = r_k + 1, tp + t - 1, r_a.astype(np.int64)
    proposed, accepted = (np.diff(np.concatenate([[0], np.cumsum(x)])[t_bounds]).tolist() for x in (r_k, r_a))
    multi = np.bincount(r_owner[committed[rows] > 1], minlength=len(traces)).tolist()
    out = []
    for i in range(len(traces)):
        lo, hi, d_lo, d_hi = t_bounds[i], t_bounds[i + 1], d_bounds[i], d_bounds[i + 1]
        out.append(SerialOps(t_width[lo:hi], t_depth[lo:hi], d_width[d_lo:d_hi], d_depth[d_lo:d_hi], int(hi - lo),
                             proposed[i], accepted[i], multi[i], target_accepted=r_a[lo:hi]))
    return out


def _widen(table: np.ndarray, columns: int, fill) -> np.ndarray:
    """`table` with `fill` columns appended up to `columns`."""
    if table.shape[1] == columns:
        return table
    return np.concatenate([table, np.full((table.shape[0], columns - table.shape[1]), fill, dtype=table.dtype)], axis=1)


def reference_ops(config: MethodConfig, trace: WindowTrace, cap: int, drafter: str) -> SerialOps:
    decoded = decode_serial(config, trace, cap, drafter)
    targets = [op for op in decoded.ops if op.model is Model.TARGET]
    drafters = [op for op in decoded.ops if op.model is Model.DRAFTER]
    return SerialOps(np.array([op.width for op in targets]), np.array([op.depth for op in targets]),
                     np.array([op.width for op in drafters], dtype=np.int64),
                     np.array([op.depth for op in drafters], dtype=np.int64), len(targets),
                     sum(op.proposed for op in targets), sum(op.accepted for op in targets),
                     sum(op.committed > 1 for op in targets), list(decoded.tokens) == trace.y.tolist(),
                     target_accepted=np.array([op.accepted for op in targets], dtype=np.int64),
                     drafter_all_rows=np.array([op.all_rows for op in drafters], dtype=bool))


def draft_stops(tokens: np.ndarray, conf: np.ndarray, min_conf: float) -> tuple[np.ndarray, np.ndarray]:
    """Per draft row (`base.usable_drafts` and `base.stopped_on_confidence` for every row at
    once): the drafts usable before the first PAD or confidence below `min_conf`, and whether
    that stop is a real token of low confidence (the drafter's extra forward on it)."""
    k_max = tokens.shape[1]
    stop = (tokens == PAD) | (conf < min_conf)
    usable = np.where(stop.any(axis=1), np.argmax(stop, axis=1), k_max)
    low_conf = (usable < k_max) & (tokens[np.arange(len(tokens)), np.minimum(usable, k_max - 1)] != PAD)
    return usable, low_conf


def specasr_ops(trace: WindowTrace, cap: int, config: SpecAsrConfig, drafter: str) -> SerialOps:
    """`methods.specasr.decode_specasr` on lists: the same rounds, operations and errors (tests
    check it); a fresh round reads the precomputed stops, a recycling round the recorded answer."""
    table = trace.drafts
    if table is None or table.cross is not None or table.lookup is not None:
        raise ValueError("specasr_ops takes same-vocabulary drafts; serial_ops routes the others")
    drafts = TraceDrafts(trace, drafter)
    y = trace.y.tolist()
    n = len(y)
    usable_arr, low_conf_arr = draft_stops(table.tokens, table.conf, config.tau)
    usable, low_conf = usable_arr.tolist(), low_conf_arr.tolist()
    dp, tp = trace.n_prompt_drafter, trace.n_prompt
    t_width, t_depth, t_accepted, d_width, d_depth, d_all = [], [], [], [], [], []
    proposed = accepted_total = multi = 0
    t, valid = 1, 0
    tail: list[int] = []
    while t < n:
        limit = min(config.k_max, cap - t - 1)
        candidates: list[int] = []
        in_kv = 0
        if limit > 0 and tail:
            answer = drafts.recycle(config, t, tuple(tail), limit)
            kept, n_new, probe = recycled_round(config, t, tail, answer, limit)
            d_width.append(t - valid + len(tail))
            d_depth.append(dp + valid)
            d_all.append(True)
            singles = n_new + probe - 1
            d_width += [1] * singles
            d_depth += range(dp + t + kept, dp + t + kept + singles)
            d_all += [False] * singles
            candidates = tail[:kept] + [int(c) for c in answer.cont[:n_new]]
            in_kv = kept + max(n_new - 1, 0) + probe
        elif limit > 0:
            table.require_row(t, trace.window_id, drafter)
            k = min(limit, usable[t])
            probe = 0 < k < limit and low_conf[t]
            singles = k - 1 + probe
            d_width.append(t - valid)
            d_depth.append(dp + valid)
            d_width += [1] * singles
            d_depth += range(dp + t, dp + t + singles)
            d_all += [False] * (1 + max(singles, 0))
            candidates = table.tokens[t, :k].tolist()
            in_kv = max(k - 1, 0) + probe
        accepted = 0
        while accepted < len(candidates) and t + accepted < n and candidates[accepted] == y[t + accepted]:
            accepted += 1
        committed = min(accepted + 1, n - t)
        t_width.append(len(candidates) + 1)
        t_depth.append(tp + t - 1)
        t_accepted.append(accepted)
        proposed += len(candidates)
        accepted_total += accepted
        multi += committed > 1
        if limit > 0:
            valid = t + min(accepted, in_kv)
        tail = candidates[accepted + 1:] if accepted < len(candidates) else []
        t += committed
    return SerialOps(np.array(t_width), np.array(t_depth), np.array(d_width, dtype=np.int64),
                     np.array(d_depth, dtype=np.int64), len(t_width), proposed, accepted_total, multi,
                     target_accepted=np.array(t_accepted, dtype=np.int64), drafter_all_rows=np.array(d_all, dtype=bool))


def serial_ops(config: MethodConfig, trace: WindowTrace, cap: int, drafter: str) -> SerialOps:
    if isinstance(config, TargetConfig):
        return target_ops(trace)
    if isinstance(config, SdConfig) and (trace.drafts is None or (trace.drafts.cross is None
                                                                   and trace.drafts.lookup is None)):
        return sd_ops(trace, cap, config)  # cross-vocabulary and lookup SD take the reference procedure
    if isinstance(config, SpecAsrConfig) and trace.drafts is not None and trace.drafts.cross is None \
            and trace.drafts.lookup is None:
        return specasr_ops(trace, cap, config, drafter)
    return reference_ops(config, trace, cap, drafter)
