"""`specbench validate`: does replay predict what the device measures? (docs/METHODS.md §7.9 Validation: does
replay predict the device?)

Once per placement a full profile of the cells the configurations use; then blocks. A
block, on one window shard and one placement: a probe, a refresh of the cost tables (with each model's
decode ratio from target-only and SD decodes of the block's windows) and of the AS2D configurations'
co-scheduling ratios, a probe; per drafter group (in a random
order) two passes over the shard's windows, one decode job each: `Na` in a random order of the group's
configurations and `Nb` reversed, each configuration beside a target-only decode of its own (with `repeats`
> 1, that many passes of each, alternately), probes before the first window and after each, and between two
passes an interim (the refresh's decodes timed again, no sweep); a probe, a second refresh, a probe.
Replay prices the block with the full profile whose cost tables and co-scheduling ratios are the mean of the two
refreshes, its decode ratios the mean of the refreshes' and the interims' (linear drift cancels). A block where
both probes around a window moved from the probes around the refreshes, the same way, by more than an allowance
(the threshold, or a multiple of the probes' scatter in the block, whichever is larger) is voided, and redone after a
cool-down, at most `max_voids` times. Blocks cycle through the shards until every bias interval is as narrow as
asked, or the block budget is spent. The analysis also takes each AS2D configuration's speedup bias
apart (core/decomposition.py): contention, publications, and what remains; and replays each half of a block's
windows with the ratios the other half's decodes met (core/crossfit.py), which tells the model's error from drift.
"""


from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path

from specbench.app.cost_cells import sweep_plan, traced_drafter_widths
from specbench.core import crossfit, fidelity
from specbench.core.methods.configs import As2dConfig, MethodConfig, TargetConfig, row_fields
from specbench.core.refresh_mean import merged_profile
from specbench.core.repetitions import DEFAULT_MAX_REPETITIONS, OVERHEADS_WINDOWS
from specbench.core.validation_stats import (
    DEPTH_BINS,
    TARGET,
    Bounds,
    Decomposing,
    block_drift,
    decompose_block,
    decomposition_records,
    fidelity_done,
    observations,
    op_timings,
    summarize,
)
from specbench.errors import SpecbenchError
from specbench.schemas.fileio import load_yaml
from specbench.schemas.placement import Placement, device_label
from specbench.schemas.profiles import DeviceProfile, profile_from_dict, profile_to_dict, save_profile
from specbench.schemas.traces import TraceFile, check_against_windows, load_trace_dir
from specbench.schemas.validation import (
    OP_KEYS,
    PRODUCER_KEYS,
    Attempted,
    BlockRecord,
    CrossFitRecord,
    DecodeRecord,
    DecompositionRecord,
    Metric,
    ObservationRecord,
    OpRecord,
    PairedRun,
    ProbeRecord,
    SummaryRecord,
    append_records,
    decode_series,
    kept,
    load_records,
    open_validation,
    write_records,
)
from specbench.schemas.windows import Window, windows_digest
from specbench.world.decode_run import method_job
from specbench.world.devices.base import Device
from specbench.world.devices.cooling import cool_back
from specbench.world.environment import now
from specbench.world.jobs import DecodeJob, Probe, ProbeJob
from specbench.world.model_files import ModelFile, model_job
from specbench.world.profiling import SweepPlan, profile_device, write_profile
from specbench.world.tracing import prompts_for

Log = Callable[[str], None]


