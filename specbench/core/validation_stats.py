"""The statistics of `specbench validate` over its records (docs/METHODS.md §7.9 Validation: does replay
predict the device?): observations from paired decodes, their summary and verdict per configuration and metric,
a block's probe drift, the forwards replay priced, and AS2D's speedup bias gathered for its decomposition.
Pure: records and profiles in, records out (the blocks and their files are app/validate.py's)."""

from __future__ import annotations

import statistics
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace

from specbench.core import decomposition, fidelity
from specbench.core.methods.configs import As2dConfig, MethodConfig, SpecAsrConfig, TargetConfig
from specbench.core.pricing import timed_forwards
from specbench.core.stats import Interval
from specbench.errors import SpecbenchError
from specbench.schemas.profiles import DeviceProfile
from specbench.schemas.traces import TraceFile
from specbench.schemas.validation import (
    DecodeRecord,
    DecompositionRecord,
    Metric,
    ObservationRecord,
    PairedRun,
    ProbeRecord,
    SummaryRecord,
)
from specbench.schemas.windows import Window

TARGET = TargetConfig().label
DEPTH_BINS = (0, 32, 64, 96, 128)
"""KV depth bins of the op comparison."""


@dataclass(frozen=True)
class Bounds:
    """A metric's verdict bounds (docs/METHODS.md §7.9 Validation: does replay predict the device?)."""

    bias_pct: float
    """The bias's 90% interval must lie within ±this (%)."""
    error_pct: float
    """The excess error's upper 95% bound must be below this (%)."""


def fidelity_done(summary: SummaryRecord, halfwidth_pct: float) -> bool:
    if summary.bias_low is None or summary.bias_high is None:
        return False
    return 50 * (summary.bias_high - summary.bias_low) <= halfwidth_pct


def block_drift(probes: Sequence[ProbeRecord], threshold_pct: float, spreads: float) -> fidelity.Drift:
    """The block's decisive window over every model (`fidelity.model_drift`): per model, its probes in the
    block's probe jobs (around the refreshes) are the reference, each decode job's probes in order bracket
    its windows; the window that moved most for its model's allowance."""
    refresh: dict[str, list[float]] = {}
    jobs: dict[str, dict[str, list[tuple[float, str]]]] = {}
    for p in probes:
        where = f"after {p.window_id}" if p.window_id is not None else p.where
        for model, value in (("target", p.target_us), (f"drafter {p.drafter}", p.drafter_us)):
            if value is None:
                continue
            if p.series.startswith("decode:"):
                jobs.setdefault(model, {}).setdefault(p.series, []).append((value, where))
            else:
                refresh.setdefault(model, []).append(value)
    worst = fidelity.Drift(0.0, threshold_pct, "none")
    for model in sorted(set(refresh) | set(jobs)):
        drift = fidelity.model_drift(refresh.get(model, []), jobs.get(model, {}), threshold_pct, spreads)
        if drift.move_pct / drift.allowance_pct > worst.move_pct / worst.allowance_pct:
            worst = replace(drift, where=f"{model} in {drift.where}")
    return worst


def observations(decodes: Sequence[DecodeRecord],
                 replay: dict[tuple[str, str, str], tuple[int, float]]) -> list[ObservationRecord]:
    """Per (device, configuration, window): speedup and throughput of replay, Na and Nb (pure).

    `replay` maps (device, config, window_id) to the block's replayed (tokens, decode_s). A run's
    throughput is tokens over the mean time of its decodes (its repeats; target-only's: every target-only
    decode of the run); a native speedup divides a configuration's throughput by that of the target-only
    decodes paired with it, in the slot before it (Na) or after it (Nb), in the same repeats.
    Windows with a divergent decode are left out."""
    out = []
    runs: dict[tuple, list[DecodeRecord]] = {}
    for d in decodes:
        runs.setdefault((d.device, d.block, d.window_id), []).append(d)
    for (device, block, window_id), mine in sorted(runs.items()):
        if not all(d.lossless for d in mine):
            continue
        rep_t = replay.get((device, TARGET, window_id))
        if rep_t is None:
            continue
        out.append(ObservationRecord(device, TARGET, Metric.THROUGHPUT, block, window_id, rep_t[0] / rep_t[1],
                                     run_throughput(mine, PairedRun.A), run_throughput(mine, PairedRun.B)))
        for d in (d for d in mine if d.config != TARGET and d.run == PairedRun.A and d.repeat == 0):
            rep = replay.get((device, d.config, window_id))
            if rep is None:
                continue
            tps = [run_throughput(mine, run, d.slot, d.group) for run in PairedRun]
            paired = [run_throughput(mine, run, fidelity.partner_slot(d.slot), d.group) for run in PairedRun]
            out.append(ObservationRecord(device, d.config, Metric.THROUGHPUT, block, window_id, rep[0] / rep[1],
                                         *tps))
            out.append(ObservationRecord(device, d.config, Metric.SPEEDUP, block, window_id,
                                         (rep[0] / rep[1]) / (rep_t[0] / rep_t[1]),
                                         tps[0] / paired[0], tps[1] / paired[1]))
    return out


