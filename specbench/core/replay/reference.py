"""Replay: price a method's decisions with a device profile (docs/METHODS.md §5 Replay).

Serial methods (target-only, SD, SpecASR) decide the same whatever the timing, so replay
prices their fixed operation sequence op by op. AS2D's decisions depend on when producer
batches are published, so its replay simulates the two lanes in time: while both lanes
work, each progresses at 1/rho of its solo speed (processor sharing); the target never
waits for the producer.

This module is the scalar reference; `replay.bulk` (and `replay.lockstep` for AS2D) compute
the same numbers for whole studies at once, and tests check them equal to the last bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from specbench.core.methods.as2d import As2dVerifier
from specbench.core.methods.base import Decoded, Model, TargetOracle, TraceDrafts
from specbench.core.methods.configs import (
    As2dConfig,
    MethodConfig,
    SdConfig,
    SpecAsrConfig,
    TargetConfig,
    method_name,
    row_fields,
)
from specbench.core.methods.sd import decode_sd, drafter_kv
from specbench.core.methods.specasr import decode_specasr
from specbench.core.methods.target import decode_target
from specbench.core.positions import position_counts
from specbench.core.pricing import PACE_MIDDLE, PACE_NODES, PACE_WEIGHTS, CoSchedule, CostTable
from specbench.errors import SpecbenchError
from specbench.schemas.profiles import DeviceProfile, DrafterProfile
from specbench.schemas.results import WindowResult
from specbench.schemas.traces import ProducerStream, WindowTrace
from specbench.schemas.windows import Window


@dataclass(frozen=True)
class Timing:
    decode_s: float
    d_s: float
    v_s: float
    o_s: float
    h_s: float
    drafter_forwards: int
    extrapolated: bool = False
    """A co-scheduling ratio the profile did not measure."""
    depth_extrapolated: bool = False
    """A forward priced outside the profile's measured depths."""


def decode_serial(config: MethodConfig, trace: WindowTrace, cap: int, drafter_name: str = "drafter",
                  oracle: TargetOracle | None = None) -> Decoded:
    """Run a serial method's decision procedure on a trace. `oracle` answers the verifications
    (default: the trace's output); a test passes one that records what it was asked."""
    oracle = oracle or TargetOracle(trace.y)
    if isinstance(config, TargetConfig):
        return decode_target(oracle, trace.n_prompt)
    drafts = TraceDrafts(trace, drafter_name)
    if isinstance(config, SdConfig):
        return decode_sd(oracle, drafts, cap, trace.n_prompt, trace.n_prompt_drafter, config, drafter_kv(trace, config))
    if isinstance(config, SpecAsrConfig):
        return decode_specasr(oracle, drafts, cap, trace.n_prompt, trace.n_prompt_drafter, config)
    raise SpecbenchError(f"{method_name(config)} is not a serial method")


def price_serial(decoded: Decoded, target_costs: CostTable, drafter: DrafterProfile | None) -> Timing:
    """Serial: nothing overlaps, so T = D + V exactly and O = H = 0; each forward at its `price`, the host work
    after it included."""
    d_s = v_s = 0.0
    drafter_forwards = 0
    depth_extrapolated = False
    for op in decoded.ops:
        if op.model is Model.TARGET:
            v_s += target_costs.price(op.width, op.depth)
            depth_extrapolated |= bool(target_costs.extrapolates(op.depth))
        else:
            if drafter is None:
                raise SpecbenchError("a drafter forward needs a drafter cost table")
            table = drafter.ingest_costs() if op.all_rows else drafter.costs
            d_s += table.price(op.width, op.depth)
            depth_extrapolated |= bool(table.extrapolates(op.depth))
            drafter_forwards += 1
    return Timing(d_s + v_s, d_s, v_s, 0.0, 0.0, drafter_forwards, depth_extrapolated=depth_extrapolated)


