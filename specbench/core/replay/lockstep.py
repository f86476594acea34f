"""AS2D replay of many (configuration, window) simulations on one device, in lockstep.

One loop iteration is one target forward boundary of every unfinished simulation:
alignment, candidates, verification, then the two-lane clock — all as array operations.
Every floating-point operation is the one `reference._Lanes` and `CostTable.cost` perform, in
the same order, so the results equal the scalar reference bit for bit (tests check it exactly).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from specbench.core.methods.configs import As2dConfig
from specbench.core.positions import counts, histograms
from specbench.core.pricing import CostFit, CostTable, interp_rows
from specbench.core.replay.reference import (
    ProducerCosts,
    ProducerTimeline,
    producer_costs,
    producer_forward_depths,
    scaled_timeline,
    timeline_from_forward_costs,
)
from specbench.errors import MissingCostError, SpecbenchError
from specbench.schemas.profiles import DeviceProfile
from specbench.schemas.traces import ProducerStream, WindowTrace
from specbench.schemas.windows import Window

NO_TOKEN = -3
"""Pads the stream and output matrices; never equals a token id or PAD."""
_BLOCKS = (2, 6, 14, 1 << 62)
"""Column blocks of the candidate comparison (`_agreement`)."""


def dense_costs(table: CostTable, max_width: int, max_depth: int) -> np.ndarray:
    """[max_width + 1, max_depth + 1] costs at every integer depth; NaN rows where unmeasured."""
    matrix = table.matrix(max_width)
    widths = np.repeat(np.arange(max_width + 1), max_depth + 1)
    depths = np.tile(np.arange(max_depth + 1, dtype=np.float64), max_width + 1)
    return interp_rows(matrix, table.depths, widths, depths, table.depth_fit == CostFit.DEPTH_LINEAR).reshape(
        max_width + 1, max_depth + 1)


@dataclass(frozen=True)
class Simulation:
    """One (configuration, window) to simulate."""

    config: As2dConfig
    window_index: int
    trace: WindowTrace
    producer_scale: float = 1.0
    """The producer's priced timeline scaled by this (`reference.scaled_timeline`): one node of the pace scatter."""