def run_throughput(decodes: Sequence[DecodeRecord], run: PairedRun, slot: int | None = None, group: str = "") -> float:
    """One window's tokens/s in `run`: tokens over the mean time of its decodes in (group, slot), target-only's
    (no slot) over every target-only decode of the run."""
    chosen = [d for d in decodes if d.run == run
              and (d.config == TARGET if slot is None else (d.group, d.slot) == (group, slot))]
    return chosen[0].tokens / (sum(d.decode_s for d in chosen) / len(chosen))


def summarize(obs: Sequence[ObservationRecord], bounds: dict[Metric, Bounds],
              past_allowance: Collection[tuple[str, int]] = ()) -> list[SummaryRecord]:
    """Per (device, configuration, metric): the floor, replay's error, the excess error and the bias, with
    their intervals over blocks, and the verdict against that metric's `bounds`; the verdict names the
    blocks among them in `past_allowance` ((device, block) kept although their drift exceeded its allowance)."""
    groups: dict[tuple[str, str, Metric], list[ObservationRecord]] = {}
    for o in obs:
        groups.setdefault((o.device, o.config, o.metric), []).append(o)
    return [fidelity.fidelity_stats(mine, bounds[metric].bias_pct, bounds[metric].error_pct,
                                    past_allowance=len({o.block for o in mine if (device, o.block) in past_allowance}))
            for (device, _, metric), mine in groups.items()]


def op_timings(decodes: Sequence[DecodeRecord], profile: DeviceProfile, configs: Sequence[MethodConfig],
               lookups: set[str]) -> list[fidelity.OpTiming]:
    """Every forward of the serial decodes (AS2D's lanes overlap, so their forwards are not solo
    costs) with the price the block's profile gives it."""
    serial = {c.label: c for c in configs if not isinstance(c, As2dConfig)}
    out = []
    for d in decodes:
        config = serial.get(d.config)
        if config is None or not d.lossless:
            continue
        lookup = d.group in lookups
        hosts = [host for _, (_, _, _, host) in timed_forwards(d.ops, 1e6 * d.decode_s)]
        for op, host in zip(d.ops, hosts, strict=True):
            if op["model"] == "target":
                table, model = profile.target_costs, "target"
            elif lookup or isinstance(config, SpecAsrConfig):
                continue  # a lookup's op or a recycling ingest: other tables
            else:
                table, model = profile.drafter(d.group).costs, d.group
            if op["width"] not in table.widths():
                continue
            out.append(fidelity.OpTiming(d.config, model, int(op["width"]), int(op["depth"]), float(op["us"]),
                                         1e6 * table.cost(int(op["width"]), float(op["depth"])), host))
    return out



@dataclass
class Decomposing:
    """One AS2D configuration's decomposed observations, gathered over the blocks."""

    windows: list[decomposition.WindowReplays] = field(default_factory=list)
    contended: list[decomposition.BlockContention] = field(default_factory=list)
    """Every decomposed block's realised contention."""
    left_out: int = 0
    """Speedup observations whose native lanes could not be read back."""


DecodeKey = tuple[str, str, PairedRun, int, int]
"""A decode record's (group, window_id, run, repeat, slot)."""


def decode_index(decodes: Sequence[DecodeRecord]) -> dict[DecodeKey, DecodeRecord]:
    return {(d.group, d.window_id, d.run, d.repeat, d.slot): d for d in decodes}


def native_lanes(decode: DecodeRecord, index: dict[DecodeKey, DecodeRecord]) -> decomposition.NativeLanes:
    """An AS2D decode's lanes beside the target-only decode paired with it in the same pass (`decode_index` of its
    block's decodes); a SpecbenchError without a producer record."""
    if decode.producer is None:
        raise SpecbenchError(f"{decode.config} of window '{decode.window_id}': no producer record")
    partner = index[(decode.group, decode.window_id, decode.run, decode.repeat, fidelity.partner_slot(decode.slot))]
    return decomposition.NativeLanes(decode.ops, decode.producer, partner.ops, window_id=decode.window_id)