@dataclass(frozen=True)
class ValidationPlan:
    """What one validation measures, on which device, and when it stops (its flags checked by ValidationRequest)."""

    device: Device
    windows: list[Window]
    windows_path: Path
    traces_dir: Path
    target: ModelFile
    drafters: dict[str, ModelFile]
    """By trace name: the drafter of each group."""
    configs: list[MethodConfig]
    """Target-only first; every other configuration names its drafter."""
    placements: list[Placement]
    depths: tuple[int, ...] = (0, 64, 128)
    seed: int = 1
    block_windows: int = 6
    min_blocks: int = 2
    max_blocks: int = 8
    halfwidth_pct: float = 1.0
    probe_threshold_pct: float = 5.0
    max_voids: int = 2
    cooldown_s: float = 30.0
    repetitions: int = 5
    probe_repetitions: int = 5
    speedup: Bounds = Bounds(3.0, 5.0)
    throughput: Bounds = Bounds(5.0, 5.0)
    precision: float | None = None
    """Profile cells to this precision (`profile --precision`), `repetitions` the minimum; None: a fixed count."""
    max_repetitions: int = DEFAULT_MAX_REPETITIONS
    """With `precision`: most timed forwards a cell takes."""
    probe_spreads: float = fidelity.PROBE_SPREADS
    """A window's probes may move this many times the scatter of its model's probes in the block (or
    `probe_threshold_pct`, whichever is larger) before the block is voided."""
    overheads_windows: int = OVERHEADS_WINDOWS
    """Copies of the overheads window in the full profile's and each refresh's overheads decodes."""
    repeats: int = 1
    """Passes of each of Na and Nb over the block's windows; a run's value is over all of its passes, so that the
    host's jitter between them averages out (docs/METHODS.md §7.9 Validation: does replay predict the device?,
    "Repeats")."""

    def __post_init__(self) -> None:
        if not self.windows:
            raise SpecbenchError(f"{self.windows_path}: no windows to validate on")
        if self.repeats < 1:
            raise SpecbenchError(f"repeats {self.repeats}: expected >= 1")

    def groups(self) -> dict[str, list[MethodConfig]]:
        """Per drafter, the configurations other than target-only that draft with it."""
        out: dict[str, list[MethodConfig]] = {}
        for c in self.configs:
            if not isinstance(c, TargetConfig):
                if c.drafter is None:  # resolve_configs names every drafter
                    raise SpecbenchError(f"{c.label}: no drafter named")
                out.setdefault(c.drafter, []).append(c)
        return out

    def shards(self) -> list[list[Window]]:
        n = self.block_windows
        return [self.windows[i:i + n] for i in range(0, len(self.windows), n)]


def resolve_configs(configs: Sequence[MethodConfig], traces: dict[str, TraceFile]) -> list[MethodConfig]:
    """Target-only first (every method is compared with it); a configuration without a drafter
    takes the only traced one."""
    out: list[MethodConfig] = [TargetConfig()]
    for c in configs:
        if isinstance(c, TargetConfig):
            continue
        if c.drafter is None:
            if len(traces) != 1:
                raise SpecbenchError(f"{c.label}: name its drafter (traced: {', '.join(sorted(traces))})")
            c = replace(c, drafter=next(iter(traces)))
        if c.drafter not in traces:
            raise SpecbenchError(f"{c.label}: drafter '{c.drafter}' is not traced "
                                 f"(traced: {', '.join(sorted(traces))})")
        out.append(c)
    if len(out) == 1:
        raise SpecbenchError("validate needs a method besides target (e.g. --method 'sd:W=5')")
    return out


def cell_plan(plan: ValidationPlan, placement: Placement, full: bool, windows: Sequence[Window] = ()) -> SweepPlan:
    """The cells the configurations use (`cost_cells.sweep_plan`) in this placement, each cell measured as the
    validation asks (a fixed count, or to a precision), the co-scheduling ratios of the AS2D configurations'
    drafters and widths included (a block's refreshes too: each block replays with its own ratios); AS2D's
    overheads only in the `full` profile and only where an AS2D configuration is validated (no other method is
    charged them). A cross-vocabulary drafter's widths are widened to what the serial methods' replay asks of it
    on the traces (`cost_cells.traced_drafter_widths`). The AS2D decodes that measure the overheads and the
    target's ratio beside the producer run on `windows` (the validation's for the full profile, the block's for
    its refreshes; docs/METHODS.md §4.4 Overheads, "On the workload's windows")."""
    traced = traced_drafter_widths(plan.traces_dir, plan.windows, plan.configs)
    cells = sweep_plan(plan.configs, placement, plan.depths, plan.precision, plan.max_repetitions, traced,
                       plan.repetitions)
    as2d = any(isinstance(c, As2dConfig) for c in plan.configs)
    return replace(cells, cosched=as2d, overheads=full and as2d, overheads_windows=plan.overheads_windows,
                   workload=tuple(windows))


