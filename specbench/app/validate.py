"""`specbench validate`: does replay predict what the device measures? (docs/METHODS.md §7.9 Validation: does
replay predict the device?)

Once per placement a full profile of the cells the configurations use; then blocks. A
block, on one window shard and one placement: a probe, a refresh of the cost tables (and of
the AS2D configurations' co-scheduling ratios), a probe; per drafter group (in a random
order) one decode job running every window twice, `Na` in a random order of the group's
configurations and `Nb` reversed, each configuration beside a target-only decode of its
own, probes before the first window and after each; a probe, a second refresh, a probe.
Replay prices the block with the full profile whose cost tables and ratios are the mean of
the two refreshes (linear drift between them cancels). A block where both probes around a window
moved from the probes around the refreshes, the same way, by more than an allowance (the threshold, or
a multiple of the probes' scatter in the block, whichever is larger) is voided, and redone after a
cool-down, at most `max_voids` times. Blocks cycle through the shards until every bias interval is as narrow as
asked, or the block budget is spent. The analysis also takes each AS2D configuration's speedup bias
apart (core/decomposition.py): contention, publications, and what remains.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from specbench.core import decomposition, fidelity
from specbench.core.methods.configs import As2dConfig, MethodConfig, SpecAsrConfig, TargetConfig, config_of, row_fields
from specbench.core.repetitions import DEFAULT_MAX_REPETITIONS, MAX_PRECISION_REPETITIONS
from specbench.core.stats import Interval
from specbench.errors import SpecbenchError
from specbench.schemas.fileio import load_yaml
from specbench.schemas.placement import Placement, device_label
from specbench.schemas.profiles import DeviceProfile, load_profile, profile_from_dict, save_profile
from specbench.schemas.traces import TraceFile, check_against_windows, load_trace_dir
from specbench.schemas.validation import (
    OP_KEYS,
    PRODUCER_KEYS,
    Attempted,
    BlockRecord,
    DecodeRecord,
    DecompositionRecord,
    ObservationRecord,
    OpRecord,
    ProbeRecord,
    SummaryRecord,
    append_records,
    kept,
    load_records,
    open_validation,
    write_records,
)
from specbench.schemas.windows import Window, windows_digest
from specbench.world.decode_run import method_job
from specbench.world.devices.base import Device
from specbench.world.environment import now
from specbench.world.model_files import LOOKUP_DRAFTER, ModelFile, model_job
from specbench.world.profiling import SweepPlan, profile_device, write_profile
from specbench.world.tracing import prompts_for

Log = Callable[[str], None]
TARGET = TargetConfig().label
METRICS = ("speedup", "throughput")
DEPTH_BINS = (0, 32, 64, 96, 128)


@dataclass(frozen=True)
class Bounds:
    bias_pct: float
    error_pct: float


@dataclass(frozen=True)
class ValidationPlan:
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

    def __post_init__(self) -> None:
        checks = (("--block-windows", self.block_windows, 1), ("--min-blocks", self.min_blocks, 1),
                  ("--max-blocks", self.max_blocks, 1), ("--max-voids", self.max_voids, 0),
                  ("--repetitions", self.repetitions, 5), ("--probe-repetitions", self.probe_repetitions, 3))
        for flag, value, least in checks:
            if value < least:
                raise SpecbenchError(f"{flag} {value}: expected an integer >= {least}")
        if self.precision is not None and not 0 < self.precision < 1:
            raise SpecbenchError(f"--precision {self.precision:g}: expected a fraction of the median in (0, 1)")
        if self.precision is not None and not self.repetitions <= self.max_repetitions <= MAX_PRECISION_REPETITIONS:
            raise SpecbenchError(f"--max-repetitions {self.max_repetitions}: expected between --repetitions "
                                 f"({self.repetitions}) and {MAX_PRECISION_REPETITIONS}")
        if self.max_blocks < self.min_blocks:
            raise SpecbenchError(f"--max-blocks {self.max_blocks}: expected >= --min-blocks ({self.min_blocks})")
        for flag, pct in (("--halfwidth", self.halfwidth_pct), ("--probe-threshold", self.probe_threshold_pct),
                          ("--speedup-bound", self.speedup.bias_pct),
                          ("--throughput-bound", self.throughput.bias_pct),
                          ("--error-bound", self.speedup.error_pct)):
            if not (pct > 0 and math.isfinite(pct)):
                raise SpecbenchError(f"{flag} {pct}: expected a percentage > 0")
        if not (self.probe_spreads >= 0 and math.isfinite(self.probe_spreads)):
            raise SpecbenchError(f"--probe-spreads {self.probe_spreads}: expected a number >= 0 "
                                 "(0: --probe-threshold alone)")
        if self.cooldown_s < 0:
            raise SpecbenchError(f"--cooldown {self.cooldown_s}: expected seconds >= 0")
        if not self.windows:
            raise SpecbenchError(f"{self.windows_path}: no windows to validate on")

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


def cell_plan(plan: ValidationPlan, placement: Placement, full: bool) -> SweepPlan:
    """The cells the configurations use: the demo's rule (`app.demo.sweep_plan`) in this placement,
    each cell measured as the validation asks (a fixed count, or to a precision), the co-scheduling
    ratios of the AS2D configurations' drafters and widths included (a block's refreshes too: each
    block replays with its own ratios); AS2D's overheads only in the `full` profile and only where an
    AS2D configuration is validated (no other method is charged them). A cross-vocabulary drafter's widths
    are widened to what the serial methods' replay asks of it on the traces (`app.demo.traced_drafter_widths`)."""
    from specbench.app.demo import sweep_plan, traced_drafter_widths

    traced = traced_drafter_widths(plan.traces_dir, plan.windows, plan.configs)
    cells = sweep_plan(list(plan.configs), placement, plan.depths, plan.precision, plan.max_repetitions, traced)
    as2d = any(isinstance(c, As2dConfig) for c in plan.configs)
    return replace(cells, repetitions=plan.repetitions, cosched=as2d, overheads=full and as2d)