@dataclass
class LockstepResult:
    """Per-simulation outputs, as arrays in the order of the simulations given."""

    decode_s: np.ndarray
    d_s: np.ndarray
    v_s: np.ndarray
    o_s: np.ndarray
    h_s: np.ndarray
    target_forwards: np.ndarray
    proposed: np.ndarray
    accepted: np.ndarray
    multi_token_forwards: np.ndarray
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
        # One pass over the simulations: their configuration, trace and window, as rows of the
        # distinct ones; everything else is looked up per configuration, trace or timeline.
        configs: dict[int, int] = {}
        traces: dict[int, int] = {}
        self.configs: list[As2dConfig] = []
        trace_list: list[WindowTrace] = []
        producers_of_trace: list[ProducerStream] = []  # trace_list's producer streams, checked present
        config_row, trace_row, window_index = [], [], []
        for s in sims:
            c = configs.get(id(s.config))
            if c is None:
                c = configs[id(s.config)] = len(self.configs)
                self.configs.append(s.config)
            r = traces.get(id(s.trace))
            if r is None:
                if s.trace.producer is None:
                    raise SpecbenchError(f"trace of window '{s.trace.window_id}' has no producer stream; "
                                         "AS2D needs one")
                r = traces[id(s.trace)] = len(trace_list)
                trace_list.append(s.trace)
                producers_of_trace.append(s.trace.producer)
            config_row.append(c)
            trace_row.append(r)
            window_index.append(s.window_index)
        self.config_row = np.array(config_row, dtype=np.int64)
        self.trace_row = np.array(trace_row, dtype=np.int64)
        self.window_index = np.array(window_index, dtype=np.int64)
        self.traces = trace_list
        self.producers = producers_of_trace
        self.max_b = max(c.budget for c in self.configs)
        self.max_h = max(c.horizon for c in self.configs)
        max_width = self.max_b + 1
        longest = max(max(len(t.y), len(p.tokens)) for t, p in zip(trace_list, producers_of_trace, strict=True))
        # Wide enough that cursor + budget and expected + horizon never leave the matrix.
        width = 2 * longest + self.max_b + self.max_h + 2
        # Kept flat and read at row * stride + column: one gather instead of numpy's two-index one.
        self.stride = width
        self.y = _pad_rows([t.y for t in trace_list], width, NO_TOKEN, np.int64).ravel()
        self.z = _pad_rows([p.tokens for p in producers_of_trace], width, NO_TOKEN, np.int64).ravel()
        self.pz = _pad_rows([p.conf for p in producers_of_trace], width, -1.0, np.float64).ravel()

        max_depth = max(max(t.n_prompt, t.n_prompt_drafter) + max(len(t.y), p.steps)
                        for t, p in zip(trace_list, producers_of_trace, strict=True))
        # the target's forwards at their price: each forward and the host work after it (`CostTable.price`)
        self.target_costs = dense_costs(profile.target_costs, max_width, max_depth) + profile.target_costs.hosts(
            np.arange(max_width + 1))[:, None]
        self.target_label = profile.target_costs.label
        self.target_outside = profile.target_costs.extrapolates(np.arange(max_depth + 1))
        # The producer's costs depend on the drafter and whether the trace's drafter is the lookup one.
        lookup = np.array([t.drafts is not None and t.drafts.lookup is not None for t in trace_list])
        drafters = list(dict.fromkeys(c.drafter for c in self.configs))
        config_drafter = np.array([drafters.index(c.drafter) for c in self.configs], dtype=np.int64)
        sim_drafter, sim_lookup = config_drafter[self.config_row], lookup[self.trace_row]
        producers: dict[tuple[int, bool], ProducerCosts] = {}
        startup = np.zeros((len(drafters), 2))
        for i in np.unique(sim_drafter * 2 + sim_lookup, return_index=True)[1]:
            key = (int(sim_drafter[i]), bool(sim_lookup[i]))
            producers[key] = producer_costs(profile, sims[i].config, sims[i].trace, max_width)
            startup[key[0], int(key[1])] = producers[key].startup_s
        self.start_s = startup[sim_drafter, sim_lookup.astype(np.int64)]
        # Ratios and drafter costs per drafter, from its first simulation (in order).
        ratio_tables: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        after_rows: list[list[float]] = []  # the target's ratio alone after the producer, per width
        drafter_costs: dict[int, np.ndarray] = {}
        ratio_of_drafter = np.zeros(len(drafters), dtype=np.int64)
        for d in range(len(drafters)):  # drafters in order of their first simulation
            first = int(np.argmax(sim_drafter == d))
            ratio_of_drafter[d] = len(ratio_tables)
            cosched = producers[d, bool(sim_lookup[first])].cosched
            ratio_tables.append(cosched.dense(max_width, max_depth))
            after_rows.append([cosched.after(w) for w in range(max_width + 1)])
            drafter_costs[d] = dense_costs(profile.drafter(drafters[d]).costs, 1, max_depth)[1]
        self.ratio_row = ratio_of_drafter[sim_drafter]
        # One producer timeline per (drafter, batch, window), from its first simulation (in order).
        pairs = list(dict.fromkeys((config_drafter[i], c.batch) for i, c in enumerate(self.configs)))
        config_pair = np.array([pairs.index((config_drafter[i], c.batch)) for i, c in enumerate(self.configs)])
        scales, scale_row = np.unique(np.array([s.producer_scale for s in sims]), return_inverse=True)
        codes = ((config_pair[self.config_row] * len(scales) + scale_row) * (int(self.window_index.max()) + 1)
                 + self.window_index)
        _, firsts, self.timeline_row = np.unique(codes, return_index=True, return_inverse=True)
        timeline_of_row: dict[int, ProducerTimeline] = {}
        for row in np.argsort(firsts, kind="stable"):
            i = int(firsts[row])
            trace, config = sims[i].trace, sims[i].config
            producer = producers_of_trace[int(self.trace_row[i])]
            depths = producer_forward_depths(producer.steps, trace.n_prompt_drafter).astype(np.int64)
            forward_s = drafter_costs[int(sim_drafter[i])][depths]
            if np.isnan(forward_s).any():
                profile.drafter(config.drafter).costs.require(1)
            costs = producers[int(sim_drafter[i]), bool(sim_lookup[i])]
            timeline_of_row[int(row)] = scaled_timeline(
                timeline_from_forward_costs(producer, forward_s, config.batch, costs.publish_s, costs.step_s),
                sims[i].producer_scale)
        # argsort is a permutation of the rows, so every row has its timeline
        timelines = [timeline_of_row[row] for row in range(len(firsts))]
        self.timelines = timelines
        # Padded with inf, so counting the entries at or below a work level is a searchsorted.
        longest_cum = max(len(t.cum) for t in timelines)
        self.cum = _pad_rows([t.cum for t in timelines], longest_cum, np.inf, np.float64)
        self.step_starts = _pad_rows([t.cum[:-1] for t in timelines], longest_cum, np.inf, np.float64)
        pubs = [t.publish_work for t in timelines]
        self.publish_stride = max((len(p) for p in pubs), default=0) + 1
        self.publish_work = _pad_rows(pubs, self.publish_stride, np.inf, np.float64).ravel()
        self.rho_t = np.stack([r[0] for r in ratio_tables]).ravel()  # flat, read at `cell`
        self.rho_d = np.stack([r[1] for r in ratio_tables]).ravel()
        self.rho_shape = ratio_tables[0][0].shape
        self.rho_extrapolated = np.stack([r[2] for r in ratio_tables])
        self.rho_after = np.array(after_rows).ravel()  # flat, read at ratio_row * rho_shape[0] + width
        self.total = np.array([t.total for t in timelines])[self.timeline_row]
        self.low_stride = len(self.pz)
        self._next_low: dict[float, int] = {}  # confidence stop -> its row of next_low
        self.next_low = np.zeros(0, dtype=np.int64)

    def low_row(self, config_row: np.ndarray, configs: Sequence[As2dConfig]) -> np.ndarray:
        """Per simulation, its row of `next_low` (flat, read at row * low_stride + position):
        the first position at or after each position of z whose confidence is below the
        configuration's stop (beyond the stream where none is)."""
        rows = []
        for config in configs:
            if config.conf_stop not in self._next_low:
                self._next_low[config.conf_stop] = len(self._next_low)
                positions = np.where(self.pz < config.conf_stop, np.arange(len(self.pz)), len(self.pz))
                self.next_low = np.concatenate([self.next_low, np.minimum.accumulate(positions[::-1])[::-1]])
            rows.append(self._next_low[config.conf_stop])
        return np.array(rows, dtype=np.int64)[config_row]