def manifest(plan: ValidationPlan) -> dict:
    return {"device": plan.device.name, "windows": {"path": str(plan.windows_path),
                                                    "digest": windows_digest(plan.windows), "count": len(plan.windows)},
            "traces": str(plan.traces_dir), "target": plan.target.ref(),
            "drafters": {name: d.ref() for name, d in sorted(plan.drafters.items())},
            "methods": [row_fields(c) for c in plan.configs], "placements": [p.as_dict() for p in plan.placements],
            "depths": list(plan.depths), "seed": plan.seed, "block_windows": plan.block_windows,
            "min_blocks": plan.min_blocks, "max_blocks": plan.max_blocks, "halfwidth_pct": plan.halfwidth_pct,
            "probe_threshold_pct": plan.probe_threshold_pct, "probe_spreads": plan.probe_spreads,
            "max_voids": plan.max_voids, "repeats": plan.repeats,
            "repetitions": plan.repetitions, "probe_repetitions": plan.probe_repetitions,
            "bounds": {Metric.SPEEDUP.value: vars(plan.speedup), Metric.THROUGHPUT.value: vars(plan.throughput)}}


def check_runner(device: Device) -> None:
    if "probe" not in device.runner().modes:
        raise SpecbenchError(f"the runner on {device.name} has no 'probe' mode (validation times reference probes)",
                             hint="rebuild it with `specbench build-runner`")


