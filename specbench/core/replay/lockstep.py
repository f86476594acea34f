"""AS2D replay of many (configuration, window) simulations on one device, in lockstep.

One loop iteration is one target forward boundary of every unfinished simulation:
alignment, candidates, verification, then the two-lane clock — all as array operations.
Every floating-point operation is the one `reference._Lanes` and `CostTable.cost` perform, in
the same order, so the results equal the scalar reference bit for bit (tests check it exactly).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from specbench.core.methods.configs import As2dConfig
from specbench.core.positions import counts, histograms
from specbench.core.replay.reference import (
    ProducerTimeline,
    producer_costs,
    producer_forward_depths,
    timeline_from_forward_costs,
)
from specbench.errors import MissingCostError, SpecbenchError
from specbench.schemas.profiles import CostTable, DeviceProfile, interp_rows
from specbench.schemas.traces import WindowTrace
from specbench.schemas.windows import Window

NO_TOKEN = -3
"""Pads the stream and output matrices; never equals a token id or PAD."""


def dense_costs(table: CostTable, max_width: int, max_depth: int) -> np.ndarray:
    """[max_width + 1, max_depth + 1] costs at every integer depth; NaN rows where unmeasured."""
    matrix = table.matrix(max_width)
    widths = np.repeat(np.arange(max_width + 1), max_depth + 1)
    depths = np.tile(np.arange(max_depth + 1, dtype=np.float64), max_width + 1)
    return interp_rows(matrix, table.depths, widths, depths, table.depth_fit == "linear").reshape(
        max_width + 1, max_depth + 1)


@dataclass(frozen=True)
class Simulation:
    """One (configuration, window) to simulate."""

    config: As2dConfig
    window_index: int
    trace: WindowTrace


@dataclass
class LockstepResult:
    """Per-simulation outputs, as arrays in the order of the simulations given."""

    decode_s: np.ndarray
    d_s: np.ndarray
    v_s: np.ndarray
    o_s: np.ndarray
    h_s: np.ndarray
    rounds: np.ndarray
    proposed: np.ndarray
    accepted: np.ndarray
    multi_token_rounds: np.ndarray
    drafter_forwards: np.ndarray
    extrapolated: np.ndarray
    depth_extrapolated: np.ndarray
    reached_at: list[tuple[int, ...]]
    accepted_at: list[tuple[int, ...]]


def _pad_rows(rows: Sequence[np.ndarray], width: int, fill, dtype) -> np.ndarray:
    out = np.full((len(rows), width), fill, dtype=dtype)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return out


class _Study:
    """Constants shared by the simulations: padded streams, timelines, cost tables."""

    def __init__(self, sims: Sequence[Simulation], profile: DeviceProfile):
        self.max_b = max(s.config.budget for s in sims)
        self.max_h = max(s.config.horizon for s in sims)
        max_width = self.max_b + 1
        traces: dict[int, int] = {}
        trace_list: list[WindowTrace] = []
        for s in sims:
            if s.trace.producer is None:
                raise SpecbenchError(f"trace of window '{s.trace.window_id}' has no producer stream; AS2D needs one")
            traces.setdefault(id(s.trace), len(trace_list))
            if len(trace_list) < len(traces):
                trace_list.append(s.trace)
        self.trace_row = np.array([traces[id(s.trace)] for s in sims])
        longest = max(max(len(t.y), len(t.producer.tokens)) for t in trace_list)
        # Wide enough that cursor + budget and expected + horizon never leave the matrix.
        width = 2 * longest + self.max_b + self.max_h + 2
        # Kept flat and read at row * stride + column: one gather instead of numpy's two-index one.
        self.stride = width
        self.y = _pad_rows([t.y for t in trace_list], width, NO_TOKEN, np.int64).ravel()
        self.z = _pad_rows([t.producer.tokens for t in trace_list], width, NO_TOKEN, np.int64).ravel()
        self.pz = _pad_rows([t.producer.conf for t in trace_list], width, -1.0, np.float64).ravel()

        max_depth = max(max(t.n_prompt, t.n_prompt_drafter) + max(len(t.y), t.producer.steps) for t in trace_list)
        self.target_costs = dense_costs(profile.target_costs, max_width, max_depth)
        self.target_label = profile.target_costs.label
        self.target_outside = profile.target_costs.extrapolates(np.arange(max_depth + 1))
        drafter_costs: dict[str | None, np.ndarray] = {}
        ratios: dict[str | None, int] = {}
        ratio_tables = []
        timeline_index: dict[tuple[str | None, int, int], int] = {}
        timelines: list[ProducerTimeline] = []
        self.timeline_row = np.empty(len(sims), dtype=np.int64)
        self.ratio_row = np.empty(len(sims), dtype=np.int64)
        self.start_s = np.empty(len(sims))
        for i, s in enumerate(sims):
            key = s.config.drafter
            producer = producer_costs(profile, s.config, s.trace, max_width)
            self.start_s[i] = producer.startup_s
            if key not in ratios:
                ratios[key] = len(ratio_tables)
                ratio_tables.append(producer.cosched.dense(max_width, max_depth))
                drafter_costs[key] = dense_costs(profile.drafter(s.config.drafter).costs, 1, max_depth)[1]
            self.ratio_row[i] = ratios[key]
            t_key = (s.config.drafter, s.config.batch, s.window_index)
            if t_key not in timeline_index:
                timeline_index[t_key] = len(timelines)
                stream = s.trace.producer
                depths = producer_forward_depths(stream.steps, s.trace.n_prompt_drafter).astype(np.int64)
                forward_s = drafter_costs[key][depths]
                if np.isnan(forward_s).any():
                    profile.drafter(s.config.drafter).costs.require(1)
                timelines.append(timeline_from_forward_costs(stream, forward_s, s.config.batch, producer.publish_s))
            self.timeline_row[i] = timeline_index[t_key]
        self.timelines = timelines
        # Padded with inf, so counting the entries at or below a work level is a searchsorted.
        longest_cum = max(len(t.cum) for t in timelines)
        self.cum = _pad_rows([t.cum for t in timelines], longest_cum, np.inf, np.float64)
        self.step_starts = _pad_rows([t.cum[:-1] for t in timelines], longest_cum, np.inf, np.float64)
        pubs = [t.publish_work for t in timelines]
        self.publish_work = _pad_rows(pubs, max((len(p) for p in pubs), default=0) + 1, np.inf, np.float64)
        self.rho_t = np.stack([r[0] for r in ratio_tables]).ravel()  # flat, read at `cell`
        self.rho_d = np.stack([r[1] for r in ratio_tables]).ravel()
        self.rho_shape = ratio_tables[0][0].shape
        self.rho_extrapolated = np.stack([r[2] for r in ratio_tables])
        self.total = np.array([t.total for t in timelines])[self.timeline_row]


class _State:
    """Per-simulation constants and mutable state, as arrays."""

    def __init__(self, sims: Sequence[Simulation], windows: Sequence[Window], profile: DeviceProfile,
                 study: _Study):
        count = len(sims)

        def column(values, dtype):
            return np.fromiter(values, dtype=dtype, count=count)

        self.row = study.trace_row
        self.timeline = study.timeline_row
        self.ratio_row = study.ratio_row
        self.total = study.total
        self.n = column((len(s.trace.y) for s in sims), np.int64)
        self.m = column((len(s.trace.producer.tokens) for s in sims), np.int64)
        self.cap = column((windows[s.window_index].cap for s in sims), np.int64)
        self.n_prompt = column((s.trace.n_prompt for s in sims), np.int64)
        self.budget = column((s.config.budget for s in sims), np.int64)
        self.batch = column((s.config.batch for s in sims), np.int64)
        self.conf_stop = column((s.config.conf_stop for s in sims), np.float64)
        self.horizon = column((s.config.horizon for s in sims), np.int64)
        self.positional = column((s.config.align == "positional" for s in sims), bool)
        self.start_s = study.start_s
        self.align_s = np.full(count, profile.overheads.align_s)
        ints = ("t", "expected", "floor", "batches", "rounds", "proposed", "accepted", "multi")
        for name in ints:
            setattr(self, name, np.zeros(count, dtype=np.int64))
        self.t += 1  # y[0] comes from the prefill
        for name in ("time", "work", "d", "v", "o", "h"):
            setattr(self, name, np.zeros(count))
        self.extrapolated = np.zeros(count, dtype=bool)
        self.depth_extrapolated = np.zeros(count, dtype=bool)
        # every verification's (simulation, candidates, accepted), for positions.histograms at the end
        self.verified: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []


def _advance_publication(s: _State, study: _Study, idx: np.ndarray) -> None:
    """Count the batches whose producer work is done (one more per pass until none); none
    before the producer thread starts (`reference._Lanes.published`)."""
    idx = idx[s.time[idx] >= s.start_s[idx]]
    while len(idx):
        ready = study.publish_work[s.timeline[idx], s.batches[idx]] <= s.work[idx]
        idx = idx[ready]
        s.batches[idx] += 1


def _run(s: _State, idx: np.ndarray, solo: np.ndarray, rt: np.ndarray, rd: np.ndarray, forward: bool) -> None:
    """`reference._Lanes.run` for the simulations `idx` (same operations, same order)."""
    time, work, total, start = s.time[idx], s.work[idx], s.total[idx], s.start_s[idx]
    lane = s.v if forward else s.h
    lane_values = lane[idx]
    remaining = solo
    before = time < start
    if before.any():
        alone = np.where(before, np.minimum(start - time, remaining), 0.0)
        time = time + alone
        lane_values = lane_values + alone
        remaining = np.where(before & (alone == remaining), 0.0, remaining - alone)
    shared_mask = (remaining > 0) & (work < total)
    if shared_mask.any():
        need_target = remaining * rt
        need_producer = (total - work) * rd
        target_first = need_target < need_producer
        shared = np.where(shared_mask, np.where(target_first, need_target, need_producer), 0.0)
        new_work = np.where(target_first, np.minimum(work + shared / rd, total), total)
        new_remaining = np.where(target_first | (need_target == need_producer), 0.0, remaining - shared / rt)
        work = np.where(shared_mask, new_work, work)
        remaining = np.where(shared_mask, new_remaining, remaining)
        time = time + shared
        s.d[idx] += shared
        if forward:
            lane_values = lane_values + shared
            s.o[idx] += shared
    remaining = np.where(remaining > 0, remaining, 0.0)  # what is left runs alone
    time = time + remaining
    lane[idx] = lane_values + remaining
    s.time[idx] = time
    s.work[idx] = work


def _align(s: _State, study: _Study, idx: np.ndarray, root: np.ndarray, published: np.ndarray):
    """`As2dVerifier._align` for `idx`: (start or -1, anchored, searched)."""
    row, e, floor = s.row[idx], s.expected[idx], s.floor[idx]
    n = len(idx)
    base = row * study.stride
    e_ok = (floor <= e) & (e < published) & (study.z[base + e] == root)
    fallback = np.where(e < published, e + 1, -1)
    positional = s.positional[idx]
    start = np.where(e_ok & ~positional, e + 1, fallback)
    anchored = e_ok & ~positional
    searched = np.zeros(n, dtype=bool)
    look = np.nonzero(~e_ok & ~positional)[0]
    if len(look):
        offsets = np.concatenate([np.arange(1, study.max_h), [-1]])
        k = e[look, None] + offsets[None, :]
        in_window = (offsets[None, :] < s.horizon[idx[look], None]) | (offsets[None, :] == -1)
        reachable = in_window & (k >= floor[look, None]) & (k < published[look, None])
        hits = reachable & (study.z[base[look, None] + k] == root[look, None])  # k < 0 only where unreachable
        found = hits.any(axis=1)
        first = k[np.arange(len(look)), np.argmax(hits, axis=1)]
        start[look] = np.where(found, first + 1, fallback[look])
        anchored[look] = found
        searched[look] = reachable.any(axis=1)
    return start, anchored, searched


def _round(s: _State, study: _Study, idx: np.ndarray) -> None:
    """One forward boundary and forward of every simulation in `idx`."""
    row, t = s.row[idx], s.t[idx]
    published = np.minimum(s.m[idx], s.batches[idx] * s.batch[idx])
    base = row * study.stride
    root = study.y[base + t - 1]
    start, anchored, searched = _align(s, study, idx, root, published)

    # Candidates: published tokens from `start`, at most B and the cap's room, cut at the confidence stop.
    room = np.minimum(s.budget[idx], s.cap[idx] - t - 1)
    length = np.where((start >= 0) & (start < published) & (room > 0), np.minimum(room, published - start), 0)
    accepted = np.zeros(len(idx), dtype=np.int64)
    some = np.nonzero(length > 0)[0]
    if len(some):  # only simulations with candidates, only as wide as the widest of them
        c_base, c_length = base[some, None], length[some]
        j = np.arange(int(c_length.max()))[None, :]
        positions = c_base + start[some, None] + j
        in_candidates = j < c_length[:, None]
        low = in_candidates & (study.pz[positions] < s.conf_stop[idx[some], None])
        c_length = np.where(low.any(axis=1), np.argmax(low, axis=1), c_length)
        in_candidates = j < c_length[:, None]
        mismatch = in_candidates & (study.z[positions] != study.y[c_base + t[some, None] + j])
        length[some] = c_length
        accepted[some] = np.where(mismatch.any(axis=1), np.argmax(mismatch, axis=1), c_length)
    committed = np.minimum(accepted + 1, s.n[idx] - t)

    # Time: the alignment search (if any), then the forward, the lanes sharing the processors.
    overhead = searched & (s.align_s[idx] > 0)
    if overhead.any():
        sub = idx[overhead]
        ones = np.ones(len(sub))
        _run(s, sub, s.align_s[sub], ones, ones, forward=False)
    width = length + 1
    depth = s.n_prompt[idx] + t - 1
    solo = study.target_costs[width, depth]
    if np.isnan(solo).any():
        bad = int(np.argmax(np.isnan(solo)))
        raise MissingCostError(f"{study.target_label}: no measured cost for width {width[bad]}",
                               hint="profile the device with a larger --max-width")
    ratio_row = s.ratio_row[idx]
    cell = (ratio_row * study.rho_shape[0] + width) * study.rho_shape[1] + depth
    _run(s, idx, solo, study.rho_t[cell], study.rho_d[cell], forward=True)
    s.extrapolated[idx] |= study.rho_extrapolated[ratio_row, width]
    s.depth_extrapolated[idx] |= study.target_outside[depth]

    # Commit and move the cursor (As2dVerifier.observe).
    s.t[idx] = t + committed
    e, floor = s.expected[idx], s.floor[idx]
    s.expected[idx] = np.where(start < 0, e + committed, start + committed - 1)
    floor = np.where(anchored, np.maximum(floor, start), floor)
    s.floor[idx] = np.where(accepted > 0, np.maximum(floor, start + accepted), floor)
    s.rounds[idx] += 1
    s.proposed[idx] += length
    s.accepted[idx] += accepted
    s.multi[idx] += committed > 1
    s.verified.append((idx, length, accepted))
    _advance_publication(s, study, idx)


def _producer_ends(sims: Sequence[Simulation], profile: DeviceProfile, study: _Study,
                   s: _State) -> tuple[np.ndarray, np.ndarray]:
    """`ProducerTimeline.forwards_done` and `reference.producer_depth_extrapolated` of every
    simulation at its end, as array operations (integer counts and flags: exact)."""
    work = s.work[:, None]
    steps_done = (study.cum[s.timeline] <= work).sum(axis=1) - 1
    forwards = np.maximum(steps_done - 1, 0)
    started = (study.step_starts[s.timeline] < work).sum(axis=1)
    depth0 = np.fromiter((sim.trace.n_prompt_drafter for sim in sims), dtype=np.int64, count=len(sims))
    outside = np.zeros(len(sims), dtype=bool)
    drafters = [sim.config.drafter for sim in sims]
    for name in dict.fromkeys(drafters):
        mine = np.array([d == name for d in drafters])
        costs = profile.drafter(name).costs
        outside[mine] = (started[mine] > 1) & (costs.extrapolates(depth0[mine]) |
                                               costs.extrapolates(depth0[mine] + started[mine] - 2))
    return forwards.astype(np.int64), outside


def simulate_lockstep(sims: Sequence[Simulation], windows: Sequence[Window], profile: DeviceProfile,
                      progress: Callable[[int], None] | None = None) -> LockstepResult:
    study = _Study(sims, profile)
    s = _State(sims, windows, profile, study)
    _advance_publication(s, study, np.arange(len(sims)))
    active = np.nonzero(s.t < s.n)[0]
    if progress and len(sims) - len(active):
        progress(len(sims) - len(active))
    while len(active):
        _round(s, study, active)
        still = s.t[active] < s.n[active]
        if progress and not still.all():
            progress(int((~still).sum()))
        active = active[still]
    forwards, producer_outside = _producer_ends(sims, profile, study, s)
    s.depth_extrapolated |= producer_outside
    owner, length, accepted = (np.concatenate(part) for part in zip(*s.verified)) if s.verified else ([], [], [])
    reached_at, accepted_at = counts(*histograms(owner, length, accepted, len(sims)))
    return LockstepResult(s.time, s.d, s.v, s.o, s.h, s.rounds, s.proposed, s.accepted, s.multi, forwards,
                          s.extrapolated, s.depth_extrapolated, reached_at, accepted_at)