def decompose_block(obs: Sequence[ObservationRecord], decodes: Sequence[DecodeRecord],
                    replay: dict[tuple[str, str, str], tuple[int, float]], profile: DeviceProfile,
                    traces: dict[str, TraceFile], windows: dict[str, Window], configs: Sequence[As2dConfig],
                    into: dict[tuple[str, str], Decomposing]) -> None:
    """Each speedup observation of an AS2D configuration in one block (`decodes`, `replay`: the
    block's): replay's speedup again with the contention the block's native runs of the configuration
    realised, then with each run's publications besides (core/decomposition.py); a run's substituted decode time
    is the mean over its repeats'. A decode whose lanes cannot be read back (no timestamps, publications not in
    batches) leaves its observation out, counted."""
    by_label = {c.label: c for c in configs}
    index = decode_index(decodes)
    lanes: dict[tuple[str, str, PairedRun], list[decomposition.NativeLanes]] = {}  # (config, window, run): repeats
    unread: set[tuple[str, str, PairedRun]] = set()  # a decode without a producer record: observation left out below
    for d in decodes:
        if d.config in by_label:
            key = (d.config, d.window_id, d.run)
            try:
                lanes.setdefault(key, []).append(native_lanes(d, index))
            except SpecbenchError:
                unread.add(key)
    contended = {label: _block_contention([run for key, runs in lanes.items() if key[0] == label for run in runs],
                                          profile, config)
                 for label, config in by_label.items()}
    for o in obs:
        config = by_label.get(o.config)
        if o.metric != Metric.SPEEDUP or config is None:
            continue
        gathered = into.setdefault((o.device, o.config), Decomposing())
        trace, cap = traces[str(config.drafter)].windows[o.window_id], windows[o.window_id].cap
        priced_s = replay[(o.device, o.config, o.window_id)][1]
        keys = [(o.config, o.window_id, run) for run in PairedRun]
        try:
            if any(key in unread or key not in lanes for key in keys):
                raise SpecbenchError(f"{o.config} of window '{o.window_id}': no producer record")
            runs = [[decomposition.substituted_replays(trace, cap, profile, config, repeat, contended[o.config])
                     for repeat in lanes[key]] for key in keys]
        except SpecbenchError:
            gathered.left_out += 1
            continue

        # the priced speedup with another decode time (a run's: the mean over its repeats); target-only's replay stays
        contention = tuple(o.replay * priced_s / statistics.fmean(r.contention_s for r in run) for run in runs)
        publication = tuple(o.replay * priced_s / statistics.fmean(r.publication_s for r in run) for run in runs)
        gathered.windows.append(decomposition.WindowReplays(o.block, o.window_id, (o.native_a, o.native_b), o.replay,
                                                            (contention[0], contention[1]),
                                                            (publication[0], publication[1])))
    observed = {o.config for o in obs}
    for label, met in contended.items():
        if label in observed and met.realised is not None:
            into.setdefault((obs[0].device, label), Decomposing()).contended.append(met)


def _block_contention(runs: Sequence[decomposition.NativeLanes], profile: DeviceProfile,
                      config: As2dConfig) -> decomposition.BlockContention:
    """The contention the block's native runs of `config` (those whose lanes read back) realised."""
    cosched = profile.cosched(config.drafter)
    try:
        return decomposition.block_contention(runs, profile.target_costs, cosched)
    except SpecbenchError:  # a run without the lanes' timestamps: nothing substituted, its observations left out
        return decomposition.BlockContention(cosched, None, None, 0)


def decomposition_records(gathered: dict[tuple[str, str], Decomposing]) -> list[DecompositionRecord]:
    """Per device × AS2D configuration with an observation decomposed, one record per part."""
    out = []
    for (device, config), mine in sorted(gathered.items()):
        if not mine.windows:
            continue
        met = [(c.forwards, c.priced, c.realised) for c in mine.contended
               if c.priced is not None and c.realised is not None]
        forwards = sum(n for n, _, _ in met)
        # the blocks' ratios, weighted by the forwards behind each
        rho: tuple[float | None, float | None] = (
            (sum(n * priced for n, priced, _ in met) / forwards, sum(n * realised for n, _, realised in met) / forwards)
            if forwards else (None, None))
        blocks = len({w.block for w in mine.windows})
        for p in decomposition.decompose(mine.windows):
            out.append(DecompositionRecord(
                device, config, p.part.value, blocks, len(mine.windows), mine.left_out, p.factor,
                *_bounds(p.interval), p.replay_bias, *_bounds(p.replay_interval),
                *(rho if p.part is decomposition.Part.CONTENTION else (None, None)), p.excess_pct,
                p.excess_upper_pct))
    return out


def _bounds(interval: Interval | None) -> tuple[float | None, float | None]:
    return (None, None) if interval is None else (interval.low, interval.high)