class _State:
    """Per-simulation constants and mutable state, as arrays. The simulation loop works on the
    unfinished simulations only, compacted into a state of their own (`take`), so every array
    operation runs on contiguous arrays instead of gathering and scattering through an index."""

    CONSTANTS = ("ids", "row", "timeline", "ratio_row", "total", "n", "m", "cap", "n_prompt", "budget", "batch",
                 "low_row", "horizon", "positional", "start_s", "align_s")
    CURSORS = ("t", "expected", "floor", "batches")
    RESULTS = ("time", "work", "d", "v", "o", "h", "target_forwards", "proposed", "accepted", "multi", "extrapolated",
               "depth_extrapolated")
    # Set by name (CURSORS, RESULTS) in __init__ and take: one array per simulation each.
    t: np.ndarray
    expected: np.ndarray
    floor: np.ndarray
    batches: np.ndarray
    time: np.ndarray
    work: np.ndarray
    d: np.ndarray
    v: np.ndarray
    o: np.ndarray
    h: np.ndarray
    target_forwards: np.ndarray
    proposed: np.ndarray
    accepted: np.ndarray
    multi: np.ndarray

    def __init__(self, sims: Sequence[Simulation], windows: Sequence[Window], profile: DeviceProfile,
                 study: _Study):
        count = len(sims)
        config_row, config_list = study.config_row, study.configs

        def per_config(attribute, dtype):
            return np.array([getattr(c, attribute) for c in config_list], dtype=dtype)[config_row]

        def per_trace(values, dtype):
            return np.array(values, dtype=dtype)[study.trace_row]

        self.ids = np.arange(count)
        self.row = study.trace_row
        self.timeline = study.timeline_row
        self.ratio_row = study.ratio_row
        self.total = study.total
        self.n = per_trace([len(t.y) for t in study.traces], np.int64)
        self.m = per_trace([len(p.tokens) for p in study.producers], np.int64)
        self.cap = np.array([w.cap for w in windows], dtype=np.int64)[study.window_index]
        self.n_prompt = per_trace([t.n_prompt for t in study.traces], np.int64)
        self.budget = per_config("budget", np.int64)
        self.batch = per_config("batch", np.int64)
        self.low_row = study.low_row(config_row, config_list)
        self.horizon = per_config("horizon", np.int64)
        self.positional = np.array([c.align == "positional" for c in config_list], dtype=bool)[config_row]
        self.start_s = study.start_s
        self.align_s = np.array([profile.overheads_of(c.drafter).align_s for c in config_list])[config_row]
        for name in self.CURSORS + ("target_forwards", "proposed", "accepted", "multi"):
            setattr(self, name, np.zeros(count, dtype=np.int64))
        self.t += 1  # y[0] comes from the prefill
        for name in ("time", "work", "d", "v", "o", "h"):
            setattr(self, name, np.zeros(count))
        self.extrapolated = np.zeros(count, dtype=bool)
        self.depth_extrapolated = np.zeros(count, dtype=bool)
        # every verification's (simulation, candidates, accepted), for positions.histograms at the end
        self.verified: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def take(self, which: np.ndarray) -> _State:
        """The simulations `which` (indices or a mask) as a state of their own, sharing `verified`."""
        part = object.__new__(_State)
        for name in self.CONSTANTS + self.CURSORS + self.RESULTS:
            setattr(part, name, getattr(self, name)[which])
        part.verified = self.verified
        return part

    def retire(self, done: np.ndarray, into: _State) -> _State:
        """Write the results of the simulations `done` (a mask) into `into`, the state of all
        simulations; the rest, as a state of their own."""
        ids = self.ids[done]
        for name in self.RESULTS:
            getattr(into, name)[ids] = getattr(self, name)[done]
        return self.take(~done)


