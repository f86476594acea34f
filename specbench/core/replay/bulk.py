"""Replay a whole study at once: the same numbers as `replay.reference`, computed in bulk.

* Serial methods decide the same on every device, so each (window, configuration) is
  decoded once and its operations are priced for all devices with vectorised lookups.
  Target-only and same-vocabulary SD take a fast path driven by per-window arrays
  (accepted prefix and usable draft length at every t); SpecASR, cross-vocabulary SD and
  SD with the prompt-lookup drafter run their reference decision procedure.
* AS2D runs in lockstep across all (configuration, window) of a device (`lockstep`).

Results come back as a pandas DataFrame with one row per (device, configuration, window)
and the columns of `results.WindowResult`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from specbench.core.methods.base import Model
from specbench.core.methods.configs import As2dConfig, MethodConfig, SdConfig, TargetConfig, row_fields
from specbench.core.methods.sd import check_draft_rows
from specbench.core.positions import counts, histograms
from specbench.core.replay.lockstep import Simulation, simulate_lockstep
from specbench.core.replay.reference import decode_serial
from specbench.errors import SpecbenchError
from specbench.schemas.profiles import DEPTH_LINEAR, DeviceProfile
from specbench.schemas.results import ROW_FIELDS
from specbench.schemas.traces import PAD, TraceFile, WindowTrace
from specbench.schemas.windows import Window

Progress = Callable[[int], None]
"""Called with the number of window replays just finished."""
COST_FITS = ("median", "min", "max", DEPTH_LINEAR)
"""Fill-ins of what a profile did not measure (a row's `cost_fit`): median co-scheduling ratio
and depth-flat (every table's rows); min/max ratio; depth-linear (median ratio, costs beyond
the measured depths extended linearly from the nearest two)."""


def fit_profile(profile: DeviceProfile, fit: str) -> DeviceProfile:
    """`profile` priced with the fill-in `fit` (one of COST_FITS)."""
    if fit == DEPTH_LINEAR:
        return profile.with_depth_fit(DEPTH_LINEAR)
    return profile.with_ratio_fit(fit)


def trace_for(traces: Mapping[str, TraceFile], config: MethodConfig, window_id: str) -> tuple[str, WindowTrace]:
    """The trace a configuration replays: its drafter's, or the only one there is."""
    name = getattr(config, "drafter", None)
    if name is None:
        if isinstance(config, TargetConfig) or len(traces) == 1:
            name = next(iter(traces))
        else:
            raise SpecbenchError(f"{config.label}: several drafters traced ({', '.join(sorted(traces))}); "
                                 "name one with drafter=NAME")
    if name not in traces:
        raise SpecbenchError(f"{config.label}: no traces for drafter '{name}' (traced: {', '.join(sorted(traces))})")
    window = traces[name].windows.get(window_id)
    if window is None:
        raise SpecbenchError(f"{traces[name].path}: no trace for window '{window_id}'")
    return name, window


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
    stop = (drafts.tokens == PAD) | (drafts.conf < config.p_min)
    usable_arr = np.where(stop.any(axis=1), np.argmax(stop, axis=1), k_max)
    # Stopped on confidence at k: a real token with low confidence (not PAD) at column k.
    at_stop = np.minimum(usable_arr, k_max - 1)
    low_conf = (usable_arr < k_max) & (drafts.tokens[np.arange(n), at_stop] != PAD)
    usable, low_conf = usable_arr.tolist(), low_conf.tolist()
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
    stop = (tokens == PAD) | (conf < config.p_min)
    usable = np.where(stop.any(axis=1), np.argmax(stop, axis=1), k_max)
    # Stopped on confidence at k: a real token with low confidence (not PAD) at column k.
    low_conf = (usable < k_max) & (tokens[np.arange(len(tokens)), np.minimum(usable, k_max - 1)] != PAD)
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


def serial_ops(config: MethodConfig, trace: WindowTrace, cap: int, drafter: str) -> SerialOps:
    if isinstance(config, TargetConfig):
        return target_ops(trace)
    if isinstance(config, SdConfig) and (trace.drafts is None or (trace.drafts.cross is None
                                                                   and trace.drafts.lookup is None)):
        return sd_ops(trace, cap, config)  # cross-vocabulary and lookup SD take the reference procedure
    return reference_ops(config, trace, cap, drafter)


def _base_columns(profile: DeviceProfile, config: MethodConfig, windows: Sequence[Window],
                  window_traces: Sequence[WindowTrace]) -> dict:
    count = len(windows)
    # object columns: the parameters a method lacks stay None, and its integers stay integers
    fields = {key: pd.Series([value] * count, dtype=object) for key, value in row_fields(config).items()}
    return {"device": [profile.name] * count, **fields, **_window_columns(windows, window_traces),
            "placement": [profile.placement.key] * count}


def _window_columns(windows: Sequence[Window], window_traces: Sequence[WindowTrace]) -> dict:
    """The columns that depend only on the window and its trace."""
    return {"window_id": [w.window_id for w in windows], "window_sha256": [w.window_sha256 for w in windows],
            "dataset": [w.dataset for w in windows], "split": [w.split.value for w in windows],
            "tokens": np.array([t.n_tokens - 1 for t in window_traces], dtype=np.int64),
            # every method commits the trace's y, so it answers the trace's text
            "text": [t.text for t in window_traces]}


def replay_serial(windows: Sequence[Window], traces: Mapping[str, TraceFile], profiles: Sequence[DeviceProfile],
                  config: MethodConfig, progress: Progress | None = None) -> pd.DataFrame:
    used = [trace_for(traces, config, w.window_id) for w in windows]
    if isinstance(config, SdConfig) and all(trace.drafts is None or (trace.drafts.cross is None and
                                                                     trace.drafts.lookup is None) for _, trace in used):
        ops = sd_ops_many([trace for _, trace in used], [w.cap for w in windows], config)
    else:
        ops = [serial_ops(config, trace, w.cap, name) for w, (name, trace) in zip(windows, used, strict=False)]
    n = len(ops)
    t_owner = np.repeat(np.arange(n), [len(o.target_width) for o in ops])
    d_owner = np.repeat(np.arange(n), [len(o.drafter_width) for o in ops])
    t_width = np.concatenate([o.target_width for o in ops]) if ops else np.zeros(0, dtype=np.int64)
    t_depth = np.concatenate([o.target_depth for o in ops]).astype(np.float64) if ops else np.zeros(0)
    d_width = np.concatenate([o.drafter_width for o in ops]) if ops else np.zeros(0, dtype=np.int64)
    d_depth = np.concatenate([o.drafter_depth for o in ops]).astype(np.float64) if ops else np.zeros(0)
    d_all_rows = np.concatenate([o.drafter_all_rows if o.drafter_all_rows is not None else
                                 np.zeros(len(o.drafter_width), dtype=bool) for o in ops]) if ops else np.zeros(0, bool)
    t_accepted = np.concatenate([o.target_accepted for o in ops]) if ops else np.zeros(0, dtype=np.int64)
    positions = [pd.Series(c, dtype=object) for c in counts(*histograms(t_owner, t_width - 1, t_accepted, n))]
    frames = []
    for profile in profiles:
        v = np.zeros(n)
        np.add.at(v, t_owner, profile.target_costs.costs(t_width, t_depth))  # in op order, like the scalar sum
        outside = np.bincount(t_owner, weights=profile.target_costs.extrapolates(t_depth), minlength=n)
        d = np.zeros(n)
        if len(d_width):
            drafter = profile.drafter(getattr(config, "drafter", None))
            cost = drafter.costs.costs(d_width, d_depth)
            outside_d = drafter.costs.extrapolates(d_depth)
            if d_all_rows.any():
                cost[d_all_rows] = drafter.ingest_costs().costs(d_width[d_all_rows], d_depth[d_all_rows])
                outside_d[d_all_rows] = drafter.ingest_costs().extrapolates(d_depth[d_all_rows])
            np.add.at(d, d_owner, cost)
            outside += np.bincount(d_owner, weights=outside_d, minlength=n)
        columns = _base_columns(profile, config, windows, [trace for _, trace in used])
        columns["reached_at"], columns["accepted_at"] = positions
        columns.update(decode_s=d + v, target_forwards=[o.target_forwards for o in ops],
                       proposed=[o.proposed for o in ops], accepted=[o.accepted for o in ops],
                       multi_token_forwards=[o.multi_token_forwards for o in ops],
                       drafter_forwards=np.bincount(d_owner, minlength=n), d_s=d, v_s=v, o_s=np.zeros(n),
                       h_s=np.zeros(n), extrapolated=np.zeros(n, dtype=bool), lossless=[o.lossless for o in ops],
                       source=["replay"] * n, cost_fit=["median"] * n, depth_extrapolated=outside > 0)
        frames.append(pd.DataFrame(columns, columns=list(ROW_FIELDS)))
        if progress:
            progress(n)
    return pd.concat(frames, ignore_index=True)


def replay_as2d(windows: Sequence[Window], traces: Mapping[str, TraceFile], profile: DeviceProfile,
                configs: Sequence[As2dConfig], progress: Progress | None = None) -> pd.DataFrame:
    """Every (configuration, window) of AS2D on one device, simulated in lockstep."""
    sims = []
    # configurations of one drafter replay the same traces: their window columns are built once
    drafter_traces: dict[str | None, list[WindowTrace]] = {}
    drafter_columns: dict[str | None, dict[str, pd.Series]] = {}
    for config in configs:
        if config.drafter not in drafter_traces:
            window_traces = drafter_traces[config.drafter] = [trace_for(traces, config, w.window_id)[1]
                                                              for w in windows]
            drafter_columns[config.drafter] = {key: pd.Series(value) for key, value in
                                               _window_columns(windows, window_traces).items()}
        sims += [Simulation(config, i, trace) for i, trace in enumerate(drafter_traces[config.drafter])]
    if not sims:
        return pd.DataFrame(columns=list(ROW_FIELDS))
    result = simulate_lockstep(sims, windows, profile, progress)
    count = len(sims)
    base = {key: pd.concat([drafter_columns[c.drafter][key] for c in configs], ignore_index=True)
            for key in next(iter(drafter_columns.values()))}
    fields = [row_fields(config) for config in configs]
    for key in fields[0]:  # object columns, as in `_base_columns`: one value per configuration, window after window
        values = np.empty(len(configs), dtype=object)
        for i, config_fields in enumerate(fields):
            values[i] = config_fields[key]
        base[key] = pd.Series(np.repeat(values, len(windows)), dtype=object)
    base["device"] = pd.Series([profile.name] * count)
    base["placement"] = pd.Series([profile.placement.key] * count)
    base.update(decode_s=result.decode_s, target_forwards=result.target_forwards, proposed=result.proposed,
                accepted=result.accepted,
                multi_token_forwards=result.multi_token_forwards, drafter_forwards=result.drafter_forwards,
                d_s=result.d_s, v_s=result.v_s, o_s=result.o_s, h_s=result.h_s, extrapolated=result.extrapolated,
                lossless=np.ones(count, dtype=bool), source=np.full(count, "replay"),
                cost_fit=np.full(count, "median"), depth_extrapolated=result.depth_extrapolated,
                reached_at=pd.Series(result.reached_at, dtype=object),
                accepted_at=pd.Series(result.accepted_at, dtype=object))
    return pd.DataFrame(base, columns=list(ROW_FIELDS))


Task = tuple[str, MethodConfig | int]  # ("serial", its configuration) or ("as2d", a device's index)
"""An independent piece of a study: ("serial", config) or ("as2d", device index)."""


def study_tasks(profiles: Sequence[DeviceProfile], configs: Sequence[MethodConfig]) -> list[tuple[Task, int]]:
    """The independent pieces of a study with their sizes in window replays: each serial
    configuration (decoded once, priced on every device), and AS2D split by device."""
    n_as2d = sum(isinstance(c, As2dConfig) for c in configs)
    tasks: list[tuple[Task, int]] = [(("serial", c), len(profiles)) for c in configs if not isinstance(c, As2dConfig)]
    if n_as2d:
        tasks += [(("as2d", i), n_as2d) for i in range(len(profiles))]
    return tasks


def run_task(windows: Sequence[Window], traces: Mapping[str, TraceFile], profiles: Sequence[DeviceProfile],
             configs: Sequence[MethodConfig], task: Task) -> pd.DataFrame:
    kind, what = task
    if kind == "serial" and not isinstance(what, int):
        return replay_serial(windows, traces, profiles, what)
    if kind == "as2d" and isinstance(what, int):
        return replay_as2d(windows, traces, profiles[what], [c for c in configs if isinstance(c, As2dConfig)])
    raise ValueError(f"not a study task: {task!r}")


def replay_study(windows: Sequence[Window], traces: Mapping[str, TraceFile], profiles: Sequence[DeviceProfile],
                 configs: Sequence[MethodConfig], progress: Progress | None = None,
                 cost_fit: str = "median") -> pd.DataFrame:
    """All (device, configuration, window) replays of a study, one row each, in task order.
    `cost_fit` (one of COST_FITS) fills what the profile did not measure: median, or a
    sensitivity variant. `app.parallel_replay` runs the same tasks in several processes."""
    profiles = [fit_profile(p, cost_fit) for p in profiles]
    frames = []
    for task, size in study_tasks(profiles, configs):
        frames.append(run_task(windows, traces, profiles, configs, task))
        if progress:
            progress(size * len(windows))
    return study_rows(frames, cost_fit)


def study_rows(frames: Sequence[pd.DataFrame], cost_fit: str) -> pd.DataFrame:
    """The tasks' frames, in task order, as one table of rows."""
    if not frames:
        return pd.DataFrame(columns=list(ROW_FIELDS))
    rows = pd.concat(frames, ignore_index=True)
    rows["cost_fit"] = cost_fit
    return rows
