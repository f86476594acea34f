"""Profile a device: width sweeps (and co-scheduling ratios) -> a DeviceProfile YAML.

The runner's `sweep` times target forwards of widths 1..W (logits for every row) and
drafter forwards of widths 1..n at several KV depths, each the median of >= 5 timed
repetitions after warm-up. Medians become the profile's costs, standard deviations its
`spread`, and every raw sample goes to a `*.samples.jsonl` file beside the profile (the
co-scheduling records' samples too, and the overheads decodes' op logs: `decode` records). A
timing whose samples spread more than 10% of their median becomes one of the profile's
`warnings` (docs/METHODS.md §4.6 Stability warnings).

Every table is measured in one placement (docs/METHODS.md §4.1 Placement): the target's forwards on the
target lane, the drafter's on the drafter lane (each pinned to its CPU set, with its thread
count), and the co-scheduling ratios with both lanes pinned exactly as native AS2D runs
them, at every profiled depth. The runner reads each lane's CPU set back from the kernel;
the profile records it, and a lane that did not run where it was asked is an error.

The prompt-lookup drafter (`pld`, no model) gets a drafter entry too: `costs` at width 1 is
the measured time of one lookup over a context of each depth (the runner's sweep times it
on the target's thread, where decode runs it). It has no all-rows table and no
co-scheduling ratios: a lookup runs between the target's forwards, never beside them.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from specbench.core.cosched import CellSamples, Measured, measure_to_rule
from specbench.core.decomposition import decode_contention
from specbench.core.pricing import (
    CLASS_FORWARDS,
    SERIAL_CLASSES,
    CoSchedule,
    CostTable,
    DecodeRatio,
    decode_ratio,
    width_ranges,
)
from specbench.core.repetitions import (
    DEFAULT_MAX_REPETITIONS,
    DEFAULT_PRECISION,
    MAX_OVERHEADS_WINDOWS,
    MAX_PRECISION_REPETITIONS,
    MIN_REPETITIONS,
    OVERHEADS_WINDOWS,
    RepetitionRule,
    achieved_precision,
)
from specbench.core.stability import decode_warnings, stability_warnings
from specbench.errors import SpecbenchError, WriteError
from specbench.schemas.environment import KEY as ENV_KEY
from specbench.schemas.environment import environment_to_dict, manifest_environment
from specbench.schemas.fileio import Where, dump_yaml, dumps_line, write_atomic
from specbench.schemas.placement import Placement, pinning_problems
from specbench.schemas.profiles import (
    DeviceInfo,
    DeviceProfile,
    DrafterProfile,
    LanePinning,
    ModelId,
    Overheads,
    Snapshots,
    profile_from_dict,
    profile_to_dict,
    save_profile,
)
from specbench.schemas.windows import Window
from specbench.world.devices.base import Device
from specbench.world.environment import loaded_models, now, session, state
from specbench.world.jobs import CoschedJob, SweepJob
from specbench.world.model_files import ModelFile, model_job
from specbench.world.overheads import ZERO as ZERO_OVERHEADS
from specbench.world.overheads import (
    OverheadsRun,
    measure_overheads,
    prompt_tokens,
    workload_selection,
    workload_windows,
)

Progress = Callable[[int], None]
DRAFTER_LOGITS = "last"
"""Drafter forwards keep the last row's logits (an AR step, an SD ingest); a second table
keeps every row (`costs_all_rows`: SpecASR's recycling ingest reads a row per token)."""


@dataclass(frozen=True)
class SweepPlan:
    widths: tuple[int, ...]
    """Target forward widths (tokens per forward), logits for all rows."""
    drafter_widths: tuple[int, ...]
    depths: tuple[int, ...]
    """KV depths before each timed forward."""
    placement: Placement
    """Where each lane runs; every table is measured there."""
    repetitions: int = 5
    """Timed forwards per cell: the fixed count, or the minimum with a `precision`."""
    warmup: int = 1
    cosched: bool = True
    """Measure co-scheduling ratios."""
    cosched_widths: Mapping[str, tuple[int, ...]] | None = None
    """Per drafter name, the target widths co-scheduled with it (None: every drafter at every width
    of `widths`; a drafter not named is not co-scheduled: no AS2D configuration drafts with it)."""
    all_rows: frozenset[str] | None = None
    """Drafters that get the all-rows table (None: every drafter; only SpecASR reads it)."""
    overheads: bool = True
    """Measure AS2D's overheads (a validation's refreshes time the cost tables only)."""
    overheads_windows: int = OVERHEADS_WINDOWS
    """Copies of the overheads job's window, each decoded twice by target-only, by AS2D and by SD."""
    workload: tuple[Window, ...] = ()
    """The workload's windows: the overheads decodes run on as many of them as hold `overheads_windows` copies
    of the passage of prose (text models) or of the speech sample (Whisper models) instead of those copies
    (`workload_selection`; empty: the copies)."""
    precision: float | None = None
    """Forward-cost cells take samples until their median's ~95% interval is within this fraction
    of it (None: `repetitions` each; docs/METHODS.md §4.2 Forward costs: CT, CD and the all-rows table)."""
    max_repetitions: int = DEFAULT_MAX_REPETITIONS
    """Most timed forwards per cell with a `precision`."""
    drafter_widths_of: Mapping[str, tuple[int, ...]] | None = None
    """Per drafter name, the drafter widths swept (None, or a drafter not named: `drafter_widths`)."""
    encoder: bool = True
    """Time each Whisper model's encoder over one window (the profile's `audio_prefill_s`; False: left out)."""
    cosched_fixed: bool = False
    """Co-scheduling cells at `repetitions` each whatever the `precision` (`demo --speech`: its overheads decodes'
    ratios price every AS2D forward, so the cells are their fallback; docs/METHODS.md §4.3 Co-scheduling
    ratios)."""

    def __post_init__(self) -> None:
        if not self.widths or min(self.widths) < 1 or (self.drafter_widths and min(self.drafter_widths) < 1):
            raise SpecbenchError("widths must be >= 1")
        if not self.depths or min(self.depths) < 0:
            raise SpecbenchError("depths must be >= 0 (e.g. --depths 0,128,256)")
        if self.repetitions < MIN_REPETITIONS:
            raise SpecbenchError(f"--repetitions {self.repetitions}: at least {MIN_REPETITIONS} are needed for a "
                                 "median and spread")
        if self.precision is not None:
            repetition_rule(self.precision, self.repetitions, self.max_repetitions)
        if not 1 <= self.overheads_windows <= MAX_OVERHEADS_WINDOWS:
            raise SpecbenchError(f"--overheads-windows {self.overheads_windows}: expected 1 to {MAX_OVERHEADS_WINDOWS}")

    @property
    def rule(self) -> RepetitionRule:
        """How many timed forwards each forward-cost cell takes."""
        if self.precision is None:
            return RepetitionRule.fixed(self.repetitions)
        return repetition_rule(self.precision, self.repetitions, self.max_repetitions)

    @property
    def cosched_rule(self) -> RepetitionRule:
        """How many target forwards a side each co-scheduling cell takes: `rule`, or the fixed count."""
        return RepetitionRule.fixed(self.repetitions) if self.cosched_fixed else self.rule

    def forwards(self, drafters: Sequence[ModelFile]) -> int:
        """Timed (model, width, depth) records `profile_device` collects for these drafters (a
        lookup drafter: one record per depth, width 1)."""
        cells = len(self.widths)
        for drafter in drafters:
            widths = len(drafter_widths(self, drafter))
            all_rows = not drafter.lookup and (self.all_rows is None or drafter.name in self.all_rows)
            cells += widths * (2 if all_rows else 1)
        return cells * len(self.depths)


def plan_for(max_width: int, depths: Sequence[int], placement: Placement, repetitions: int = 5,
             drafter_max_width: int | None = None, cosched: bool = True, precision: float | None = None,
             max_repetitions: int = DEFAULT_MAX_REPETITIONS, overheads_windows: int = OVERHEADS_WINDOWS,
             workload: Sequence[Window] = ()) -> SweepPlan:
    return SweepPlan(tuple(range(1, max_width + 1)), tuple(range(1, (drafter_max_width or max_width) + 1)),
                     tuple(sorted(set(depths))), placement, repetitions, 1, cosched, precision=precision,
                     max_repetitions=max_repetitions, overheads_windows=overheads_windows, workload=tuple(workload))


def repetition_rule(precision: float, min_repetitions: int, max_repetitions: int) -> RepetitionRule:
    """The rule of `profile --precision`, or a one-line error naming the flag that is out of range."""
    if not 0 < precision < 1:
        raise SpecbenchError(f"--precision {precision:g}: expected a fraction of the median in (0, 1), e.g. "
                             f"{DEFAULT_PRECISION:g} for 2%")
    if min_repetitions < MIN_REPETITIONS:
        raise SpecbenchError(f"--min-repetitions {min_repetitions}: expected >= {MIN_REPETITIONS}")
    if not min_repetitions <= max_repetitions <= MAX_PRECISION_REPETITIONS:
        raise SpecbenchError(f"--max-repetitions {max_repetitions}: expected between --min-repetitions "
                             f"({min_repetitions}) and {MAX_PRECISION_REPETITIONS}")
    return RepetitionRule(min_repetitions, max_repetitions, precision)


def rule_job(rule: RepetitionRule) -> dict:
    """A sweep job's keys for the rule (docs: specbench/native/README.md)."""
    if rule.precision is None:
        return {"repetitions": rule.min_repetitions}
    return {"precision": rule.precision, "min_repetitions": rule.min_repetitions,
            "max_repetitions": rule.max_repetitions}


def parse_depths(text: str) -> tuple[int, ...]:
    try:
        depths = tuple(sorted({int(v) for v in text.split(",") if v.strip()}))
    except ValueError:
        raise SpecbenchError(f"--depths '{text}': expected comma-separated integers, e.g. 0,128,256") from None
    if not depths or depths[0] < 0:
        raise SpecbenchError(f"--depths '{text}': expected KV depths >= 0")
    return depths


@dataclass(frozen=True)
class ProfileRun:
    """What profiling produced: the profile and the raw samples its medians came from."""

    profile: DeviceProfile
    samples: list[dict] = field(default_factory=list)
    """The runner's timing records, each with the name of the model it timed (`*.samples.jsonl`)."""

    @property
    def doc(self) -> dict:
        """The profile as its YAML document."""
        return profile_to_dict(self.profile)


def sweep_job(device: Device, target: ModelFile, drafter: ModelFile | None, plan: SweepPlan,
              target_widths: Sequence[int] | None = None, drafter_logits: str = DRAFTER_LOGITS) -> dict:
    """The runner's sweep job; `target_widths` () with a drafter: the drafter's tables only."""
    widths = list(plan.widths if target_widths is None else target_widths)
    job = SweepJob(model_job(device, target, plan.placement.target), widths, list(plan.depths), plan.warmup, 42,
                   **rule_job(plan.rule))
    if drafter is not None:
        job = replace(job, drafter=model_job(device, drafter, plan.placement.drafter),
                      drafter_widths=list(drafter_widths(plan, drafter)), drafter_logits=drafter_logits)
    # the encoders are timed once: not in a refresh, nor in the all-rows job, nor where the plan leaves them out
    if not plan.encoder or not plan.overheads or drafter_logits == "all":
        job = replace(job, encoder=False)
    return job.to_dict()


def drafter_widths(plan: SweepPlan, drafter: ModelFile) -> tuple[int, ...]:
    """The drafter widths swept: a lookup is one op of width 1."""
    return (1,) if drafter.lookup else (plan.drafter_widths_of or {}).get(drafter.name, plan.drafter_widths)


def cost_table(results: Sequence[dict], model: str, widths: Sequence[int], depths: Sequence[int],
               label: str, rule: RepetitionRule) -> CostTable:
    """A profile cost table (medians, spreads, counts and achieved precisions per cell) from sweep
    results of one model; the precision each cell reached is recomputed from its samples."""
    got = {(r["width"], r["depth"]): r for r in results if r.get("kind") == "forward" and r.get("model") == model}
    missing = [(w, d) for w in widths for d in depths if (w, d) not in got]
    if missing:
        raise SpecbenchError(f"the runner's sweep lacks {model} width {missing[0][0]} at depth {missing[0][1]}")

    def per_cell(value: Callable[[dict], float]) -> dict[int, np.ndarray]:
        return {int(w): np.array([value(got[(w, d)]) for d in depths], dtype=np.float64) for w in widths}

    return CostTable(np.asarray(depths, dtype=np.float64), per_cell(lambda r: r["median_us"] / 1e6), label,
                     spread=per_cell(lambda r: r["stdev_us"] / 1e6),
                     repetitions=per_cell(lambda r: len(r["samples_us"])),
                     achieved_precision=per_cell(lambda r: achieved_precision(r["samples_us"])),
                     precision=rule.precision)


def co_schedule(results: Sequence[dict], depths: Sequence[int], precision: float | None = None) -> CoSchedule | None:
    """Ratios per target width and depth from the cells' cosched records (`cosched_record`; None:
    none measured), with each cell's count and achieved precision; a width needs a drafter ratio
    at every depth."""
    got = {(int(r["width"]), int(r["depth"])): r for r in results if r.get("kind") == "cosched"}
    rho_t, rho_d, reps, achieved = {}, {}, {}, {}
    for w in sorted({w for w, _ in got}):
        found = [got.get((w, d)) for d in depths]
        rows = [r for r in found if r is not None]
        if len(rows) < len(found) or any(r.get("rho_drafter") is None for r in rows):
            continue  # no drafter step fell inside the target's span: not measured at this width
        rho_t[w] = np.array([float(r["rho_target"]) for r in rows])
        rho_d[w] = np.array([float(r["rho_drafter"]) for r in rows])
        reps[w] = np.array([int(r["repetitions"]) for r in rows], dtype=np.int64)
        achieved[w] = np.array([math.inf if r["achieved_precision"] is None else float(r["achieved_precision"])
                                for r in rows])
    if not rho_t:
        return None
    return CoSchedule(np.asarray(depths, dtype=np.float64), rho_t, rho_d, repetitions=reps,
                      achieved_precision=achieved, precision=precision)


def cosched_record(cell: CellSamples, measured: Measured) -> dict:
    """One cell's record for the samples file and `co_schedule`: its ratios from every sample of
    its (last) measurement, their intervals and precision, the runner jobs' order metadata, and
    a ratio below 1 beyond its interval after the re-measurement (`below_one`, a warning)."""
    rho_t, rho_d, achieved = cell.rho_target(), cell.rho_drafter(), cell.achieved_precision()
    cell_key = (cell.width, cell.depth)
    record: dict = {
        "kind": "cosched", "width": cell.width, "depth": cell.depth, "rho_target": rho_t.ratio,
        "rho_target_interval": [rho_t.low, rho_t.high],
        "rho_drafter": None if rho_d is None else rho_d.ratio,
        "rho_drafter_interval": None if rho_d is None else [rho_d.low, rho_d.high],
        # None: no interval (no drafter step inside a together span); JSON has no infinity
        "repetitions": cell.count, "achieved_precision": achieved if math.isfinite(achieved) else None,
        "jobs": [{k: r[k] for k in ("seed", "order", "width_order", "bursts", "repetitions", "warmup") if k in r}
                 for r in cell.records],
        "samples": {m: list(v) for m, v in cell.samples_us.items()},
        "remeasured": cell_key in measured.remeasured}
    first = next((c for c in measured.discarded if (c.width, c.depth) == cell_key), None)
    if first is not None:
        record["first_measurement"] = {m: list(v) for m, v in first.samples_us.items()}
    below = [b for b in measured.below_one if (b.width, b.depth) == cell_key]
    if below:
        record["below_one"] = [{"ratio": b.ratio, "value": b.estimate.ratio, "low": b.estimate.low,
                                "high": b.estimate.high} for b in below]
    return record


def profile_device(device: Device, target: ModelFile, drafters: Sequence[ModelFile], plan: SweepPlan,
                   progress: Progress | None = None, cells: DeviceProfile | None = None) -> ProfileRun:
    """Sweep the target and every drafter on `device`; returns the profile and its samples. With `cells` (a
    profile of the plan's cells, e.g. a validation block's first refresh) nothing is swept: its cost tables and
    co-scheduling cells are kept and only the decodes behind the decode ratios run again, each ratio against
    those cells, so that the profile prices what the new decodes met."""
    samples: list[dict] = []
    before = device.snapshot()
    environment = session(device, before)
    described = device.describe()
    label = f"profile of {device.name}"

    def named(results: list[dict], drafter: ModelFile | None) -> list[dict]:
        """Raw samples, each with the name of the model it timed."""
        def model_name(result: dict) -> str:
            if result.get("model") == "target":
                return target.name
            if drafter is None:
                raise SpecbenchError(f"{label}: a target-only sweep returned {result.get('model')} results")
            return drafter.name

        return [r | {"model_name": model_name(r)} for r in results]

    def count(doc: dict) -> None:
        if progress and doc.get("result", {}).get("kind") == "forward":
            progress(1)

    # the target is swept once, with the first drafter; the later jobs time their drafter's tables only
    jobs: list[tuple[ModelFile | None, list[int] | None]] = [(None, None)]
    if drafters:
        jobs = [(d, None if i == 0 else []) for i, d in enumerate(drafters)]
    target_costs: CostTable | None = None
    profiled: dict[str, DrafterProfile] = {}
    pinning: dict[str, LanePinning] = {}

    def pinned(out, what: str):
        """The job's pinning read back; a lane off its CPUs makes every number of it wrong."""
        event = next((e for e in out.events if e.get("event") == "pinning"), None)
        if event is None:
            raise SpecbenchError(f"the runner on {device.name} did not report its pinning ({what}): rebuild it")
        problems = pinning_problems(plan.placement, event)
        if problems:
            raise SpecbenchError(f"{device.name}, {what}: {problems[0]}",
                                 hint="choose a placement whose CPUs the runner may use")
        for lane in event.get("lanes", []):
            pinning.setdefault(lane["lane"], LanePinning(tuple(lane["cpus"]), tuple(lane["read_back"]),
                                                         int(lane["threads"])))
        return out

    if cells is not None:  # no sweep: the decodes alone, against these cells
        target_costs, pinning, jobs = cells.target_costs, dict(cells.pinning), []
        profiled = {d.name: cells.drafters[d.name] for d in drafters}
    for drafter, widths in jobs:
        out = pinned(device.run_job(sweep_job(device, target, drafter, plan, widths), count), "sweep")
        samples += named(out.results, drafter)
        if target_costs is None:
            target_costs = cost_table(out.results, "target", plan.widths, plan.depths, f"{label} target",
                                      plan.rule)
        if drafter is None:
            continue
        d_label = f"{label} drafter '{drafter.name}'"
        model = ModelId(drafter.name, drafter.sha256)
        if drafter.lookup:  # on the target's thread
            profiled[drafter.name] = DrafterProfile(drafter.name, model, "cpu",
                                                    cost_table(out.results, "drafter", (1,), plan.depths, d_label,
                                                               plan.rule),
                                                    None, threads=1)
            continue
        all_rows = None
        if plan.all_rows is None or drafter.name in plan.all_rows:
            all_out = pinned(device.run_job(sweep_job(device, target, drafter, plan, [], "all"), count),
                             "sweep with every logit row")
            samples += named(all_out.results, drafter)
            all_rows = cost_table(all_out.results, "drafter", drafter_widths(plan, drafter), plan.depths,
                                  f"{d_label} (all logit rows)", plan.rule)
        cosched = None
        if plan.cosched and (plan.cosched_widths is None or drafter.name in plan.cosched_widths):
            cosched, raw = measure_cosched(device, target, drafter, plan, pinned)
            samples += [r | {"model_name": drafter.name} for r in raw]
        drafter_lane = plan.placement.lanes()[1]
        profiled[drafter.name] = DrafterProfile(
            drafter.name, model, drafter_lane.processor,
            cost_table(out.results, "drafter", drafter_widths(plan, drafter), plan.depths, d_label, plan.rule),
            cosched, all_rows,
            threads=drafter_lane.threads)
    assert target_costs is not None  # the first job always sweeps the target (or `cells` priced it)
    overheads, overheads_note = ZERO_OVERHEADS, "overheads not measured (no drafter model)"
    models = [d for d in drafters if not d.lookup]
    if models and not plan.overheads:
        overheads_note = "overheads not measured (cost tables only)"
    # per drafter: both models' forwards as serial decodes meet them, and (where AS2D is measured) its producer's
    # start-up and publishing, the verifier's search beside it, and both lanes' co-scheduling ratios as the decode
    # met them (a validation's refresh measures these again)
    target_job = model_job(device, target, plan.placement.target)
    target_prompt = None if target.hears_audio or not models else prompt_tokens(device, target_job)
    workload = workload_selection(plan.workload, plan.overheads_windows, target.hears_audio) if models else []
    measured_with = {d.name: measure_overheads(device, target_job, model_job(device, d, plan.placement.drafter),
                                               max(plan.widths), target_prompt, plan.overheads_windows,
                                               workload_windows(device, target, d, workload) if workload else None,
                                               as2d=plan.overheads or profiled[d.name].cosched is not None)
                     for d in models}
    samples += [r | {"model_name": name} for name, run in measured_with.items() for r in run.decodes]
    target_costs = replace(target_costs, decode=decode_ratio(
        [f for run in measured_with.values() for f in run.serial["target"]], target_costs))
    profiled = {name: with_decode_contention(with_decode_ratio(p, measured_with[name]), measured_with[name],
                                             target_costs, plan.overheads)
                if name in measured_with else p for name, p in profiled.items()}
    if models and plan.overheads:
        overheads, overheads_note = measured_with[models[0].name].overheads, measured_with[models[0].name].note
        overheads_note += " per drafter (the top level: the first drafter's)"
    if target_costs.decode is not None:
        serial = ("the serial decodes beside them" if plan.overheads
                  else f"serial decodes ({measured_with[models[0].name].note})")
        overheads_note += (f"; every forward priced at its cells times its model's ratio in {serial}, width 1 and "
                           f"wider each at their own where they had {CLASS_FORWARDS} forwards, and the host work "
                           "those decodes did after it")
    if any(p.cosched is not None and p.cosched.decode is not None for p in profiled.values()):
        first = next(iter(measured_with.values()))
        decodes = "those AS2D decodes" if plan.overheads else f"AS2D decodes ({first.note})"
        overheads_note += (f"; the target's co-scheduling ratio priced as {decodes} realised it, single-token "
                           f"steps and verifications each at their own where they had {CLASS_FORWARDS} forwards, "
                           "else at the cells' ratio times what the decodes realised over what the cells priced")
        if any(p.cosched is not None and p.cosched.decode is not None and p.cosched.decode.after is not None
               for p in profiled.values()):
            overheads_note += (f"; once the producer is done, the target alone at the ratio its forwards after the "
                               f"producer's last step met in them, with their host work, each width at its own where "
                               f"it had {CLASS_FORWARDS} forwards")
        if any(p.cosched is not None and p.cosched.decode is not None and p.cosched.decode.pace_sigma is not None
               for p in profiled.values()):
            overheads_note += ("; AS2D priced at the mean over the producer's pace scatter against the target's "
                               "between a window's two AS2D decodes")
    after = device.snapshot()
    environment = environment.finish(now(), loaded_models(device, [("target", target)]
                                                          + [("drafter", d) for d in drafters]), state(after))
    target_lane = plan.placement.lanes()[0]
    cosched_note = f" (co-scheduling cells: {plan.cosched_rule.describe()})" if plan.cosched_fixed else ""
    swept = f"sweep: warmup {plan.warmup}, {plan.rule.describe()}, median seconds{cosched_note}"
    if cells is not None:
        swept = f"no sweep: the cells of {cells.path or 'another profile'}, the decodes timed again beside them"
    encoders = {("target" if r["model"] == "target" else r["model_name"]): r["median_us"] / 1e6
                for r in samples if r.get("kind") == "encoder"}
    profile = DeviceProfile(
        DeviceInfo(str(described["name"]), {k: v for k, v in described.items() if k != "name"}),
        ModelId(target.name, target.sha256), target_lane.processor, target_costs, profiled,
        Overheads(**overheads), plan.placement, pinning, Snapshots(before, after),
        target_threads=target_lane.threads,
        notes=(f"{swept}; target logits for all rows, drafter logits '{DRAFTER_LOGITS}'; {overheads_note}"),
        environment=environment, audio_prefill_s=encoders)
    return judged(ProfileRun(profile, samples))


def with_decode_ratio(drafter: DrafterProfile, run: OverheadsRun) -> DrafterProfile:
    """The drafter's entry with its cost tables priced at the ratio its forwards met in the `run`'s serial
    decodes (docs/METHODS.md §4.4 Overheads, "Serial decodes"); the all-rows table at the same ratio."""
    ratio = decode_ratio(run.serial["drafter"], drafter.costs)
    return drafter.with_tables(lambda table: replace(table, decode=ratio))


def with_decode_contention(drafter: DrafterProfile, run: OverheadsRun, target_costs: CostTable,
                           overheads: bool) -> DrafterProfile:
    """The drafter's entry with the overheads `run` measured (when `overheads`) and its co-scheduling
    ratios' `decode`: both lanes' ratios in the run's AS2D decodes, and the cells' for the same forwards
    (docs/METHODS.md §4.3 Co-scheduling ratios)."""
    if overheads:
        drafter = replace(drafter, overheads=Overheads(**run.overheads))
    if drafter.cosched is None:
        return drafter
    return replace(drafter, cosched=replace(drafter.cosched,
                                            decode=decode_contention(run.lanes, target_costs, drafter.cosched,
                                                                     drafter.costs)))


def measured(profile: DeviceProfile) -> str:
    """What a profile measured, in one line: its tables' widths and depths, the co-scheduled widths,
    and how many cells reached the precision (or the fixed count they took)."""
    tables = [("CT", profile.target_costs)]
    for name, d in profile.drafters.items():
        tables += [(f"{name} CD", d.costs)] + ([(f"{name} CD_all", d.all_rows_costs)] if d.all_rows_costs else [])
    cells = sum(len(t.widths()) * len(t.depths) for _, t in tables)
    depths = ", ".join(str(int(d)) for d in profile.target_costs.depths)
    parts = [", ".join(f"{label} w={width_ranges(t.widths())}" for label, t in tables)
             + f" at depths {depths} ({cells} cells)"]
    cosched = [f"{name} w={width_ranges(sorted(d.cosched.rho_target))}{cosched_precision(d.cosched)}"
               for name, d in profile.drafters.items() if d.cosched is not None]
    if cosched:
        parts.append(f"co-scheduled {', '.join(cosched)}")
    counts = [int(n) for _, t in tables if t.repetitions is not None for row in t.repetitions.values() for n in row]
    rule = profile.target_costs
    if rule.precision is not None and all(t.achieved_precision is not None for _, t in tables):
        within = sum(int((row <= rule.precision).sum()) for _, t in tables
                     for row in (t.achieved_precision or {}).values())
        parts.append(f"{within} of {cells} cells within ±{100 * rule.precision:g}% of their median "
                     f"({min(counts)}..{max(counts)} repetitions, {sum(counts)} timed forwards)")
    elif counts:
        parts.append(f"{min(counts)} repetitions each" if min(counts) == max(counts) else
                     f"{min(counts)}..{max(counts)} repetitions")
    decoded = [("target", profile.target_costs)] + [(name, d.costs) for name, d in profile.drafters.items()]
    ratios = [f"{label} {decode_ratio_text(t.decode)}" for label, t in decoded if t.decode is not None]
    if ratios:
        parts.append(f"serial decodes over the cells: {', '.join(ratios)}")
    return "; ".join(parts)


def decode_ratio_text(ratio: DecodeRatio) -> str:
    """e.g. '×1.04 (w=1 ×1.02, wider ×1.09) + 0.05 ms host (w=1 0.04, wider 0.31)'."""
    classes = [f"{'w=1' if name == 'single' else name} ×{getattr(ratio, name):.2f}" for name in SERIAL_CLASSES
               if getattr(ratio, name) is not None]
    text = f"×{ratio.realised:.2f}" + (f" ({', '.join(classes)})" if classes else "")
    host = ratio.host
    if host is not None:
        after = [f"{'w=1' if name == 'single' else name} {1e3 * getattr(host, name):.2f}" for name in SERIAL_CLASSES
                 if getattr(host, name) is not None]
        text += f" + {1e3 * host.seconds:.2f} ms host" + (f" ({', '.join(after)})" if after else "")
    return text


def cosched_precision(cosched: CoSchedule) -> str:
    """How many co-scheduling cells reached the precision, in words ('' when not recorded)."""
    if cosched.repetitions is None or cosched.achieved_precision is None:
        return ""
    counts = [int(n) for row in cosched.repetitions.values() for n in row]
    span = f"{min(counts)}..{max(counts)} repetitions" if min(counts) != max(counts) else f"{counts[0]} repetitions"
    if cosched.precision is None:
        return f" ({span} each side)"
    achieved = [float(a) for row in cosched.achieved_precision.values() for a in row]
    within = sum(a <= cosched.precision for a in achieved)
    return f" ({within} of {len(achieved)} cells' ratios within ±{100 * cosched.precision:g}%, {span} each side)"


def judged(run: ProfileRun) -> ProfileRun:
    """The run with its profile's `warnings` set to the unstable timings of its samples and the decode ratios
    below 1 it prices as 1."""
    found = stability_warnings(run.samples) + decode_warnings(list(run.profile.drafters.values()))
    return replace(run, profile=replace(run.profile, warnings=tuple(found)))


def measure_cosched(device: Device, target: ModelFile, drafter: ModelFile, plan: SweepPlan,
                    pinned) -> tuple[CoSchedule, list[dict]]:
    """Co-scheduling ratios per target width and depth, both lanes pinned as native AS2D runs
    them, each cell measured until the plan's `cosched_rule` stops it (core/cosched.py), and
    one record per cell (its samples go to the samples file)."""
    lanes = (model_job(device, target, plan.placement.target), model_job(device, drafter, plan.placement.drafter))
    widths = plan.widths if plan.cosched_widths is None else plan.cosched_widths[drafter.name]

    def measure(cells: Sequence[tuple[int, int]], repetitions: int, job: int) -> list[dict]:
        # a new seed per job: another width order and other random tokens
        doc = CoschedJob(*lanes, plan.warmup, [list(c) for c in cells], repetitions, 42 + job).to_dict()
        return [r for r in pinned(device.run_job(doc), "co-scheduling").results if r.get("kind") == "cosched"]

    try:
        measured = measure_to_rule(measure, [(w, d) for d in plan.depths for w in widths], plan.cosched_rule)
    except ValueError as error:
        raise SpecbenchError(f"drafter '{drafter.name}': {error}") from None
    records = [cosched_record(cell, measured) for cell in measured.cells.values()]
    ratios = co_schedule(records, plan.depths, plan.cosched_rule.precision)
    if ratios is None:
        raise SpecbenchError(f"the runner's cosched job returned no ratios for drafter '{drafter.name}'")
    return ratios, records


def write_profile(path: Path, run: ProfileRun) -> None:
    """Write the profile (through the one profile writer, `save_profile`) and its raw samples;
    the document is read back through the loader first, so a profile it would refuse is never written."""
    path = Path(path)
    kept = Path(tempfile.gettempdir()) / f"specbench-kept-{os.getpid()}-{path.name}"
    try:
        profile_from_dict(run.doc, path)
    except SpecbenchError as exc:  # a measurement the loader refuses (a host too busy): kept to look at, not used
        _keep(kept, run, lambda: write_atomic(kept, dump_yaml(run.doc)), str(exc),
              "profile again on an idle device")
    try:
        _save(path, run)
    except WriteError as exc:  # a full or read-only disk: the measurement is kept where it can be
        _keep(kept, run, lambda: save_profile(kept, run.profile), str(exc),
              f"copy it (and {samples_path(kept).name}) where it belongs")


def _keep(kept: Path, run: ProfileRun, save: Callable[[], None], why: str, hint: str) -> None:
    """Keep a measurement that could not be written where asked in `kept` (its samples beside it),
    then raise `why` saying where it is."""
    try:
        save()
        write_atomic(samples_path(kept), "".join(dumps_line(r) for r in run.samples))
    except WriteError:
        raise SpecbenchError(f"{why}; the measurement could not be kept in {kept.parent} either") from None
    raise SpecbenchError(f"{why}; the measurement is kept in {kept}", hint=hint)


def _save(path: Path, run: ProfileRun) -> None:
    save_profile(path, run.profile)
    write_atomic(samples_path(path), "".join(dumps_line(r) for r in run.samples))


def samples_path(path: Path) -> Path:
    return Path(path).with_name(Path(path).stem + ".samples.jsonl")


def median_profile(docs: Sequence[dict]) -> dict:
    """One profile document from several measured in the same placement (interleaved with
    other work, so that host drift hits them differently): every cost, ratio and overhead is
    the median over them. Refuses documents of different placements, models or tables."""
    if not docs:
        raise SpecbenchError("no profiles to combine")
    first = docs[0]
    for doc in docs[1:]:
        for key in ("placement", "device"):
            if doc.get(key) != first.get(key):
                raise SpecbenchError(f"profiles to combine differ in '{key}': {first.get(key)} vs {doc.get(key)}")

    def combine(values: list):
        head = values[0]
        if isinstance(head, bool) or not isinstance(head, (int, float, list, dict)):
            return head
        if isinstance(head, (int, float)):
            return float(np.median(np.asarray(values, dtype=np.float64))) if isinstance(head, float) else head
        if isinstance(head, list):
            if any(not isinstance(v, list) or len(v) != len(head) for v in values):
                raise SpecbenchError("profiles to combine measure different tables")
            return [combine([v[i] for v in values]) for i in range(len(head))]
        if any(not isinstance(v, dict) or set(v) != set(head) for v in values):
            raise SpecbenchError("profiles to combine measure different tables")
        return {k: combine([v[k] for v in values]) for k in head}

    out = dict(first)
    out["target"] = combine([d["target"] for d in docs])
    out["drafters"] = combine([d["drafters"] for d in docs])
    out["overheads"] = combine([d["overheads"] for d in docs])
    out["snapshot"] = {"before": first["snapshot"]["before"], "after": docs[-1]["snapshot"]["after"]}
    # every profile's unstable timings stay visible in the combination (each once)
    warnings = [w for d in docs for w in d.get("warnings", [])]
    out.pop("warnings", None)
    if warnings:
        out["warnings"] = [w for i, w in enumerate(warnings) if w not in warnings[:i]]
    envs = [manifest_environment(d, Where(f"profile {i + 1} of {len(docs)} to combine")) for i, d in enumerate(docs)]
    if envs[0] is not None and envs[-1] is not None and envs[-1].finished:
        # measured from the first profile's start to the last one's end
        last = envs[-1].device.snapshot.get("after") if envs[-1].device else None
        out[ENV_KEY] = environment_to_dict(envs[0].finish(envs[-1].finished, (), last))
    out["notes"] = f"{first.get('notes', '')}; median over {len(docs)} profiles measured one after another"
    return out