@dataclass(frozen=True)
class ProducerTimeline:
    """The producer's work in solo seconds: step s runs from cum[s] to cum[s+1]. Step 0 is
    the drafter's prefill prediction (z[0] comes from the prefill's logits, before the decode
    clock), so it costs no forward; step s >= 1 is one single-token drafter forward."""

    cum: np.ndarray
    """[steps + 1] cumulative solo seconds."""
    publish_work: np.ndarray
    """[batches] solo seconds of producer work after which each batch is visible."""
    publish_steps: np.ndarray
    """[batches] the producer step after which each batch is visible."""
    batch: int
    n_tokens: int

    @property
    def total(self) -> float:
        return float(self.cum[-1])

    @property
    def steps(self) -> int:
        return len(self.cum) - 1

    def published(self, work_done: float) -> int:
        """Tokens visible once the producer has done `work_done` solo seconds of work."""
        batches = int(np.searchsorted(self.publish_work, work_done, side="right"))
        return min(self.n_tokens, batches * self.batch)

    def steps_done(self, work_done: float) -> int:
        return int(np.searchsorted(self.cum, work_done, side="right")) - 1

    def forwards_done(self, work_done: float) -> int:
        """Drafter forwards finished: every step done but the prefill's."""
        return max(self.steps_done(work_done) - 1, 0)


def batch_publish_steps(step: np.ndarray, steps: int, batch: int) -> np.ndarray:
    """Producer step after which each batch is published: its last token's step; the final
    partial batch at the producer's end."""
    n = len(step)
    last = np.minimum(np.arange(batch - 1, n + batch - 1, batch), n - 1) if n else np.zeros(0, dtype=np.int64)
    out = step[last].astype(np.int64) if n else np.zeros(0, dtype=np.int64)
    if n % batch:
        out[-1] = steps - 1
    return out


def producer_forward_depths(steps: int, depth0: int) -> np.ndarray:
    """KV depth of the forward of each producer step s >= 1: it feeds the drafter token of
    step s - 1 after the prompt's `depth0` entries."""
    return depth0 + np.arange(max(steps - 1, 0), dtype=np.float64)


def timeline_from_forward_costs(stream: ProducerStream, forward_s: np.ndarray, batch: int,
                                publish_s: float, step_s: float = 0.0) -> ProducerTimeline:
    """The timeline from the solo seconds of each forward (steps 1..steps-1), the host work of
    every step (`step_s`: its greedy choice and mapping, step 0's included) and the per-batch
    publishing cost, charged to the step that publishes."""
    step_cost = np.full(stream.steps, step_s)
    step_cost[1:] += forward_s
    publish_steps = batch_publish_steps(stream.step, stream.steps, batch)
    np.add.at(step_cost, publish_steps, publish_s)
    cum = np.concatenate([[0.0], np.cumsum(step_cost)])
    return ProducerTimeline(cum, cum[publish_steps + 1], publish_steps, batch, len(stream.tokens))


def producer_timeline(stream: ProducerStream, costs: CostTable, depth0: int, batch: int,
                      publish_s: float, step_s: float = 0.0) -> ProducerTimeline:
    depths = producer_forward_depths(stream.steps, depth0)
    return timeline_from_forward_costs(stream, costs.costs(np.ones(len(depths), dtype=np.int64), depths), batch,
                                       publish_s, step_s)


def producer_depth_extrapolated(cum: np.ndarray, work: float, costs: CostTable, depth0: int) -> bool:
    """Whether a producer forward begun by the end of the decode (`work` solo seconds done; step
    s >= 1 begins at cum[s] with a forward at depth depth0 + s - 1) was priced outside the
    measured depths. A forward still running at the end counts: its price decided whether its
    batch came in time."""
    started = int(np.searchsorted(cum[:-1], work, side="left"))
    return started > 1 and bool(costs.extrapolates(np.array([depth0, depth0 + started - 2])).any())


@dataclass(frozen=True)
class ProducerCosts:
    """What an AS2D producer costs besides its forwards, and how it shares the cores."""

    cosched: CoSchedule
    startup_s: float
    """From the clock's start until the producer's first step."""
    publish_s: float
    """Producer-lane work to publish one batch, in solo seconds."""
    step_s: float = 0.0
    """Producer-lane host work of every step besides its forward and publishing, in solo seconds."""