class Validation:
    """One validation run: the plan, its directory, and what it has measured so far."""

    def __init__(self, plan: ValidationPlan, out: Path, log: Log, advance: Callable[[int], None] | None = None):
        self.plan, self.out, self.log, self.advance = plan, Path(out), log, advance or (lambda n: None)
        self.traces = load_trace_dir(plan.traces_dir)
        check_against_windows(self.traces, plan.windows)
        self.references = {name: {w.window_id: t.windows[w.window_id].y.tolist() for w in plan.windows}
                           for name, t in self.traces.items()}
        self.prompts = {name: prompts_for(plan.device, plan.target, d, plan.windows)
                        for name, d in plan.drafters.items()}

    # -- profiles -------------------------------------------------------------------------------------
    def full_profile(self, placement: Placement) -> Path:
        path = self.out / "profiles" / f"full-{placement.label}.yaml"
        if not path.exists():
            self.log(f"profiling every cell once ({placement.label})")
            path.parent.mkdir(parents=True, exist_ok=True)
            plan = cell_plan(self.plan, placement, True, self.plan.windows)
            write_profile(path, profile_device(self.plan.device, self.plan.target, self._models(), plan))
        return path

    def _models(self) -> list[ModelFile]:
        return [self.plan.drafters[name] for name in sorted(self.plan.drafters)]

    def refresh(self, plan: SweepPlan, path: Path) -> DeviceProfile:
        """The block's cells (`plan`: `cell_plan` of its shard) measured again, with their decode ratios."""
        run = profile_device(self.plan.device, self.plan.target, self._models(), plan)
        write_profile(path, run)
        return replace(run.profile, path=path)

    def interim(self, plan: SweepPlan, group: str, cells: DeviceProfile, where: Path, attempt: int,
                after: int) -> dict:
        """The refresh's (`plan`'s) serial and AS2D decodes of the shard with the group's drafter, timed again after
        the group's pass `after`, each decode ratio against `cells` (the block's first refresh: no sweep)."""
        run = profile_device(self.plan.device, self.plan.target, [self.plan.drafters[group]], plan, cells=cells)
        write_profile(interim_path(where, group, after, attempt), run)
        return run.doc

    # -- probes and decodes ---------------------------------------------------------------------------
    def probe_job(self, placement: Placement, drafter: ModelFile | None, where: str) -> ProbeJob:
        return ProbeJob(model_job(self.plan.device, self.plan.target, placement.target),
                        Probe(self.plan.probe_repetitions), where,
                        None if drafter is None else model_job(self.plan.device, drafter, placement.drafter))

    def probes(self, placement: Placement, where: str, base: dict) -> list[ProbeRecord]:
        """One probe per drafter (the target in each), in a job of its own."""
        out = []
        for name in sorted(self.plan.drafters):
            job = self.probe_job(placement, self.plan.drafters[name], where)
            result = self.plan.device.run_job(job.to_dict()).results
            out += [probe_record(r, base | {"series": f"refresh:{name}", "drafter": name}) for r in result
                    if r.get("kind") == "probe"]
        return out

    def decode_group(self, placement: Placement, group: str, order: Sequence[str], shard: list[Window],
                     base: dict, between: Callable[[int], dict] | None
                     ) -> tuple[list[DecodeRecord], list[ProbeRecord], list[dict]]:
        """The group's native runs of the shard: one decode job per pass (Na, Nb, Na, Nb, ... `repeats` of
        each), every pass over all its windows, Na's slots in the block's order and Nb's reversed; and what
        `between(k)` measured after each pass k but the last (None: nothing between them)."""
        by_label = {c.label: c for c in self.plan.configs}
        slots = fidelity.paired_slots(order, TARGET)
        refs = self.references[group]
        windows = [self.prompts[group].runner_window(w, refs[w.window_id]) for w in shard]
        decodes, probes, interims = [], [], []

        def on_line(doc: dict) -> None:  # a window of a pass decoded
            r = doc.get("result") or {}
            if r.get("kind") in ("decode", "divergence") and r.get("slot", 0) == len(slots) - 1:
                self.advance(1)

        passes = [(repeat, run) for repeat in range(self.plan.repeats) for run in PairedRun]
        for k, (repeat, run) in enumerate(passes):
            if k and between is not None:
                interims.append(between(k - 1))
            ran = fidelity.run_order(slots, reverse=run is PairedRun.B)
            job = DecodeJob(model_job(self.plan.device, self.plan.target, placement.target),
                            [method_job(by_label[label]) for _, label in ran], windows,
                            model_job(self.plan.device, self.plan.drafters[group], placement.drafter),
                            warmup=True, runs=1, warmup_runs=0, probe=Probe(self.plan.probe_repetitions),
                            # Whisper: a window's decodes in the pass share one encoding (none is timed)
                            reuse_audio_prefill=self.plan.target.hears_audio)

            here = base | {"group": group, "run": run, "repeat": repeat}
            got = []
            for r in self.plan.device.run_job(job.to_dict(), on_line).results:
                if r.get("kind") == "probe":
                    probes.append(probe_record(r, base | {"series": decode_series(group, run, repeat),
                                                          "drafter": group}))
                elif r.get("kind") in ("decode", "divergence"):
                    slot, label = ran[int(r["slot"])]
                    got.append(decode_record(r, label, slot, here))
            if len(got) != len(slots) * len(shard):
                raise SpecbenchError(f"the runner returned {len(got)} decodes of group {group} (N{run.value}), "
                                     f"expected {len(slots) * len(shard)}")
            decodes += got
        return decodes, probes, interims

    # -- blocks ---------------------------------------------------------------------------------------
    def run_block(self, block: int, placement: Placement, shard: list[Window]) -> BlockRecord:
        device = device_label(self.plan.device.name, placement)
        order = fidelity.block_order(self.plan.seed, block, device,
                                     {g: [c.label for c in cs] for g, cs in self.plan.groups().items()})
        where = block_dir(self.out, placement.label, block)
        where.mkdir(parents=True, exist_ok=True)
        start_snapshot = self.plan.device.snapshot()
        refreshed = cell_plan(self.plan, placement, False, shard)  # what every refresh and interim of the block times
        # an attempt cut short (its records written, its BlockRecord not) keeps its number: never kept
        written: list[Attempted] = [*load_records(self.out, BlockRecord), *load_records(self.out, DecodeRecord),
                                    *load_records(self.out, ProbeRecord)]
        first = 1 + max((r.attempt for r in written if (r.device, r.block) == (device, block)), default=-1)
        redo = 0
        while True:  # the last attempt allowed is kept, voided or not
            attempt = first + redo
            started, clock = now(), time.monotonic()
            base = {"block": block, "attempt": attempt, "device": device}
            probes = self.probes(placement, "refresh-1 before", base)
            opening = self.refresh(refreshed, refresh_path(where, 1, attempt))
            probes += self.probes(placement, "refresh-1 after", base)
            decodes, interims = [], []
            for group in order.groups:
                # a lookup drafter decodes nothing of its own to time again: its group's passes run back to back
                between = (None if self.plan.drafters[group].lookup else
                           partial(self.interim, refreshed, group, opening, where, attempt))
                got, seen, again = self.decode_group(placement, group, order.methods[group], shard, base, between)
                decodes += got
                probes += seen
                interims += again
            probes += self.probes(placement, "refresh-2 before", base)
            closing = self.refresh(refreshed, refresh_path(where, 2, attempt))
            probes += self.probes(placement, "refresh-2 after", base)
            drift = block_drift(probes, self.plan.probe_threshold_pct, self.plan.probe_spreads)
            voided = drift.voids and redo < self.plan.max_voids
            record = BlockRecord(block, attempt, device, [w.window_id for w in shard], list(order.groups),
                                 {g: list(m) for g, m in order.methods.items()}, self.plan.seed,
                                 round(drift.move_pct, 3), drift.where, voided, drift.voids and not voided, started,
                                 round(time.monotonic() - clock, 3), round(drift.allowance_pct, 3))
            if not voided:
                profile = merged_profile(load_yaml(self.full_profile(placement)),
                                         [profile_to_dict(opening), profile_to_dict(closing)], interims)
                save_profile(where / "profile.yaml", profile_from_dict(profile, where / "profile.yaml"))
                append_records(self.out, decodes + probes + [record])
                return record
            append_records(self.out, decodes + probes + [record])
            self.log(f"block {block} ({device}) voided: a probe moved {drift.move_pct:.1f}% (allowed "
                     f"{drift.allowance_pct:.1f}%; {drift.where}); cooling down, redo "
                     f"{redo + 1} of {self.plan.max_voids}")
            cool_back(self.plan.device.snapshot, start_snapshot, self.plan.cooldown_s)
            redo += 1

    def run(self) -> list[SummaryRecord]:
        plan = self.plan
        open_validation(self.out, manifest(plan), resume=True)
        check_runner(plan.device)
        for placement in plan.placements:
            self.full_profile(placement)
        shards = plan.shards()
        least = max(plan.min_blocks, len(shards))
        done = {(b.device, b.block) for b in load_records(self.out, BlockRecord) if not b.voided}
        summary: list[SummaryRecord] = []
        for block in range(plan.max_blocks):
            order = plan.placements if block % 2 == 0 else list(reversed(plan.placements))
            for placement in order:
                if (device_label(plan.device.name, placement), block) in done:
                    continue
                record = self.run_block(block, placement, shards[block % len(shards)])
                self.log(f"block {block} ({record.device}): {len(record.windows)} windows, probes moved "
                         f"{record.drift_pct:.1f}% for an allowance of {record.allowance_pct:.1f}% "
                         f"({record.drift_series}), {record.wall_s:.0f} s")
            summary = self.analyze()
            if block + 1 >= least and all(fidelity_done(s, plan.halfwidth_pct) for s in summary):
                self.log(f"every bias interval is within ±{plan.halfwidth_pct:g}% after {block + 1} blocks")
                break
        return summary

    # -- analysis -------------------------------------------------------------------------------------
    def analyze(self) -> list[SummaryRecord]:
        plan = self.plan
        return analyze(self.out, plan.windows, self.traces, plan.configs,
                       {name for name, d in plan.drafters.items() if d.lookup},
                       {Metric.SPEEDUP: plan.speedup, Metric.THROUGHPUT: plan.throughput})