def manifest(plan: ValidationPlan) -> dict:
    return {"device": plan.device.name, "windows": {"path": str(plan.windows_path),
                                                    "digest": windows_digest(plan.windows), "count": len(plan.windows)},
            "traces": str(plan.traces_dir), "target": plan.target.ref(),
            "drafters": {name: d.ref() for name, d in sorted(plan.drafters.items())},
            "methods": [row_fields(c) for c in plan.configs], "placements": [p.as_dict() for p in plan.placements],
            "depths": list(plan.depths), "seed": plan.seed, "block_windows": plan.block_windows,
            "min_blocks": plan.min_blocks, "max_blocks": plan.max_blocks, "halfwidth_pct": plan.halfwidth_pct,
            "probe_threshold_pct": plan.probe_threshold_pct, "probe_spreads": plan.probe_spreads,
            "max_voids": plan.max_voids,
            "repetitions": plan.repetitions, "probe_repetitions": plan.probe_repetitions,
            "bounds": {"speedup": vars(plan.speedup), "throughput": vars(plan.throughput)}}


def manifest_configs(doc: dict) -> list[MethodConfig]:
    """The configurations a validation's manifest records (typed fields, as result rows carry them)."""
    return [config_of(fields) for fields in doc["methods"]]


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
            plan = cell_plan(self.plan, placement, True)
            write_profile(path, profile_device(self.plan.device, self.plan.target, self._models(), plan))
        return path

    def _models(self) -> list[ModelFile]:
        return [self.plan.drafters[name] for name in sorted(self.plan.drafters)]

    def refresh(self, placement: Placement, path: Path) -> dict:
        plan = cell_plan(self.plan, placement, False)
        run = profile_device(self.plan.device, self.plan.target, self._models(), plan)
        write_profile(path, run)
        return run.doc

    # -- probes and decodes ---------------------------------------------------------------------------
    def probe_job(self, placement: Placement, drafter: ModelFile | None, where: str) -> dict:
        job = {"mode": "probe", "target": model_job(self.plan.device, self.plan.target, placement.target),
               "probe": {"repetitions": self.plan.probe_repetitions}, "where": where}
        if drafter is not None:
            job["drafter"] = model_job(self.plan.device, drafter, placement.drafter)
        return job

    def probes(self, placement: Placement, where: str, base: dict) -> list[ProbeRecord]:
        """One probe per drafter (the target in each), in a job of its own."""
        out = []
        for name in sorted(self.plan.drafters):
            result = self.plan.device.run_job(self.probe_job(placement, self.plan.drafters[name], where)).results
            out += [probe_record(r, base | {"series": f"refresh:{name}", "drafter": name}) for r in result
                    if r.get("kind") == "probe"]
        return out

    def decode_group(self, placement: Placement, group: str, order: Sequence[str], shard: list[Window],
                     base: dict) -> tuple[list[DecodeRecord], list[ProbeRecord]]:
        by_label = {c.label: c for c in self.plan.configs}
        slots = fidelity.paired_slots(order, TARGET)
        drafter = self.plan.drafters[group]
        refs = self.references[group]
        job = {"mode": "decode", "target": model_job(self.plan.device, self.plan.target, placement.target),
               "drafter": model_job(self.plan.device, drafter, placement.drafter),
               "methods": [method_job(by_label[label]) for label in slots], "warmup": True, "runs": 2,
               "warmup_runs": 0, "alternate": True, "probe": {"repetitions": self.plan.probe_repetitions},
               "windows": [self.prompts[group].runner_window(w, refs[w.window_id]) for w in shard]}
        if self.plan.target.hears_audio:  # Whisper: a window's four decodes share one encoding (none is timed)
            job["reuse_audio_prefill"] = True
        decodes, probes = [], []

        def on_line(doc: dict) -> None:
            r = doc.get("result") or {}
            if r.get("kind") in ("decode", "divergence") and r.get("slot", 0) == len(slots) - 1 and r["sample"] == 0:
                self.advance(1)

        results = self.plan.device.run_job(job, on_line).results
        for r in results:
            if r.get("kind") == "probe":
                probes.append(probe_record(r, base | {"series": f"decode:{group}", "drafter": group}))
            elif r.get("kind") in ("decode", "divergence"):
                decodes.append(decode_record(r, slots, base | {"group": group}))
        expected = 2 * len(slots) * len(shard)
        if len(decodes) != expected:
            raise SpecbenchError(f"the runner returned {len(decodes)} decodes of group {group}, expected {expected}")
        return decodes, probes

    # -- blocks ---------------------------------------------------------------------------------------
    def run_block(self, block: int, placement: Placement, shard: list[Window]) -> BlockRecord:
        device = device_label(self.plan.device.name, placement)
        order = fidelity.block_order(self.plan.seed, block, device,
                                     {g: [c.label for c in cs] for g, cs in self.plan.groups().items()})
        where = self.out / "profiles" / f"{placement.label}-b{block:03d}"
        where.mkdir(parents=True, exist_ok=True)
        start_snapshot = self.plan.device.snapshot()
        # an attempt cut short (its records written, its BlockRecord not) keeps its number: never kept
        written: list[Attempted] = [*load_records(self.out, BlockRecord), *load_records(self.out, DecodeRecord),
                                    *load_records(self.out, ProbeRecord)]
        first = 1 + max((r.attempt for r in written if (r.device, r.block) == (device, block)), default=-1)
        for redo in range(self.plan.max_voids + 1):
            attempt = first + redo
            started, clock = now(), time.monotonic()
            base = {"block": block, "attempt": attempt, "device": device}
            probes = self.probes(placement, "refresh-1 before", base)
            refreshes = [self.refresh(placement, where / f"refresh-1-a{attempt}.yaml")]
            probes += self.probes(placement, "refresh-1 after", base)
            decodes = []
            for group in order.groups:
                got, seen = self.decode_group(placement, group, order.methods[group], shard, base)
                decodes += got
                probes += seen
            probes += self.probes(placement, "refresh-2 before", base)
            refreshes.append(self.refresh(placement, where / f"refresh-2-a{attempt}.yaml"))
            probes += self.probes(placement, "refresh-2 after", base)
            drift = block_drift(probes, self.plan.probe_threshold_pct, self.plan.probe_spreads)
            voided = drift.voids and redo < self.plan.max_voids
            record = BlockRecord(block, attempt, device, [w.window_id for w in shard], list(order.groups),
                                 {g: list(m) for g, m in order.methods.items()}, self.plan.seed,
                                 round(drift.move_pct, 3), drift.where, voided, drift.voids and not voided, started,
                                 round(time.monotonic() - clock, 3), round(drift.allowance_pct, 3))
            if not voided:
                profile = merged_profile(load_yaml(self.full_profile(placement)), refreshes)
                save_profile(where / "profile.yaml", profile_from_dict(profile, where / "profile.yaml"))
            append_records(self.out, decodes + probes + [record])
            if not voided:
                return record
            self.log(f"block {block} ({device}) voided: a probe moved {drift.move_pct:.1f}% (allowed "
                     f"{drift.allowance_pct:.1f}%; {drift.where}); cooling down, redo "
                     f"{redo + 1} of {self.plan.max_voids}")
            cool_down(self.plan.device, start_snapshot, self.plan.cooldown_s)
        raise AssertionError("unreachable: the last attempt is kept")

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
                       {"speedup": plan.speedup, "throughput": plan.throughput})