def producer_costs(profile: DeviceProfile, config: As2dConfig, trace: WindowTrace,
                   max_width: int | None = None) -> ProducerCosts:
    """A model producer: the profile's co-scheduling ratios and overheads, measured with a model
    producer on its own thread. The lookup drafter's producer (docs/METHODS.md §2.7 Prompt-lookup drafting) is the
    input, published before the clock starts, and never computes: no start-up, no publishing
    cost, and ratios of 1 at every width up to `max_width` (default: the configuration's),
    which its empty timeline never applies."""
    if trace.drafts is not None and trace.drafts.lookup is not None:
        ones = {width: np.ones(1) for width in range(1, (max_width or config.budget + 1) + 1)}
        return ProducerCosts(CoSchedule(np.zeros(1), ones, ones), 0.0, 0.0)
    overheads = profile.overheads_of(config.drafter)
    cosched = profile.cosched(config.drafter)
    solo = solo_host_work(cosched)
    return ProducerCosts(cosched, overheads.producer_startup_s, solo * overheads.publish_s,
                         solo * (overheads.producer_step_s or 0.0))


def solo_host_work(cosched: CoSchedule) -> float:
    """What a second of the producer's host work measured in AS2D decodes is in solo seconds (docs/METHODS.md §5.2
    The two-lane AS2D simulation, "Producer timeline"): `producer_step_s` and `publish_s` are elapsed time on the
    producer's lane, beside the target, so already stretched by the contention, which processor sharing applies to
    the timeline's work again. Divided by the producer's ratio those decodes met (`cosched.decode`, pooled), they
    take their measured time beside the target; 1 where no such ratio was measured."""
    met = None if cosched.decode is None else cosched.decode.producer
    return 1.0 if met is None else 1.0 / met


class _Lanes:
    """Clock and D/V/O/H bookkeeping for the two-lane simulation."""

    def __init__(self, timeline: ProducerTimeline, start_s: float):
        self.timeline = timeline
        self.start_s = start_s
        self.time = self.work = self.d = self.v = self.o = self.h = 0.0

    def published(self) -> int:
        """Tokens the target sees now: none before the producer thread starts."""
        return self.timeline.published(self.work) if self.time >= self.start_s else 0

    def run(self, solo_s: float, rho_target: float, rho_drafter: float, forward: bool, rho_after: float = 1.0) -> None:
        """Advance through one target-lane activity of `solo_s` seconds of solo work; what is left of it once the
        producer is done runs at `rho_after` (`AfterProducer`)."""
        remaining = solo_s
        if self.time < self.start_s:  # the producer has not started: the target runs alone
            alone = min(self.start_s - self.time, remaining)
            self._alone(alone, forward)
            remaining = 0.0 if alone == remaining else remaining - alone
        total = self.timeline.total
        if remaining > 0 and self.work < total:
            need_target = remaining * rho_target
            need_producer = (total - self.work) * rho_drafter
            if need_target < need_producer:
                shared = need_target
                self.work = min(self.work + shared / rho_drafter, total)
                remaining = 0.0
            else:
                shared = need_producer
                self.work = total
                remaining = 0.0 if need_target == need_producer else remaining - shared / rho_target
            self.time += shared
            self.d += shared
            if forward:
                self.v += shared
                self.o += shared
        if remaining > 0:  # the producer is done (work reached total)
            self._alone(remaining * rho_after, forward)

    def _alone(self, seconds: float, forward: bool) -> None:
        self.time += seconds
        if forward:
            self.v += seconds
        else:
            self.h += seconds


@dataclass(frozen=True)
class ProducerLane:
    """What AS2D's two-lane simulation takes of the producer: when its batches are published, when
    it starts and how the two lanes share the cores. `priced_lane` gives the profile's; a
    validation's error decomposition (core/decomposition.py) substitutes what a native decode realised."""

    timeline: ProducerTimeline
    startup_s: float
    """From the decode clock's start until the producer's first step (the target runs alone before)."""
    cosched: CoSchedule


def producer_stream(trace: WindowTrace) -> ProducerStream:
    if trace.producer is None:
        raise SpecbenchError(f"trace of window '{trace.window_id}' has no producer stream; AS2D needs one")
    return trace.producer