def probe_record(r: dict, base: dict) -> ProbeRecord:
    return ProbeRecord(base["block"], base["attempt"], base["device"], base["series"], str(r.get("where", "")),
                       r.get("window_id"), base.get("drafter"), float(r["target_us"]),
                       None if r.get("drafter_us") is None else float(r["drafter_us"]),
                       int(r.get("run_queue_wait_us", -1)), int(r.get("steal_ticks", -1)),
                       [int(k) for k in r.get("cpu_khz", [])], int(r.get("t_us", 0)),
                       _samples(r.get("target_samples_us")), _samples(r.get("drafter_samples_us")))


def _samples(values: list | None) -> list[float] | None:
    return None if values is None else [float(v) for v in values]


def decode_record(r: dict, config: str, slot: int, base: dict) -> DecodeRecord:
    """A runner decode result as the record of `config` in `slot` (Na's numbering) of the pass `base` names
    (block, attempt, device, group, run, repeat)."""
    ok = r["kind"] == "decode"
    tokens = len(r["tokens"]) - 1 if ok else 0  # y[0] comes from the prefill, before the clock
    ops = [{k: op[k] for k in OP_KEYS if k in op} for op in r.get("ops", [])] if ok else []
    producer = r.get("producer") if ok else None
    return DecodeRecord(base["block"], base["attempt"], base["device"], base["group"], base["run"], slot, config,
                        r["window_id"], tokens, float(r["decode_s"]) if ok else 0.0, ok, ops,
                        None if producer is None else {k: producer[k] for k in PRODUCER_KEYS if k in producer},
                        base["repeat"])