def _advance_publication(s: _State, study: _Study) -> None:
    """Count the batches whose producer work is done (one more per pass until none); none
    before the producer thread starts (`reference._Lanes.published`)."""
    idx = np.nonzero(s.time >= s.start_s)[0]
    while len(idx):
        ready = study.publish_work[s.timeline[idx] * study.publish_stride + s.batches[idx]] <= s.work[idx]
        idx = idx[ready]
        s.batches[idx] += 1


def _run(s: _State, idx: np.ndarray | None, solo: np.ndarray, rt: np.ndarray, rd: np.ndarray,
         forward: bool, ra: np.ndarray | None = None) -> None:
    """`reference._Lanes.run` for the simulations `idx` (None: all of them; same operations,
    same order)."""
    lane_name = "v" if forward else "h"
    if idx is None:
        time, work, total, start, lane_values = s.time, s.work, s.total, s.start_s, getattr(s, lane_name)
    else:
        time, work, total, start = s.time[idx], s.work[idx], s.total[idx], s.start_s[idx]
        lane_values = getattr(s, lane_name)[idx]
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
        if idx is None:
            s.d += shared
        else:
            s.d[idx] += shared
        if forward:
            lane_values = lane_values + shared
            if idx is None:
                s.o += shared
            else:
                s.o[idx] += shared
    remaining = np.where(remaining > 0, remaining, 0.0)  # what is left runs alone, the producer done
    if ra is not None:
        remaining = remaining * ra
    time = time + remaining
    lane_values = lane_values + remaining
    if idx is None:
        setattr(s, lane_name, lane_values)
        s.time, s.work = time, work
    else:
        getattr(s, lane_name)[idx] = lane_values
        s.time[idx] = time
        s.work[idx] = work