def priced_lane(trace: WindowTrace, profile: DeviceProfile, config: As2dConfig) -> ProducerLane:
    """The producer as the profile prices it: its drafter's forward costs, host work and publishing
    in the timeline, the profile's start-up and co-scheduling ratios."""
    stream = producer_stream(trace)
    producer = producer_costs(profile, config, trace)
    timeline = producer_timeline(stream, profile.drafter(config.drafter).costs, trace.n_prompt_drafter, config.batch,
                                 producer.publish_s, producer.step_s)
    return ProducerLane(timeline, producer.startup_s, producer.cosched)


def pace_sigma(profile: DeviceProfile, config: As2dConfig, trace: WindowTrace) -> float:
    """The producer's pace scatter the profile measured for the configuration's drafter (0: none measured; the
    lookup drafter's producer has no timeline to scatter)."""
    decode = producer_costs(profile, config, trace).cosched.decode
    return 0.0 if decode is None or decode.pace_sigma is None else decode.pace_sigma


def scaled_timeline(timeline: ProducerTimeline, factor: float) -> ProducerTimeline:
    """The producer's timeline with all its work (forwards, host work, publishing) `factor` times as long."""
    return replace(timeline, cum=timeline.cum * factor, publish_work=timeline.publish_work * factor)


def pace_factors(sigma: float) -> np.ndarray:
    """The producer's timeline scale at each of the pace nodes (PACE_NODES): exp(sigma z)."""
    return np.exp(sigma * PACE_NODES)


def expected_timing(timings: Sequence[Timing]) -> Timing:
    """One timing per pace node, in node order, as one: the decode's times (T, D, V, O, H) weighted by
    PACE_WEIGHTS, summed node after node (the lockstep sums in the same order); the drafter forwards the
    middle node's (the timeline as priced); a flag where any node raised it."""
    times = [0.0] * 5
    for weight, timing in zip(PACE_WEIGHTS, timings, strict=True):
        for i, value in enumerate((timing.decode_s, timing.d_s, timing.v_s, timing.o_s, timing.h_s)):
            times[i] += float(weight) * value
    decode_s, d_s, v_s, o_s, h_s = times
    return Timing(decode_s, d_s, v_s, o_s, h_s, timings[PACE_MIDDLE].drafter_forwards,
                  any(t.extrapolated for t in timings), any(t.depth_extrapolated for t in timings))


def expected_as2d(trace: WindowTrace, cap: int, profile: DeviceProfile, config: As2dConfig,
                  lane: ProducerLane | None = None) -> tuple[Timing, dict]:
    """AS2D's replay of a window priced at the mean over the producer's pace scatter (docs/METHODS.md §5.2 The
    two-lane AS2D simulation, "The pace scatter"): `simulate_as2d` with the producer's timeline (`lane`, default
    as the profile prices it) scaled by each of `pace_factors`, the times weighted (`expected_timing`), the target
    lane's counts the middle node's. Without a measured scatter, the one timeline."""
    sigma = pace_sigma(profile, config, trace)
    if sigma == 0.0:
        return simulate_as2d(trace, cap, profile, config, lane=lane)
    lane = lane or priced_lane(trace, profile, config)
    runs = [simulate_as2d(trace, cap, profile, config, lane=replace(lane, timeline=scaled_timeline(lane.timeline, f)))
            for f in pace_factors(sigma)]
    return expected_timing([timing for timing, _ in runs]), runs[PACE_MIDDLE][1]


@dataclass(frozen=True)
class LaneForward:
    """One target forward of the two-lane simulation, as `simulate_as2d` logs it."""

    start_s: float
    """Its plan's time on the decode clock (before any alignment search)."""
    published: int
    """The producer's tokens visible when it was planned."""
    width: int
    accepted: int
    seconds: float
    """From its plan to its end: the alignment search, if any, and the forward."""