def block_dir(out: Path, placement_label: str, block: int) -> Path:
    """Where a block's refreshes and its profile (profile.yaml) are kept."""
    return out / "profiles" / f"{placement_label}-b{block:03d}"


def refresh_path(block: Path, which: int, attempt: int) -> Path:
    """A block attempt's first or second refresh (`which`: 1 or 2) in its directory (`block_dir`)."""
    return block / f"refresh-{which}-a{attempt}.yaml"


def interim_path(block: Path, group: str, after: int, attempt: int) -> Path:
    """A block attempt's decodes timed again after its group's pass `after` (0: the first), in its directory."""
    return block / f"interim-{group}-{after}-a{attempt}.yaml"


def block_profiles(out: Path, blocks: Sequence[BlockRecord]) -> dict[tuple[str, int], DeviceProfile]:
    """Each kept block's profile as replay prices it, by (device, block): its profile.yaml, every ratio from its own
    refreshes (docs/METHODS.md §7.9 Validation: does replay predict the device?, "Replay of a block")."""
    profiles = {}
    for b in blocks:
        path = block_dir(out, b.device.rsplit("@", 1)[-1], b.block) / "profile.yaml"
        profiles[(b.device, b.block)] = profile_from_dict(load_yaml(path), path)
    return profiles


def replayed(device: str, windows: Sequence[Window], traces: dict[str, TraceFile], profile: DeviceProfile,
             configs: Sequence[MethodConfig]) -> dict[tuple[str, str, str], tuple[int, float]]:
    """(device, configuration, window) -> replay's (tokens, decode seconds) of `windows` priced by `profile`."""
    from specbench.app.parallel_replay import replay_study_in_processes

    frame = replay_study_in_processes(windows, traces, [profile], configs, workers=1)
    return {(device, c, w): (int(t), float(s)) for c, w, t, s in
            zip(frame["config"], frame["window_id"], frame["tokens"], frame["decode_s"], strict=True)}