def _align(s: _State, study: _Study, base: np.ndarray, root: np.ndarray, published: np.ndarray):
    """`As2dVerifier._align` of every simulation in `s`: (start or -1, anchored, searched).

    The search visits e + 1 .. e + H - 1, then e - 1, each only where floor <= k < published;
    the forward part is the column range [lo, hi) of offsets from e, compared as one matrix for
    the rows where it is not empty (most misses wait for the producer: nothing published after e)."""
    e, floor = s.expected, s.floor
    published_e = e < published
    e_ok = (floor <= e) & published_e & (study.z[base + e] == root)
    start = np.where(published_e, e + 1, -1)
    anchor = ~s.positional
    anchored = e_ok & anchor
    look = anchor & ~e_ok
    lo = np.maximum(floor - e, 1)
    hi = np.minimum(s.horizon, published - e)
    ahead = look & (lo < hi)
    back_ok = look & (floor < e) & (e <= published)  # k = e - 1 in [floor, published)
    first = np.full(len(e), -1)
    rows = np.nonzero(ahead)[0]
    if len(rows):
        lo_r, hi_r, e_r = lo[rows, None], hi[rows, None], e[rows]
        offsets = np.arange(int(lo_r.min()), int(hi_r.max()))[None, :]
        hits = (study.z[(base[rows] + e_r)[:, None] + offsets] == root[rows, None]) & (offsets >= lo_r) & (
            offsets < hi_r)
        hit = hits.any(axis=1)
        first[rows[hit]] = e_r[hit] + offsets[0, np.argmax(hits[hit], axis=1)]
    back = back_ok & (first < 0) & (study.z[base + e - 1] == root)  # k < 0 only where unreachable
    first = np.where(back, e - 1, first)
    found = first >= 0
    return np.where(found, first + 1, start), anchored | found, ahead | back_ok


def _agreement(study: _Study, z_at: np.ndarray, y_at: np.ndarray, length: np.ndarray) -> np.ndarray:
    """Per i, how many of z[z_at[i]:][:length[i]] agree with y[y_at[i]:] before the first
    mismatch (flat positions). Compared in blocks of growing width, each only for the rows that
    agreed throughout the blocks before: most candidates are rejected in the first columns."""
    agreed = length.copy()
    rows = np.nonzero(length > 0)[0]
    begin = 0
    for end in _BLOCKS:
        if not len(rows):
            break
        j = np.arange(begin, min(end, int(length[rows].max())))[None, :]
        mismatch = (study.z[z_at[rows, None] + j] != study.y[y_at[rows, None] + j]) & (j < length[rows, None])
        rejected = mismatch.any(axis=1)
        agreed[rows[rejected]] = begin + np.argmax(mismatch[rejected], axis=1)
        rows = rows[~rejected & (length[rows] > end)]
        begin = end
    return agreed


