"""Native runs: decode windows for real on a device and record them as result rows.

One runner `decode` job runs every (window, method), `runs` times each after `warmup`
untimed decodes (docs/METHODS.md §6.1 Repeated runs); the rows of a window are appended to the results
directory as soon as the last sample of its last method finishes, so `resume=True` skips
the windows already done. A row is the median sample, with every sample's decode time.
Every lane runs in the run's placement (the profile's, when the
run is compared with one), pinned by the runner, which reads the CPU sets back
(`pinning.jsonl`). Prompts are rendered as `specbench trace` renders them
(`tracing.prompts_for`, each model's own chat template), recorded in the manifest. Rows
have the replay columns (`results.WindowResult`) with `source = "native"`; D and V are
the summed drafter and target forward times of the op log, O = 0 (serial methods) and H
the rest of the decode clock. AS2D's two lanes report
when each forward ran on the decode clock: O is the time both lanes were busy and H the
time neither was, so T = D + V - O + H is a check there, not a definition.

One job per drafter: a run given several drafters (`--drafter` repeated) decodes each
configuration with the drafter it names, in a job that loads the target and that drafter alone;
target-only runs in the first job. Every row records the sha256 of the model file that drafted it.

Lossless check: each output is compared with the trace's y (when traces are given, via
the runner's `reference`) or else with target-only's output on the same window. A
differing output (in any sample) is a divergence, not a throughput: its row has
`lossless = false`, `tokens = 0` and no times, and the details (the sample, first differing
position, both tokens) go to `divergences.jsonl` in the results directory.

Decisions check (with traces): a lossless row's decisions are compared with replay's on its
drafter's trace (`core/decisions.py`); a difference sets `decisions_match = false` and goes to
`decisions.jsonl` (docs/METHODS.md §6.4 Drafters and decisions checked against the trace).

With `--energy-interval` the runner also samples the battery (world/native_energy.py): a
window's rows then wait for the samples up to its last request's end, and carry the median
sample's energy (docs/METHODS.md §10 Energy).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

from specbench.core.decisions import NativeDecisions, checked, decision_difference
from specbench.core.divergence import Explanation, committing_forward, explained
from specbench.core.methods.configs import (
    As2dConfig,
    MethodConfig,
    SdConfig,
    SpecAsrConfig,
    TargetConfig,
    method_name,
    row_fields,
)
from specbench.core.positions import position_counts
from specbench.core.samples import median_index
from specbench.errors import SpecbenchError
from specbench.schemas.divergences import DIVERGENCES, Divergence, Margins
from specbench.schemas.environment import Environment
from specbench.schemas.fileio import append_jsonl, file_sha256
from specbench.schemas.placement import Placement, device_label, pinning_problems, resolve_on
from specbench.schemas.profiles import DeviceProfile, ModelId
from specbench.schemas.results import (
    ProfileInput,
    Repeats,
    ResultsDir,
    ResultsManifest,
    Source,
    WindowResult,
    WindowsInput,
)
from specbench.schemas.timeline import Pace
from specbench.schemas.traces import TraceFile, WindowTrace
from specbench.schemas.windows import Window, windows_digest
from specbench.world.devices.base import Device
from specbench.world.environment import loaded_models, now, session, state
from specbench.world.jobs import DecodeJob, DivergenceJob
from specbench.world.model_files import ModelFile, model_job
from specbench.world.native_energy import EnergyLog, EnergySettings, row_energy
from specbench.world.tracing import Prompts, model_templates, prompts_for

PINNING = "pinning.jsonl"
"""The CPU set of every lane and thread, read back by the runner after each job."""
DECISIONS = "decisions.jsonl"
"""Per (window, configuration) whose decisions differ from the trace's: the first difference."""
CLOCKS = "request_clocks.jsonl"
"""Per (window, configuration): the request-latency clock beside the rows' decode clock."""
SNAPSHOTS = "snapshots.jsonl"
CLOCK_RESOLUTION_S = 1e-6
"""The runner's clock ticks in microseconds."""
Progress = Callable[[int], None]


def check_native(configs: Sequence[MethodConfig], available: Sequence[str]) -> None:
    for config in configs:
        if method_name(config) not in available:
            raise SpecbenchError(f"{config.label}: this runner decodes {', '.join(available)} natively",
                                 hint="replay the other methods (specbench run without --native)")