def fidelity_done(summary: SummaryRecord, halfwidth_pct: float) -> bool:
    if summary.bias_low is None or summary.bias_high is None:
        return False
    return 50 * (summary.bias_high - summary.bias_low) <= halfwidth_pct


def probe_record(r: dict, base: dict) -> ProbeRecord:
    return ProbeRecord(base["block"], base["attempt"], base["device"], base["series"], str(r.get("where", "")),
                       r.get("window_id"), base.get("drafter"), float(r["target_us"]),
                       None if r.get("drafter_us") is None else float(r["drafter_us"]),
                       int(r.get("run_queue_wait_us", -1)), int(r.get("steal_ticks", -1)),
                       [int(k) for k in r.get("cpu_khz", [])], int(r.get("t_us", 0)),
                       _samples(r.get("target_samples_us")), _samples(r.get("drafter_samples_us")))


def _samples(values: list | None) -> list[float] | None:
    return None if values is None else [float(v) for v in values]


def decode_record(r: dict, slots: Sequence[str], base: dict) -> DecodeRecord:
    ok = r["kind"] == "decode"
    tokens = len(r["tokens"]) - 1 if ok else 0  # y[0] comes from the prefill, before the clock
    ops = [{k: op[k] for k in OP_KEYS if k in op} for op in r.get("ops", [])] if ok else []
    producer = r.get("producer") if ok else None
    return DecodeRecord(base["block"], base["attempt"], base["device"], base["group"], "ab"[int(r["sample"]) % 2],
                        int(r["slot"]), slots[int(r["slot"])], r["window_id"], tokens,
                        float(r["decode_s"]) if ok else 0.0, ok, ops,
                        None if producer is None else {k: producer[k] for k in PRODUCER_KEYS if k in producer})


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