def _round(s: _State, study: _Study) -> None:
    """One forward boundary and forward of every simulation in `s`."""
    t = s.t
    published = np.minimum(s.m, s.batches * s.batch)
    base = s.row * study.stride
    root = study.y[base + t - 1]
    start, anchored, searched = _align(s, study, base, root, published)

    # Candidates: published tokens from `start`, at most B and the cap's room, cut at the confidence stop.
    room = np.minimum(s.budget, s.cap - t - 1)
    length = np.where((start >= 0) & (start < published) & (room > 0), np.minimum(room, published - start), 0)
    # the first low-confidence token at or after the start ends them (where start is -1, length is 0 already)
    c_start = base + start
    length = np.minimum(length, study.next_low[s.low_row * study.low_stride + c_start] - c_start)
    accepted = _agreement(study, c_start, base + t, length)
    committed = np.minimum(accepted + 1, s.n - t)

    # Time: the alignment search (if any), then the forward, the lanes sharing the processors.
    sub = np.nonzero(searched & (s.align_s > 0))[0]
    if len(sub):
        ones = np.ones(len(sub))
        _run(s, sub, s.align_s[sub], ones, ones, forward=False)
    width = length + 1
    depth = s.n_prompt + t - 1
    solo = study.target_costs[width, depth]
    if np.isnan(solo).any():
        bad = int(np.argmax(np.isnan(solo)))
        raise MissingCostError(f"{study.target_label}: no measured cost for width {width[bad]}",
                               hint="profile the device with a larger --max-width")
    cell = (s.ratio_row * study.rho_shape[0] + width) * study.rho_shape[1] + depth
    _run(s, None, solo, study.rho_t[cell], study.rho_d[cell], forward=True,
         ra=study.rho_after[s.ratio_row * study.rho_shape[0] + width])
    s.extrapolated |= study.rho_extrapolated[s.ratio_row, width]
    s.depth_extrapolated |= study.target_outside[depth]

    # Commit and move the cursor (As2dVerifier.observe).
    s.t = t + committed
    floor = np.where(anchored, np.maximum(s.floor, start), s.floor)
    s.floor = np.where(accepted > 0, np.maximum(floor, start + accepted), floor)
    s.expected = np.where(start < 0, s.expected + committed, start + committed - 1)
    s.target_forwards += 1
    s.proposed += length
    s.accepted += accepted
    s.multi += committed > 1
    s.verified.append((s.ids, length, accepted))
    _advance_publication(s, study)


def _count_at_most(matrix: np.ndarray, rows: np.ndarray, values: np.ndarray, strict: bool = False) -> np.ndarray:
    """Per i, how many entries of the sorted row `matrix[rows[i]]` are <= values[i] (< with
    `strict`): np.searchsorted(row, value, side="right" or "left") as one binary search for all."""
    width = matrix.shape[1]
    flat, base = matrix.ravel(), rows * width
    lo, hi = np.zeros(len(rows), dtype=np.int64), np.full(len(rows), width, dtype=np.int64)
    open_ = lo < hi
    while open_.any():
        mid = (lo + hi) // 2
        entry = flat[base + np.minimum(mid, width - 1)]
        below = (entry < values) if strict else (entry <= values)
        lo = np.where(open_ & below, mid + 1, lo)
        hi = np.where(open_ & ~below, mid, hi)
        open_ = lo < hi
    return lo


def _producer_ends(sims: Sequence[Simulation], profile: DeviceProfile, study: _Study,
                   s: _State) -> tuple[np.ndarray, np.ndarray]:
    """`ProducerTimeline.forwards_done` and `reference.producer_depth_extrapolated` of every
    simulation at its end, as array operations (integer counts and flags: exact)."""
    steps_done = _count_at_most(study.cum, s.timeline, s.work) - 1
    forwards = np.maximum(steps_done - 1, 0)
    started = _count_at_most(study.step_starts, s.timeline, s.work, strict=True)
    depth0 = np.array([t.n_prompt_drafter for t in study.traces], dtype=np.int64)[study.trace_row]
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
    _advance_publication(s, study)
    running = s.t < s.n
    if progress and not running.all():
        progress(int((~running).sum()))
    active = s.take(np.nonzero(running)[0])
    while len(active.ids):
        _round(active, study)
        done = active.t >= active.n
        if done.any():
            if progress:
                progress(int(done.sum()))
            active = active.retire(done, s)
    forwards, producer_outside = _producer_ends(sims, profile, study, s)
    s.depth_extrapolated |= producer_outside
    owner, length, accepted = ((np.concatenate(part) for part in zip(*s.verified, strict=False))
                               if s.verified else ([], [], []))
    reached_at, accepted_at = counts(*histograms(owner, length, accepted, len(sims)))
    return LockstepResult(s.time, s.d, s.v, s.o, s.h, s.target_forwards, s.proposed, s.accepted, s.multi, forwards,
                          s.extrapolated, s.depth_extrapolated, reached_at, accepted_at)