def method_job(config: MethodConfig) -> dict:
    """The runner's method object for a configuration (the drafter is the job's)."""
    if isinstance(config, SdConfig):
        return {"name": "sd", "width": config.width, "p_min": config.p_min}
    if isinstance(config, SpecAsrConfig):
        return {"name": "specasr", "k_max": config.k_max, "tau": config.tau}
    if isinstance(config, As2dConfig):
        return {"name": "as2d", "budget": config.budget, "batch": config.batch, "conf_stop": config.conf_stop,
                "align": config.align, "horizon": config.horizon}
    return {"name": "target"}


def first_difference(expected: Sequence[int], got: Sequence[int]) -> Divergence | None:
    for i, (a, b) in enumerate(zip(expected, got, strict=False)):
        if a != b:
            return Divergence("", "", i, int(a), int(b))
    if len(expected) != len(got):
        i = min(len(expected), len(got))
        return Divergence("", "", i, expected[i] if i < len(expected) else None, got[i] if i < len(got) else None)
    return None


Interval = tuple[int, int]
"""[start, end) on the decode clock, in microseconds."""


def _busy(spans: list[Interval], clock_us: int) -> list[Interval]:
    """The spans clipped to the decode clock [0, clock_us), empty ones dropped."""
    return [(max(a, 0), min(b, clock_us)) for a, b in spans if min(b, clock_us) > max(a, 0)]


def _union(spans: list[Interval]) -> list[Interval]:
    merged: list[list[int]] = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [(a, b) for a, b in merged]


def _measure(spans: list[Interval]) -> int:
    return sum(b - a for a, b in _union(spans))


def _overlap(first: list[Interval], second: list[Interval]) -> int:
    """Measure of the intersection of two sets of spans."""
    a, b = _union(first), _union(second)
    i = j = total = 0
    while i < len(a) and j < len(b):
        total += max(0, min(a[i][1], b[j][1]) - max(a[i][0], b[j][0]))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def target_lane(ops: list[dict]) -> list[Interval]:
    """The target's forwards: each starts at `t_us` and runs its `us`."""
    return [(op["t_us"], op["t_us"] + op["us"]) for op in ops if op["model"] == "target"]


def producer_lane(producer: dict) -> list[Interval]:
    """The producer's drafter forwards (`step_start_us` to `step_us`)."""
    if "step_start_us" not in producer:
        raise SpecbenchError("the runner's as2d result has no producer step_start_us (runner protocol 1 "
                             "reports when each producer step started)",
                             hint="rebuild it with `specbench build-runner`")
    return list(zip(producer["step_start_us"], producer["step_us"], strict=False))


def producer_service(producer: dict, decode_s: float) -> tuple[float, int]:
    """(D, forwards) of an AS2D producer within the decode clock: the time its drafter
    forwards ran before the clock stopped (one still running then counts up to the stop),
    and the forwards finished by then."""
    clock_us = round(decode_s * 1e6)
    busy = _busy(producer_lane(producer), clock_us)
    return sum(b - a for a, b in busy) / 1e6, sum(end <= clock_us for end in producer["step_us"])


def two_lane_terms(result: dict, decode_s: float) -> tuple[float, float]:
    """(O, H) of an AS2D run: the time both lanes ran a forward, and the time neither did."""
    clock_us = round(decode_s * 1e6)
    target = _busy(target_lane(result["ops"]), clock_us)
    producer = _busy(producer_lane(result["producer"]), clock_us)
    return _overlap(target, producer) / 1e6, (clock_us - _measure(target + producer)) / 1e6