def merged_profile(full: dict, refreshes: Sequence[dict]) -> dict:
    """The full profile with every refreshed cost cell and co-scheduling ratio replaced by the mean
    of the refreshes (a ratio cell's count: the refreshes' together, its achieved precision: the
    worse of theirs), and the refreshes' warnings beside the full profile's."""
    out = dict(full)

    def mean_table(table: dict, fresh: Sequence[dict]) -> dict:
        if any(f["depths"] != table["depths"] for f in fresh):
            raise SpecbenchError("a refresh measured other depths than the full profile")
        seconds = dict(table["seconds"])
        for width in fresh[0]["seconds"]:
            columns = [f["seconds"][width] for f in fresh]
            seconds[width] = [sum(v) / len(v) for v in zip(*columns, strict=False)]
        return table | {"seconds": seconds}

    out["target"] = full["target"] | {"costs": mean_table(full["target"]["costs"],
                                                          [r["target"]["costs"] for r in refreshes])}
    drafters = []
    for entry in full["drafters"]:
        fresh = [next(d for d in r["drafters"] if d["name"] == entry["name"]) for r in refreshes]
        entry = entry | {"costs": mean_table(entry["costs"], [f["costs"] for f in fresh])}
        if "costs_all_rows" in entry and all("costs_all_rows" in f for f in fresh):
            entry["costs_all_rows"] = mean_table(entry["costs_all_rows"], [f["costs_all_rows"] for f in fresh])
        if "cosched" in entry and all("cosched" in f for f in fresh):
            entry["cosched"] = mean_ratios(entry["cosched"], [f["cosched"] for f in fresh])
        drafters.append(entry)
    out["drafters"] = drafters
    warnings = [w for doc in (full, *refreshes) for w in doc.get("warnings", [])]
    if warnings:
        out["warnings"] = [w for i, w in enumerate(warnings) if w not in warnings[:i]]
    fresh_ratios = any("cosched" in d for r in refreshes for d in r["drafters"])
    out["notes"] = (f"{full.get('notes', '')}; cost tables{' and co-scheduling ratios' if fresh_ratios else ''}: "
                    "the mean of a block's two refreshes")
    return out