def simulate_as2d(trace: WindowTrace, cap: int, profile: DeviceProfile, config: As2dConfig,
                  oracle: TargetOracle | None = None, lane: ProducerLane | None = None,
                  log: list[LaneForward] | None = None) -> tuple[Timing, dict]:
    """Two lanes in time. Returns the timing and the target-lane counts. `oracle` as in
    `decode_serial`; `lane`: the producer (default: as the profile prices it, `priced_lane`); `log`: where given,
    each target forward is appended to it."""
    stream = producer_stream(trace)
    drafter = profile.drafter(config.drafter)
    lane = lane or priced_lane(trace, profile, config)
    cosched, timeline = lane.cosched, lane.timeline
    overheads = profile.overheads_of(config.drafter)
    lanes = _Lanes(timeline, lane.startup_s)
    oracle = oracle or TargetOracle(trace.y)
    verifier = As2dVerifier(config, cap)
    counts: dict[str, Any] = {"target_forwards": 0, "proposed": 0, "accepted": 0, "multi_token_forwards": 0}
    verified: list[tuple[int, int]] = []
    extrapolated = depth_extrapolated = False
    while not oracle.done:
        t, start_s, published = oracle.committed, lanes.time, lanes.published()
        plan = verifier.plan(t, oracle.last(), stream.tokens, stream.conf, published)
        if plan.searched and overheads.align_s > 0:
            lanes.run(overheads.align_s, 1.0, 1.0, forward=False)
        width, depth = len(plan.candidates) + 1, trace.n_prompt + t - 1
        rho_t, rho_d, extra = cosched.ratios(width, depth)
        extrapolated |= extra
        depth_extrapolated |= bool(profile.target_costs.extrapolates(depth))
        lanes.run(profile.target_costs.price(width, depth), rho_t, rho_d, forward=True, rho_after=cosched.after(width))
        accepted, committed = oracle.verify(plan.candidates)
        verifier.observe(plan, accepted, committed)
        if log is not None:
            log.append(LaneForward(start_s, published, width, accepted, lanes.time - start_s))
        counts["target_forwards"] += 1
        counts["proposed"] += len(plan.candidates)
        counts["accepted"] += accepted
        counts["multi_token_forwards"] += committed > 1
        verified.append((len(plan.candidates), accepted))
    counts["reached_at"], counts["accepted_at"] = _positions(verified)
    depth_extrapolated |= producer_depth_extrapolated(timeline.cum, lanes.work, drafter.costs, trace.n_prompt_drafter)
    timing = Timing(lanes.time, lanes.d, lanes.v, lanes.o, lanes.h, timeline.forwards_done(lanes.work), extrapolated,
                    depth_extrapolated)
    return timing, counts


def _positions(verified: Sequence[tuple[int, int]]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(reached_at, accepted_at) of (proposed, accepted) per verification."""
    return position_counts([p for p, _ in verified], [a for _, a in verified])


def serial_counts(decoded: Decoded) -> dict:
    targets = [op for op in decoded.ops if op.model is Model.TARGET]
    reached, accepted = _positions([(op.proposed, op.accepted) for op in targets])
    return {"target_forwards": len(targets), "proposed": sum(op.proposed for op in targets),
            "accepted": sum(op.accepted for op in targets),
            "multi_token_forwards": sum(op.committed > 1 for op in targets),
            "reached_at": reached, "accepted_at": accepted}


def replay_window(window: Window, trace: WindowTrace, profile: DeviceProfile, config: MethodConfig) -> WindowResult:
    """Replay one window with one method configuration on one device profile."""
    if isinstance(config, As2dConfig):
        timing, counts = expected_as2d(trace, window.cap, profile, config)
        lossless = True  # the oracle commits only y, token by token
    else:
        decoded = decode_serial(config, trace, window.cap, getattr(config, "drafter", None) or "drafter")
        drafter = None if isinstance(config, TargetConfig) else profile.drafter(config.drafter)
        timing, counts = price_serial(decoded, profile.target_costs, drafter), serial_counts(decoded)
        lossless = list(decoded.tokens) == trace.y.tolist()
    return WindowResult(
        device=profile.name, **row_fields(config), window_id=window.window_id,
        window_sha256=window.window_sha256, dataset=window.dataset, split=window.split.value,
        tokens=trace.n_tokens - 1, decode_s=timing.decode_s, drafter_forwards=timing.drafter_forwards,
        d_s=timing.d_s, v_s=timing.v_s, o_s=timing.o_s, h_s=timing.h_s, extrapolated=timing.extrapolated,
        lossless=lossless, text=trace.text, depth_extrapolated=timing.depth_extrapolated,
        placement=profile.placement.key, category=window.category, **counts)