def decode_row(result: dict, window: Window, device: str, config: MethodConfig, placement: str = "",
               drafter_sha256: str | None = None) -> WindowResult:
    """A WindowResult from one runner decode record (pure); `drafter_sha256`: the model file that drafted it."""
    ops = result["ops"]
    target_ops = [op for op in ops if op["model"] == "target"]
    n = len(result["tokens"])
    t, multi, accepted = 1, 0, 0
    for op in target_ops:
        new_t = min(t + op.get("accepted", 0) + 1, n)
        multi += new_t - t > 1
        accepted += op.get("accepted", 0)
        t = new_t
    d_s = sum(op["us"] for op in ops if op["model"] == "drafter") / 1e6
    drafter_forwards = sum(op["model"] == "drafter" for op in ops)
    v_s = sum(op["us"] for op in target_ops) / 1e6
    decode_s = float(result["decode_s"])
    if isinstance(config, As2dConfig):
        d_s, drafter_forwards = producer_service(result["producer"], decode_s)
        o_s, h_s = two_lane_terms(result, decode_s)
        # Within a lane forwards never overlap, so inclusion-exclusion must give the clock back.
        if abs(d_s + v_s - o_s + h_s - decode_s) > CLOCK_RESOLUTION_S:
            raise SpecbenchError(f"window '{window.window_id}' {config.label}: the runner's lane timelines do not "
                                 f"decompose the decode clock: T = {decode_s:.6f} s but D + V - O + H = "
                                 f"{d_s:.6f} + {v_s:.6f} - {o_s:.6f} + {h_s:.6f} s",
                                 hint="a runner bug: a lane reports overlapping forwards or forwards outside "
                                      "the clock")
    else:
        o_s, h_s = 0.0, max(decode_s - d_s - v_s, 0.0)
    reached_at, accepted_at = position_counts([op["width"] - 1 for op in target_ops],
                                              [op.get("accepted", 0) for op in target_ops])
    return WindowResult(device=device, **row_fields(config), window_id=window.window_id,
                        window_sha256=window.window_sha256, dataset=window.dataset, split=window.split.value,
                        tokens=n - 1, decode_s=decode_s, target_forwards=len(target_ops),
                        proposed=sum(op["width"] - 1 for op in target_ops), accepted=accepted,
                        multi_token_forwards=multi, drafter_forwards=drafter_forwards, d_s=d_s, v_s=v_s, o_s=o_s,
                        h_s=h_s, extrapolated=False, lossless=True, source="native",
                        text=str(result.get("text", "")), placement=placement, samples_s=[decode_s],
                        reached_at=reached_at, accepted_at=accepted_at, category=window.category,
                        drafter_sha256=drafter_sha256,
                        **row_energy(result))


def median_row(rows: Sequence[WindowResult]) -> WindowResult:
    """The row of the median sample (docs/METHODS.md §6.1 Repeated runs) carrying every sample's decode_s: its
    counts and D, V, O, H are that decode's own, so T = D + V - O + H still holds."""
    times = [row.decode_s for row in rows]
    return replace(rows[median_index(times)], samples_s=times)


def request_clocks(result: dict, window: Window, device: str, config: MethodConfig) -> dict:
    """The request clock of one runner decode record (docs/METHODS.md §1.3 Two clocks): background (audio) prefill,
    residual instruction prefill, time to y[0] and to the drafter's readiness, and request
    latency (request instant -> last commit); microseconds, as the runner reports them."""
    doc = {"device": device, "config": config.label, "window_id": window.window_id,
           "window_sha256": window.window_sha256, "n_prompt": result.get("n_prompt"),
           "decode_us": round(float(result["decode_s"]) * 1e6)}
    for key in ("n_audio", "audio_prefill_us", "audio_prefill_reused", "instruction_prefill_us", "first_token_us",
                "first_draft_us", "request_latency_us", "start_us", "end_us"):
        if key in result:
            doc[key] = result[key]
    return doc


def divergence_row(window: Window, device: str, config: MethodConfig, placement: str = "",
                   drafter_sha256: str | None = None) -> WindowResult:
    """A diverging window: no tokens and no times are claimed for it."""
    return WindowResult(device=device, **row_fields(config), window_id=window.window_id,
                        window_sha256=window.window_sha256, dataset=window.dataset, split=window.split.value,
                        tokens=0, decode_s=0.0, target_forwards=0, proposed=0, accepted=0, multi_token_forwards=0,
                        drafter_forwards=0, d_s=0.0, v_s=0.0, o_s=0.0, h_s=0.0, extrapolated=False, lossless=False,
                        source="native", placement=placement, category=window.category,
                        drafter_sha256=drafter_sha256)


@dataclass(frozen=True)
class SustainedLoad:
    """`run --native --sustained`: paced streams instead of one decode per window (world/sustained.py)."""

    duration_s: float
    """Seconds each configuration's stream runs (no request starts after it)."""
    pace: Pace
    """Realtime (requests arrive as the audio would, or at `rate_per_s`) or back-to-back."""
    rate_per_s: float | None = None
    """--rate: requests per second for windows without an audio duration (realtime pace)."""
    cooldown: bool = True
    """A phone cools down between streams (False: --no-cooldown, heat carries over)."""