def mean_ratios(cosched: dict, fresh: Sequence[dict]) -> dict:
    """A profile's `cosched` block with every width the refreshes measured replaced by their mean, and
    the target's ratio in AS2D decodes (`decode`) by the refreshes' means when each has one."""
    if any(f["depths"] != cosched["depths"] for f in fresh):
        raise SpecbenchError("a refresh measured co-scheduling ratios at other depths than the full profile")
    ratios = dict(cosched["ratios"])
    for width in fresh[0]["ratios"]:
        cells = [f["ratios"][width] for f in fresh if width in f["ratios"]]
        if len(cells) < len(fresh):
            continue  # a width one refresh could not measure keeps the full profile's ratios
        merged = {key: [sum(v) / len(v) for v in zip(*(c[key] for c in cells), strict=True)]
                  for key in ("rho_target", "rho_drafter")}
        if all("repetitions" in c for c in cells) and "repetitions" in next(iter(ratios.values())):
            merged["repetitions"] = [sum(v) for v in zip(*(c["repetitions"] for c in cells), strict=True)]
        if all("achieved_precision" in c for c in cells) and "achieved_precision" in next(iter(ratios.values())):
            # null: a cell with no interval, worse than any precision
            merged["achieved_precision"] = [None if None in v else max(v)
                                            for v in zip(*(c["achieved_precision"] for c in cells), strict=True)]
        ratios[width] = merged
    out = cosched | {"ratios": ratios}
    decodes = [f["decode"] for f in fresh if "decode" in f]
    if decodes and len(decodes) == len(fresh):  # the target's ratio as each refresh's AS2D decodes met it
        out["decode"] = {"realised": sum(d["realised"] for d in decodes) / len(decodes),
                         "priced": sum(d["priced"] for d in decodes) / len(decodes),
                         "forwards": sum(d["forwards"] for d in decodes)}
    return out