def priced_beside(device: str, decodes: Sequence[DecodeRecord], windows: dict[str, Window],
                  traces: dict[str, TraceFile], profile: DeviceProfile, configs: Sequence[MethodConfig],
                  lookups: set[str]) -> list[ObservationRecord]:
    """One block's observations with each fold of its windows priced by the ratios the other fold's native decodes
    met (core/crossfit.py)."""
    out: list[ObservationRecord] = []
    prompts = {name: {w: t.n_prompt_drafter for w, t in trace.windows.items()} for name, trace in traces.items()}
    halves = crossfit.folds({d.window_id for d in decodes})
    for fold, other in zip(halves, reversed(halves), strict=True):
        if not fold:
            continue
        priced = crossfit.beside_profile(profile, [d for d in decodes if d.window_id in other], configs, lookups,
                                         prompts)
        out += observations([d for d in decodes if d.window_id in fold],
                            replayed(device, [windows[w] for w in sorted(fold)], traces, priced, configs))
    return out


def block_observations(block: BlockRecord, decodes: Sequence[DecodeRecord], windows: dict[str, Window],
                       traces: dict[str, TraceFile], profile: DeviceProfile, configs: Sequence[MethodConfig],
                       lookups: set[str], parts: dict[tuple[str, str], Decomposing]) -> list[ObservationRecord]:
    """One kept block's observations, its windows replayed with its `profile` against its native `decodes` (the
    block's own; `windows` by window_id), and its AS2D configurations' speedup bias decomposed into `parts` (but
    a prompt-lookup drafter's, `lookups`: its producer neither computes nor contends)."""
    priced = replayed(block.device, [windows[w] for w in block.windows], traces, profile, configs)
    block_obs = observations(decodes, priced)
    decompose_block(block_obs, decodes, priced, profile, traces, windows,
                    [c for c in configs if isinstance(c, As2dConfig) and c.drafter not in lookups], parts)
    return block_obs


def analyze(out: Path, windows: Sequence[Window], traces: dict[str, TraceFile], configs: Sequence[MethodConfig],
            lookups: set[str], bounds: dict[Metric, Bounds]) -> list[SummaryRecord]:
    """Replay every kept block with its profile, then write observations, summary, the summary priced beside the
    decodes (core/crossfit.py), the op comparison and AS2D's decomposed speedup bias (`lookups`: the drafter
    groups that are prompt lookup, whose ops no table prices and whose producer neither computes nor contends)."""
    blocks = [b for b in load_records(out, BlockRecord) if not b.voided]
    decodes = list(kept(load_records(out, DecodeRecord), blocks))
    by_id = {w.window_id: w for w in windows}
    obs: list[ObservationRecord] = []
    timings: list[tuple[str, fidelity.OpTiming]] = []
    parts: dict[tuple[str, str], Decomposing] = {}
    profiles = block_profiles(out, blocks)
    beside: list[ObservationRecord] = []
    for b in blocks:
        profile = profiles[(b.device, b.block)]
        mine = [d for d in decodes if (d.device, d.block) == (b.device, b.block)]
        obs += block_observations(b, mine, by_id, traces, profile, configs, lookups, parts)
        beside += priced_beside(b.device, mine, by_id, traces, profile, configs, lookups)
        timings += [(b.device, t) for t in op_timings(mine, profile, configs, lookups)]
    write_records(out, ObservationRecord, obs)
    past_allowance = {(b.device, b.block) for b in blocks if b.kept_after_voids}
    summary = summarize(obs, bounds, past_allowance)
    write_records(out, SummaryRecord, summary)
    write_records(out, CrossFitRecord, [CrossFitRecord(**asdict(s)) for s in summarize(beside, bounds, past_allowance)])
    ops = []
    for device in sorted({d for d, _ in timings}):
        ops += [OpRecord(device=device, **row) for row in
                fidelity.op_comparison([t for d, t in timings if d == device], DEPTH_BINS)]
    write_records(out, OpRecord, ops)
    write_records(out, DecompositionRecord, decomposition_records(parts))
    return summary