@dataclass(frozen=True)
class NativePlan:
    device: Device
    windows: list[Window]
    target: ModelFile
    drafters: Sequence[ModelFile]
    """Every drafter given (`--drafter`, in order); each configuration drafts with the one it names, a
    configuration naming none with the only one (`drafter_of`)."""
    configs: list[MethodConfig]
    placement: Placement
    """Where each lane runs (the placement of the profile the run is compared with)."""
    traces: Mapping[str, TraceFile] | None = None
    """Drafter name -> its trace file: outputs are checked against the traces' y, and each configuration's
    decisions against its drafter's trace; None: target-only's output is the reference."""
    windows_path: str = ""
    profile: ProfileInput | None = None
    """The profile the placement came from, if any (path, sha256 and its stability warnings)."""
    runs: int = 1
    """Timed decodes of every (window, configuration): `--runs`."""
    warmup: int = 0
    """Untimed decodes of every configuration before the first window: `--warmup`."""
    sustained: SustainedLoad | None = None
    """A sustained, paced run (world/sustained.py) instead of one decode per (window, configuration)."""
    energy: EnergySettings | None = None
    """Battery sampling by the runner (`--energy-interval`); None: off."""
    reuse_audio_prefill: bool = False
    """Whisper models encode each window once per job (`--reuse-encoder`; the decode clock excludes it anyway)."""

    def __post_init__(self) -> None:
        check_repeats(self.runs, self.warmup)
        unique = {d.name for d in self.drafters}
        if len(unique) != len(self.drafters):
            raise SpecbenchError("a drafter name is given twice; name each --drafter differently")
        for config in self.configs:
            self.drafter_of(config)  # a configuration naming a drafter the run lacks is refused here

    @cached_property  # read per window while decoding: built once
    def references(self) -> dict[str, list[int]] | None:
        """Expected y per window id (the traces'); None: target-only's output is the reference."""
        if self.traces is None:
            return None
        first = next(iter(self.traces.values()))
        return {w.window_id: first.windows[w.window_id].y.tolist() for w in self.windows}

    def drafter_of(self, config: MethodConfig) -> ModelFile | None:
        """The drafter `config` decodes with (None: target-only); one the run was not given is an error."""
        if isinstance(config, TargetConfig):
            return None
        given = ", ".join(d.name for d in self.drafters) or "none"
        if config.drafter is None:
            if len(self.drafters) == 1:
                return self.drafters[0]
            if not self.drafters:
                raise SpecbenchError(f"{config.label}: the methods other than target need a drafter: pass "
                                     "--drafter NAME=PATH")
            raise SpecbenchError(f"{config.label}: name its drafter (drafter=NAME); this run has several "
                                 f"(--drafter: {given})")
        found = next((d for d in self.drafters if d.name == config.drafter), None)
        if found is None:
            raise SpecbenchError(f"{config.label}: names drafter '{config.drafter}', which this run was not "
                                 f"given (--drafter: {given})", hint=f"add --drafter {config.drafter}=PATH")
        return found

    def jobs(self) -> list[tuple[ModelFile | None, list[MethodConfig]]]:
        """One decode job per drafter the configurations use (in --drafter order), each loading the
        target and that drafter alone, with the configurations that draft with it; target-only runs in
        the first (alone when nothing drafts)."""
        out: list[tuple[ModelFile | None, list[MethodConfig]]] = []
        for drafter in self.drafters:
            mine = [c for c in self.configs
                    if self.drafter_of(c) is drafter or (not out and self.drafter_of(c) is None)]
            if any(not isinstance(c, TargetConfig) for c in mine):
                out.append((drafter, mine))
        if not out and self.configs:
            out.append((None, list(self.configs)))
        return out