def cool_down(device: Device, start: dict, seconds: float) -> None:
    """Sleep `seconds`; a phone then waits (up to 5 minutes) until its thermal zones are within
    3 °C of where the block started and its thermal status is 0."""
    time.sleep(seconds)
    zones = _zones(start)
    if not zones:
        return
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        snap = device.snapshot()
        now_zones = _zones(snap)
        status = (snap.get("thermal") or {}).get("status", 0)
        if status in (0, "unavailable") and all(now_zones.get(z, t) <= t + 3.0 for z, t in zones.items()):
            return
        time.sleep(5)


def _zones(snapshot: dict) -> dict[str, float]:
    zones = snapshot.get("thermal_c") or {}
    if not isinstance(zones, dict):
        return {}
    return {str(k): float(v) for k, v in zones.items() if isinstance(v, (int, float))}


def observations(decodes: Sequence[DecodeRecord],
                 replay: dict[tuple[str, str, str], tuple[int, float]]) -> list[ObservationRecord]:
    """Per (device, configuration, window): speedup and throughput of replay, Na and Nb (pure).

    `replay` maps (device, config, window_id) to the block's replayed (tokens, decode_s).
    A native speedup divides a configuration's throughput by that of
    the target-only decode in the slot before it (Na) or after it (Nb); target-only's own
    throughput is the mean over its decodes in the run. Windows with a divergent decode are left out."""
    out = []
    index: dict[tuple, DecodeRecord] = {(d.device, d.block, d.group, d.window_id, d.run, d.slot): d for d in decodes}
    keys = sorted({(d.device, d.block, d.window_id) for d in decodes})
    for device, block, window_id in keys:
        mine = [d for d in decodes if (d.device, d.block, d.window_id) == (device, block, window_id)]
        if not all(d.lossless for d in mine):
            continue
        rep_t = replay.get((device, TARGET, window_id))
        if rep_t is None:
            continue
        target_tokens = next(d.tokens for d in mine if d.config == TARGET)
        native_target = {}
        for run in "ab":
            times = [d.decode_s for d in mine if d.config == TARGET and d.run == run]
            native_target[run] = target_tokens / (sum(times) / len(times))
        out.append(ObservationRecord(device, TARGET, "throughput", block, window_id, rep_t[0] / rep_t[1],
                                     native_target["a"], native_target["b"]))
        for d in (d for d in mine if d.config != TARGET and d.run == "a"):
            rep = replay.get((device, d.config, window_id))
            if rep is None:
                continue
            b = index[(device, block, d.group, window_id, "b", d.slot)]
            pa = index[(device, block, d.group, window_id, "a", fidelity.partner_slot(d.slot))]
            pb = index[(device, block, d.group, window_id, "b", fidelity.partner_slot(d.slot))]
            tps = (d.tokens / d.decode_s, b.tokens / b.decode_s)
            out.append(ObservationRecord(device, d.config, "throughput", block, window_id, rep[0] / rep[1], *tps))
            out.append(ObservationRecord(device, d.config, "speedup", block, window_id,
                                         (rep[0] / rep[1]) / (rep_t[0] / rep_t[1]), tps[0] / (pa.tokens / pa.decode_s),
                                         tps[1] / (pb.tokens / pb.decode_s)))
    return out


def summarize(obs: Sequence[ObservationRecord], bounds: dict[str, Bounds]) -> list[SummaryRecord]:
    groups: dict[tuple[str, str, str], list[fidelity.Observation]] = {}
    for o in obs:
        groups.setdefault((o.device, o.config, o.metric), []).append(
            fidelity.Observation(o.block, o.window_id, o.replay, o.native_a, o.native_b))
    out = []
    for (device, config, metric), mine in groups.items():
        s = fidelity.fidelity_stats(mine)
        bound = bounds[metric]

        def lo(b):
            return None if b is None else b.low

        def hi(b):
            return None if b is None else b.high

        out.append(SummaryRecord(device, config, metric, s.blocks, s.observations, s.f0_pct, lo(s.f0_interval),
                                 hi(s.f0_interval), s.f1_pct, lo(s.f1_interval), hi(s.f1_interval), s.excess_pct,
                                 s.excess_upper_pct, s.bias, lo(s.bias_interval), hi(s.bias_interval), bound.bias_pct,
                                 bound.error_pct, fidelity.verdict(s, bound.bias_pct, bound.error_pct)))
    return out