def check_repeats(runs: object, warmup: object) -> None:
    """--runs >= 1 and --warmup >= 0, or an error naming the flag."""
    for flag, value, least in (("--runs", runs, 1), ("--warmup", warmup, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise SpecbenchError(f"{flag} {value}: expected an integer >= {least}")


def manifest_for(plan: NativePlan, environment: Environment) -> ResultsManifest:
    """The run's manifest; --runs/--warmup are recorded when not 1/0, so that a resume with other
    counts is refused, naming `repeats`."""
    repeats = None if plan.runs == 1 and plan.warmup == 0 else Repeats(plan.runs, plan.warmup)
    return ResultsManifest(
        Source.NATIVE, environment,
        WindowsInput(plan.windows_path, windows_digest(plan.windows), len(plan.windows)),
        tuple(c.label for c in plan.configs), device=device_label(plan.device.name, plan.placement),
        target=ModelId(plan.target.name, plan.target.sha256),
        drafters=tuple(ModelId(d.name, d.sha256) for d in plan.drafters),
        templates=run_templates(plan), placement=plan.placement,
        placement_profile=plan.profile,
        reference="trace" if plan.references is not None else "target-only output", repeats=repeats,
        energy=None if plan.energy is None else plan.energy.record())


def run_templates(plan: NativePlan) -> dict[str, str]:
    """'target' and each drafter's name -> the chat template its prompts are rendered with."""
    templates = model_templates(plan.target, None, plan.windows)
    for drafter in plan.drafters:
        templates[drafter.name] = model_templates(plan.target, drafter, plan.windows)["drafter"]
    return templates


def plan_models(plan: NativePlan) -> list[tuple[str, ModelFile]]:
    """(role, model file) of the models a run's jobs load."""
    return [("target", plan.target)] + [("drafter", d) for d in plan.drafters]


def native_placement(device: Device, spec: str | None, profile: DeviceProfile | None) -> Placement:
    """The placement a native run uses: the profile's (a run compared with a profile must run
    where it was measured); `spec` must then name the same one."""
    asked = None if spec is None else resolve_on(device, spec)
    if profile is None:
        return asked or resolve_on(device, "shared")
    if not profile.placement.recorded:
        raise SpecbenchError(f"profile {profile.path}: records no placement, so a native run cannot match it",
                             hint="profile the device again (a profile records the placement it was measured in)")
    if asked is not None and asked.key != profile.placement.key:
        raise SpecbenchError(f"--placement {asked.key} differs from the placement of profile {profile.path} "
                             f"({profile.placement.key})", hint="drop --placement, or pass a profile measured there")
    target_lane, drafter_lane = profile.placement.lanes()
    missing = sorted(set(target_lane.cpus + drafter_lane.cpus) - set(device.cpus()))
    if missing:
        raise SpecbenchError(f"profile {profile.path}: placement {profile.placement.key} uses CPU {missing[0]}, which "
                             f"{device.name} does not let the runner use")
    return profile.placement


def profile_ref(profile: DeviceProfile | None) -> ProfileInput | None:
    """The profile's path and sha256, with its stability warnings (the report shows them)."""
    if profile is None or profile.path is None:
        return None
    return ProfileInput(str(profile.path), file_sha256(profile.path), warnings=profile.warnings)


def native_steps(plan: NativePlan) -> int:
    """Progress units of `run_native`: one per timed sample of a window (all its configurations);
    of a sustained run: one per stream."""
    if plan.sustained is not None:
        return len(plan.configs) + (plan.references is None and not any(isinstance(c, TargetConfig)
                                                                          for c in plan.configs))
    return len(plan.windows) * plan.runs * len(plan.jobs())


def check_models(plan: NativePlan) -> None:
    """The runner decodes the methods, and the drafter can serve them."""
    check_native(plan.configs, plan.device.runner().methods)
    for config in plan.configs:
        drafter = plan.drafter_of(config)
        if drafter is not None and drafter.lookup and isinstance(config, SpecAsrConfig):
            raise SpecbenchError(f"{config.label}: SpecASR's recycling asks a drafter model, and the drafter "
                                 f"{drafter.name} (prompt lookup) has none",
                                 hint="run specasr with a drafter model")


@dataclass
class NativeOutcome:
    """What a native run did: its results, the rows it added and what its checks found."""

    results: ResultsDir
    added: int = 0
    """Rows appended."""
    diverged: int = 0
    """(window, configuration) outputs that differ from the reference (divergences.jsonl)."""
    unexplained: list[Divergence] = field(default_factory=list)
    """Those not explained as near-ties (docs/METHODS.md §6.5 Divergences explained): they fail the run."""
    mismatches: list[DecisionMismatch] = field(default_factory=list)
    """Rows whose decisions differ from the trace's (also in decisions.jsonl)."""
    unchecked: dict[str, str] = field(default_factory=dict)
    """Configuration label -> why its decisions could not be checked (the first window's reason)."""

    @property
    def mismatched(self) -> int:
        """Rows whose decisions differ from the trace's with nothing to explain it (they fail the run)."""
        return sum(m.explained is None for m in self.mismatches)

    def add(self, window: WindowRows) -> None:
        self.added += len(window.rows)
        self.diverged += len(window.divergences)
        self.unexplained += [d for d in window.divergences if d.explanation is not Explanation.NEAR_TIE]
        self.mismatches += window.mismatches
        self.unchecked = window.unchecked | self.unchecked


def job_prompts(plan: NativePlan) -> list[Prompts]:
    """Each job's prompts, rendered before anything is written: a model without a chat template
    leaves nothing behind."""
    return [prompts_for(plan.device, plan.target, drafter, plan.windows) for drafter, _ in plan.jobs()]


def run_native(plan: NativePlan, out: Path, resume: bool, progress: Progress | None = None) -> NativeOutcome:
    """Decode every (window, configuration) not already in `out`, one job per drafter (`NativePlan.jobs`)."""
    check_models(plan)
    prompts = job_prompts(plan)
    results = ResultsDir(out)
    before = plan.device.snapshot()
    done = results.open(manifest_for(plan, session(plan.device, before)), resume)
    name = device_label(plan.device.name, plan.placement)

    def missing(configs: list[MethodConfig]) -> list[Window]:
        return [w for w in plan.windows if not all((name, c.label, w.window_id, "median") in done for c in configs)]

    outcome = NativeOutcome(results)
    if not missing(plan.configs):
        if progress:
            progress(native_steps(plan))
        results.finish(now(), loaded_models(plan.device, plan_models(plan)))
        return outcome
    append_jsonl(results.directory / SNAPSHOTS, [{"before": before}])
    for (drafter, configs), job_prompt in zip(plan.jobs(), prompts, strict=True):
        todo = missing(configs)
        if progress and len(todo) < len(plan.windows):
            progress((len(plan.windows) - len(todo)) * plan.runs)
        if todo:
            _decode(plan, drafter, configs, todo, job_prompt, results, progress, outcome)
    after = plan.device.snapshot()
    append_jsonl(results.directory / SNAPSHOTS, [{"after": after}])
    results.finish(now(), loaded_models(plan.device, plan_models(plan)), state(after))
    return outcome


def _decode(plan: NativePlan, drafter: ModelFile | None, wanted: list[MethodConfig], todo: list[Window],
            prompts: Prompts, results: ResultsDir, progress: Progress | None, outcome: NativeOutcome) -> None:
    """One decode job (the target and `drafter`) over the windows still to do; a window's rows are
    appended when the last sample of its last method finishes (the runner runs every sample of a
    window, each sample every method in order, before the next window), so a window in the rows has
    all its samples."""
    # Without traces, target-only's output (run first) is the reference for the others.
    run_configs = wanted if plan.references is not None else \
        [TargetConfig()] + [c for c in wanted if not isinstance(c, TargetConfig)]
    by_id = {w.window_id: w for w in todo}
    pending: dict[str, list[dict]] = {}
    refs = plan.references or {}
    trace_file = None if drafter is None or plan.traces is None else plan.traces.get(drafter.name)
    placement_key = plan.placement.key
    row_device = device_label(plan.device.name, plan.placement)
    repeated = plan.runs != 1 or plan.warmup != 0  # a runner without these keys still serves single decodes
    job = DecodeJob(model_job(plan.device, plan.target, plan.placement.target), [method_job(c) for c in run_configs],
                    [prompts.runner_window(w, refs.get(w.window_id)) for w in todo],
                    None if drafter is None else model_job(plan.device, drafter, plan.placement.drafter), warmup=True,
                    runs=plan.runs if repeated else None, warmup_runs=plan.warmup if repeated else None,
                    reuse_audio_prefill=plan.reuse_audio_prefill,
                    energy=None if plan.energy is None else plan.energy.job())
    per_window = len(run_configs) * plan.runs
    energy = None if plan.energy is None else EnergyLog(plan.energy, results.directory)
    held: list[list[dict]] = []  # finished windows waiting for the battery samples up to their end
    divergent: list[tuple[Window, list[int], WindowRows]] = []  # divergent windows, with their reference

    threads_differ = drafter_threads_differ(trace_file, None if job.drafter is None else job.drafter.get("threads"))

    def on_line(doc: dict) -> None:
        if energy is not None and energy.take(doc):
            release(final=False)
            return
        result = doc.get("result")
        if not result or result.get("kind") not in ("decode", "divergence"):
            return
        records = pending.setdefault(result["window_id"], [])
        records.append(result)
        if progress and len(records) % len(run_configs) == 0:
            progress(1)
        if len(records) < per_window:
            return
        del pending[result["window_id"]]
        held.append(records)
        release(final=energy is None)

    def release(final: bool) -> None:
        """Write the held windows whose energy is known (all of them at the job's end)."""
        while held and (final or energy is None or energy.covers(held[0])):
            records = held.pop(0)
            if energy is not None:
                energy.attach(records)
            complete(records)

    def complete(records: list[dict]) -> None:
        window = by_id[records[0]["window_id"]]
        # sample s of configuration c is record s * len(run_configs) + c (the runner's order)
        samples = [(config, records[c::len(run_configs)]) for c, config in enumerate(run_configs)]
        reference = records[0].get("tokens") if plan.references is None else None
        trace = None if trace_file is None else trace_file.windows.get(window.window_id)
        found = window_rows(window, row_device, samples, wanted, reference, placement_key, drafter, trace,
                            "" if trace_file is None else trace_file.drafter.sha256, threads_differ)
        if found.divergences:  # written once explained, after the job (a window is written whole or not at all)
            divergent.append((window, list(reference or refs[window.window_id]), found))
        else:
            write_window(results, row_device, found)
            outcome.add(found)
        # the request clock of the decode each row is: its median sample
        append_jsonl(results.directory / CLOCKS, [request_clocks(runs[median_index([r["decode_s"] for r in runs])],
                                                                 window, row_device, config)
                                                  for config, runs in samples
                                                  if config in wanted and all(r["kind"] == "decode" for r in runs)])

    out = plan.device.run_job(job.to_dict(), on_line)
    release(final=True)
    if energy is not None:
        results.set_energy(energy.finish())
    if pending:
        raise SpecbenchError(f"the runner stopped before finishing window '{next(iter(pending))}'")
    if divergent:
        loaded = next((e for e in out.events if e.get("event") == "loaded"), {})
        for _, found in explain_divergences(plan, prompts, divergent, loaded.get("n_ctx")):
            write_window(results, row_device, found)
            outcome.add(found)
    pinning = next((e for e in out.events if e.get("event") == "pinning"), {})
    append_jsonl(results.directory / PINNING, [{"placement": plan.placement.as_dict(), "read_back": pinning}])
    problems = pinning_problems(plan.placement, pinning)
    if problems:
        raise SpecbenchError(f"{plan.device.name}: {problems[0]}; the rows in {results.directory} were not measured "
                             f"in placement {plan.placement.key}", hint="delete them and choose usable CPUs")


def write_window(results: ResultsDir, device: str, found: WindowRows) -> None:
    """A window's rows, and its divergences and decision mismatches to their files."""
    results.append(found.rows)
    append_jsonl(results.directory / DIVERGENCES, [replace(d, device=device).as_dict() for d in found.divergences])
    append_jsonl(results.directory / DECISIONS, [vars(m) | {"device": device} for m in found.mismatches])


@dataclass(frozen=True)
class DecisionMismatch:
    """A (window, configuration) whose native decisions differ from replay's on the trace."""

    window_id: str
    config: str
    drafter: str | None
    """The drafter name the configuration names."""
    drafter_sha256: str | None
    """The model file that drafted it (the trace records the one it was traced with)."""
    trace_drafter_sha256: str
    sample: int
    """The first timed decode (0-based, of --runs) whose decisions differed."""
    difference: str
    """The first difference, in words (`core.decisions.decision_difference`)."""
    explained: str | None = None
    """Why the drafter may decide otherwise than traced (it ran with other threads than the trace's); None:
    nothing explains it, and the run fails."""


@dataclass(frozen=True)
class WindowRows:
    """What one window's records give: its rows and what the checks found."""

    rows: list[WindowResult]
    divergences: list[Divergence]
    mismatches: list[DecisionMismatch] = field(default_factory=list)
    unchecked: dict[str, str] = field(default_factory=dict)
    """Configuration label -> why its decisions could not be checked against its trace."""


def native_decisions(record: dict) -> NativeDecisions:
    """A runner decode record's decisions: (proposed, accepted) per verification, AS2D's producer stream."""
    verifications = tuple((op["width"] - 1, op.get("accepted", 0)) for op in record["ops"] if op["model"] == "target")
    producer = record.get("producer")
    return NativeDecisions(verifications, None if producer is None else tuple(producer["tokens"]))


def window_rows(window: Window, device: str, records: Sequence[tuple[MethodConfig, Sequence[dict]]],
                wanted: Sequence[MethodConfig], reference: Sequence[int] | None,
                placement: str = "", drafter: ModelFile | None = None,
                trace: WindowTrace | None = None, trace_drafter_sha256: str = "",
                threads_differ: str | None = None) -> WindowRows:
    """Rows of the `wanted` configurations for one window (pure), from each configuration's
    samples (runner decode records, in the order they ran), drafted by `drafter`. With `reference`,
    every sample's output is checked against it (the runner checked it already when given a
    reference). A configuration any of whose samples differs is a divergence (the first such sample is
    recorded); otherwise every sample committed the same tokens and the row is the median one. With
    `trace` (the drafter's trace of this window), every sample's decisions are checked against it;
    `threads_differ` says why they may differ (the drafter ran with other threads than traced), which explains
    nothing when the drafter file is not the traced one."""
    labels = [c.label for c in wanted]
    out = WindowRows([], [])
    for config, samples in records:
        if config.label not in labels:
            continue
        sha = drafter_sha(drafter, config)
        diff = next((d for d in (_sample_difference(window, config, s, r, reference) for s, r in enumerate(samples))
                     if d is not None), None)
        if diff is not None:
            out.rows.append(divergence_row(window, device, config, placement, sha))
            out.divergences.append(diff)
            continue
        row = median_row([decode_row(r, window, device, config, placement, sha) for r in samples])
        if trace is not None and checked(config):
            try:
                found = next(((s, d) for s, d in ((s, decision_difference(config, trace, window.cap,
                                                                           native_decisions(r)))
                                                  for s, r in enumerate(samples)) if d is not None), None)
            except SpecbenchError as exc:
                out.unchecked[config.label] = f"{config.label}: decisions not checked against the trace ({exc})"
            else:
                row = replace(row, decisions_match=found is None)
                if found is not None:
                    out.mismatches.append(DecisionMismatch(window.window_id, config.label,
                                                           getattr(config, "drafter", None), sha,
                                                           trace_drafter_sha256, found[0], found[1],
                                                           threads_differ if sha == trace_drafter_sha256 else None))
        out.rows.append(row)
    out.rows.sort(key=lambda r: labels.index(r.config))
    return out


def drafter_threads_differ(trace_file: TraceFile | None, threads: int | None) -> str | None:
    """Why a drafter running with `threads` may decide otherwise than `trace_file` recorded (a Whisper model's
    greedy choices can change with the thread count: ggml splits its work otherwise); None: the same threads,
    or either not recorded."""
    env = None if trace_file is None else trace_file.environment
    traced = next((m.threads for m in (env.models if env else ()) if m.role == "drafter"), None)
    if traced is None or threads is None or traced == threads:
        return None
    return f"the drafter ran with {threads} threads, the trace's with {traced}: trace with --threads {threads}"


def drafter_sha(drafter: ModelFile | None, config: MethodConfig) -> str | None:
    """The sha256 a row records: its drafter's model file (None: target-only, or the lookup drafter)."""
    if drafter is None or drafter.lookup or isinstance(config, TargetConfig):
        return None
    return drafter.sha256


def _sample_difference(window: Window, config: MethodConfig, sample: int, record: dict,
                       reference: Sequence[int] | None) -> Divergence | None:
    if record["kind"] == "divergence":
        found = Divergence(window.window_id, config.label, int(record["position"]), record.get("expected"),
                           record.get("got"), sample)
        forwards = tuple((int(w), int(a)) for w, a in record.get("forwards", ()))
    else:
        diff = first_difference(reference, record["tokens"]) if reference is not None else None
        if diff is None:
            return None
        found = replace(diff, window_id=window.window_id, config=config.label, sample=sample)
        forwards = tuple((op["width"], op.get("accepted", 0)) for op in record["ops"] if op["model"] == "target")
    k = committing_forward(forwards, found.position)
    if k is None:
        return replace(found, forwards=forwards)
    return replace(found, forwards=forwards[:k + 1], width=forwards[k][0], row=found.position - 1 -
                   sum(a + 1 for _, a in forwards[:k]))


def explain_divergences(plan: NativePlan, prompts: Prompts, windows: Sequence[tuple[Window, list[int], WindowRows]],
                        n_ctx: int | None) -> list[tuple[Window, WindowRows]]:
    """Each divergence of these windows explained (docs/METHODS.md §6.5 Divergences explained): one runner
    `divergence` job, the target alone in its lane and the decode's context size, measures the margins at
    each differing position that a target forward committed; the rule is core/divergence.py's."""
    cases, docs = [], []
    for window, reference, found in windows:
        docs.append(prompts.runner_window(window, reference))
        cases += [{"window_id": window.window_id, "position": d.position, "got": d.got, "forwards": d.forwards}
                  for d in found.divergences if d.width is not None and d.got is not None]
    measured: dict[tuple[str, int], Margins] = {}
    if cases:
        job = DivergenceJob(model_job(plan.device, plan.target, plan.placement.target), docs, cases, n_ctx or None)
        for result in plan.device.run_job(job.to_dict()).results:
            measured[(result["window_id"], int(result["position"]))] = Margins.from_runner(result)
    out = []
    for window, _, found in windows:
        divergences = [explained(d, measured.get((d.window_id, d.position)) if d.width is not None else None)
                       for d in found.divergences]
        out.append((window, replace(found, divergences=divergences)))
    return out