def analyze(out: Path, windows: Sequence[Window], traces: dict[str, TraceFile], configs: Sequence[MethodConfig],
            lookups: set[str], bounds: dict[str, Bounds]) -> list[SummaryRecord]:
    """Replay every kept block with its profile, then write observations, summary, the op
    comparison and AS2D's decomposed speedup bias (`lookups`: the drafter groups that are prompt
    lookup, whose ops no table prices and whose producer neither computes nor contends)."""
    from specbench.app.parallel_replay import replay_study_in_processes

    blocks = [b for b in load_records(out, BlockRecord) if not b.voided]
    decodes = list(kept(load_records(out, DecodeRecord), blocks))
    by_id = {w.window_id: w for w in windows}
    obs: list[ObservationRecord] = []
    timings: list[tuple[str, fidelity.OpTiming]] = []
    parts: dict[tuple[str, str], Decomposing] = {}
    for b in blocks:
        label = b.device.rsplit("@", 1)[-1]
        profile = load_profile(out / "profiles" / f"{label}-b{b.block:03d}" / "profile.yaml")
        frame = replay_study_in_processes([by_id[w] for w in b.windows], traces, [profile], configs, workers=1)
        per_block = {(b.device, c, w): (int(t), float(s)) for c, w, t, s in
                     zip(frame["config"], frame["window_id"], frame["tokens"], frame["decode_s"], strict=False)}
        mine = [d for d in decodes if (d.device, d.block) == (b.device, b.block)]
        block_obs = observations(mine, per_block)
        obs += block_obs
        timings += [(b.device, t) for t in op_timings(mine, profile, configs, lookups)]
        decompose_block(block_obs, mine, per_block, profile, traces, by_id,
                        [c for c in configs if isinstance(c, As2dConfig) and c.drafter not in lookups], parts)
    write_records(out, ObservationRecord, obs)
    summary = summarize(obs, bounds)
    write_records(out, SummaryRecord, summary)
    ops = []
    for device in sorted({d for d, _ in timings}):
        ops += [OpRecord(device=device, **row) for row in
                fidelity.op_comparison([t for d, t in timings if d == device], DEPTH_BINS)]
    write_records(out, OpRecord, ops)
    write_records(out, DecompositionRecord, decomposition_records(parts))
    return summary


@dataclass
class Decomposing:
    """One AS2D configuration's decomposed observations, gathered over the blocks."""

    windows: list[decomposition.WindowReplays] = field(default_factory=list)
    realised: list[decomposition.RealisedContention] = field(default_factory=list)
    """Every decomposed native run's realised contention."""
    left_out: int = 0
    """Speedup observations whose native lanes could not be read back."""


def decompose_block(obs: Sequence[ObservationRecord], decodes: Sequence[DecodeRecord],
                    replay: dict[tuple[str, str, str], tuple[int, float]], profile: DeviceProfile,
                    traces: dict[str, TraceFile], windows: dict[str, Window], configs: Sequence[As2dConfig],
                    into: dict[tuple[str, str], Decomposing]) -> None:
    """Each speedup observation of an AS2D configuration in one block (`decodes`, `replay`: the
    block's): replay's speedup again under each native run's substitutions (core/decomposition.py).
    A run whose lanes cannot be read back (no timestamps, publications not in batches) leaves its
    observation out, counted."""
    by_label = {c.label: c for c in configs}
    index = {(d.group, d.window_id, d.run, d.slot): d for d in decodes}
    for o in obs:
        config = by_label.get(o.config)
        if o.metric != "speedup" or config is None:
            continue
        gathered = into.setdefault((o.device, o.config), Decomposing())
        trace, cap = traces[str(config.drafter)].windows[o.window_id], windows[o.window_id].cap
        priced_s = replay[(o.device, o.config, o.window_id)][1]
        try:
            runs = []
            for run in "ab":
                d = next(d for d in decodes if (d.window_id, d.config, d.run) == (o.window_id, o.config, run))
                if d.producer is None:
                    raise SpecbenchError(f"{d.config} of window '{d.window_id}': no producer record")
                partner = index[(d.group, d.window_id, run, fidelity.partner_slot(d.slot))]
                native = decomposition.NativeLanes(d.ops, d.producer, partner.ops)
                runs.append(decomposition.substituted_replays(trace, cap, profile, config, native))
        except SpecbenchError:
            gathered.left_out += 1
            continue

        # the priced speedup with another decode time: the target-only replay stays
        contention = tuple(o.replay * priced_s / r.contention_s for r in runs)
        publication = tuple(o.replay * priced_s / r.publication_s for r in runs)
        gathered.windows.append(decomposition.WindowReplays(o.block, o.window_id, (o.native_a, o.native_b), o.replay,
                                                            (contention[0], contention[1]),
                                                            (publication[0], publication[1])))
        gathered.realised += [r.realised for r in runs]


def decomposition_records(gathered: dict[tuple[str, str], Decomposing]) -> list[DecompositionRecord]:
    """Per device × AS2D configuration with an observation decomposed, one record per part."""
    out = []
    for (device, config), mine in sorted(gathered.items()):
        if not mine.windows:
            continue
        overlap = sum(r.overlap_s for r in mine.realised)
        rho = ((sum(r.priced_overlap_s for r in mine.realised) / overlap,
                overlap / sum(r.overlap_solo_s for r in mine.realised)) if overlap > 0 else (None, None))
        blocks = len({w.block for w in mine.windows})
        for p in decomposition.decompose(mine.windows):
            out.append(DecompositionRecord(
                device, config, p.part.value, blocks, len(mine.windows), mine.left_out, p.factor,
                *_bounds(p.interval), p.replay_bias, *_bounds(p.replay_interval),
                *(rho if p.part is decomposition.Part.CONTENTION else (None, None))))
    return out


def _bounds(interval: Interval | None) -> tuple[float | None, float | None]:
    return (None, None) if interval is None else (interval.low, interval.high)


def analyze_directory(out: Path) -> list[SummaryRecord]:
    """`analyze` from what a validation directory's manifest records (no device needed)."""
    from specbench.schemas.validation import read_manifest
    from specbench.schemas.windows import load_windows

    doc = read_manifest(out)
    bounds = {metric: Bounds(**values) for metric, values in doc["bounds"].items()}
    lookups = {name for name, ref in doc["drafters"].items() if ref.get("sha256") == LOOKUP_DRAFTER.sha256}
    return analyze(Path(out), load_windows(Path(doc["windows"]["path"])), load_trace_dir(Path(doc["traces"])),
                   manifest_configs(doc), lookups, bounds)


def op_timings(decodes: Sequence[DecodeRecord], profile, configs: Sequence[MethodConfig],
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
        for op in d.ops:
            if op["model"] == "target":
                table, model = profile.target_costs, "target"
            elif lookup or isinstance(config, SpecAsrConfig):
                continue  # a lookup's op or a recycling ingest: other tables
            else:
                table, model = profile.drafter(d.group).costs, d.group
            if op["width"] not in table.widths():
                continue
            out.append(fidelity.OpTiming(d.config, model, int(op["width"]), int(op["depth"]), float(op["us"]),
                                         1e6 * table.cost(int(op["width"]), float(op["depth"]))))
    return out

