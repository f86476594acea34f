"""`specbench run --native`: check the inputs against each other, plan one native run per
device, and run them in parallel (results in OUT, or OUT/<device>/ with several devices).

The inputs are checked against each other before any device runs a job: the traces must
cover the windows, with the same target model and chat templates, and each device must
offer the CPUs of the placement asked (the profile's, when one is given).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from specbench.app.devices import on_devices, open_devices
from specbench.app.options import configs_from, device_names
from specbench.app.progress import stderr
from specbench.core.energy import parse_convention
from specbench.core.methods.configs import MethodConfig
from specbench.errors import SpecbenchError
from specbench.schemas.fileio import safe_name
from specbench.schemas.profiles import load_profile
from specbench.schemas.results import read_manifest, removed_if_refused
from specbench.schemas.timeline import Pace
from specbench.schemas.traces import TraceFile, check_against_windows, load_trace_dir
from specbench.schemas.windows import Window, load_split
from specbench.world.decode_run import (
    DECISIONS,
    DIVERGENCES,
    NativeOutcome,
    NativePlan,
    SustainedLoad,
    check_repeats,
    native_placement,
    native_steps,
    profile_ref,
    run_native,
)
from specbench.world.devices.base import Device
from specbench.world.model_files import (
    ModelFile,
    drafter_mmproj,
    parse_named,
    target_file,
    unique_names,
    with_mmproj,
    with_templates,
)
from specbench.world.native_energy import EnergySettings
from specbench.world.sustained import arrival_gaps_us, check_load, parse_duration, run_sustained
from specbench.world.tracing import check_trace_templates

if TYPE_CHECKING:
    from specbench.app.run_request import NativeOptions, RunRequest

DEFAULT_IDLE_S = 5.0
"""--energy-idle when not given: long enough for a few fuel-gauge updates of most phones."""


def run_on_devices(request: RunRequest, out: Path) -> None:
    """`run --native`: the options checked against each other before any device is opened, then one
    plan per device, run in parallel (results in `out`, or out/<device>/ with several devices)."""
    options = request.native
    if not options.native:
        raise SpecbenchError("--device and --target are for native runs: add --native")
    for flag, given in (("--budget", request.budget_path is not None), ("--sensitivity", request.sensitivity)):
        if given:
            raise SpecbenchError(f"{flag} is for replay; a --native run measures on the device itself")
    if len(request.profile_paths) > 1:
        raise SpecbenchError("--native takes one --profile (the placement to run in)")
    if options.target is None:
        raise SpecbenchError("--native needs --target PATH (the target model file)")
    load = sustained_load(options)  # before any device is opened
    if load is not None and request.resume:
        raise SpecbenchError("--resume is not for --sustained runs: a paced stream cannot continue where it stopped")
    runs, warmup = repeat_counts(options)
    energy = energy_settings(options)
    if load is not None and energy is not None:
        raise SpecbenchError("--energy-interval is not for --sustained runs: a paced stream's energy is not attributed "
                             "(measure energy in a run without --sustained)")
    devices = open_devices(device_names([options.device or "local"]), request.phone, load is None or load.cooldown)
    windows = load_split(request.windows, request.split)
    target = with_mmproj(target_file(options.target), options.target_mmproj, "--target-mmproj")
    drafters = drafter_mmproj(unique_names([parse_named(s) for s in request.drafter_specs]), options.drafter_mmproj)
    target, drafters = with_templates(target, drafters, options.templates)
    configs = configs_from(request.method_names, request.method_specs,
                           drafters[0].name if len(drafters) == 1 else None, lambda: common_methods(devices))
    plans = native_plans(devices, windows, request.windows, target, drafters, configs, request.traces_dir,
                         request.profile_paths[0] if request.profile_paths else None, options.placement, runs,
                         warmup, energy)
    if load is not None:
        arrival_gaps_us(windows, load)  # a text window without --rate, before any stream runs
        plans = [replace(plan, sustained=load) for plan in plans]
    if options.reuse_encoder:
        plans = [replace(plan, reuse_audio_prefill=True) for plan in plans]
    run_plans(plans, out, request.resume)


def repeat_counts(options: NativeOptions) -> tuple[int, int]:
    """(--runs, --warmup) as integers, range-checked (check_repeats), naming the flag."""
    counts = []
    for flag, text, default in (("--runs", options.runs, 1), ("--warmup", options.warmup, 0)):
        try:
            counts.append(default if text is None else int(text))
        except ValueError:
            raise SpecbenchError(f"{flag} {text}: expected an integer") from None
    check_repeats(*counts)
    return counts[0], counts[1]


def energy_settings(options: NativeOptions) -> EnergySettings | None:
    """The battery sampling asked (None: --energy-interval 0); a flag that needs it without it is an error."""
    if options.energy_interval_ms == 0:
        for flag, value in (("--energy-idle", options.energy_idle_s),
                            ("--energy-convention", options.energy_convention),
                            ("--energy-paths", options.energy_paths)):
            if value is not None:
                raise SpecbenchError(f"{flag} needs --energy-interval MS (battery sampling is off)")
        return None
    convention = None if options.energy_convention is None else parse_convention(options.energy_convention)
    idle_s = DEFAULT_IDLE_S if options.energy_idle_s is None else options.energy_idle_s
    settings = EnergySettings(options.energy_interval_ms, idle_s, convention)
    if options.energy_paths is not None:
        paths = [p.strip() for p in options.energy_paths.split(",")]
        if len(paths) != 3 or not all(p.startswith("/") for p in paths):
            raise SpecbenchError(f"--energy-paths {options.energy_paths!r}: expected three absolute paths "
                                 "CURRENT,VOLTAGE,STATUS")
        settings = EnergySettings(settings.interval_ms, settings.idle_s, convention, (paths[0], paths[1], paths[2]))
    return settings


def sustained_load(options: NativeOptions) -> SustainedLoad | None:
    """The --sustained options, range-checked (None: not a sustained run); errors name the flag."""
    if options.sustained is None:
        for flag, asked in (("--pace", options.pace is not None), ("--rate", options.rate is not None),
                            ("--no-cooldown", options.no_cooldown)):
            if asked:
                raise SpecbenchError(f"{flag} is for --sustained runs (add --sustained DURATION)")
        return None
    for flag, given in (("--runs", options.runs), ("--warmup", options.warmup)):
        if given is not None:
            raise SpecbenchError(f"{flag} is not for --sustained runs: a stream's requests are its samples")
    load = SustainedLoad(parse_duration(options.sustained), Pace(options.pace or Pace.REALTIME), options.rate,
                         not options.no_cooldown)
    check_load(load)
    return load


def common_methods(devices: Sequence[Device]) -> list[str]:
    """The methods every device's runner decodes natively, in the first one's order."""
    listed = [dev.runner().methods for dev in devices]
    return [m for m in listed[0] if all(m in methods for methods in listed)]


def native_traces(traces_dir: Path, windows: Sequence[Window], target: ModelFile,
                  drafters: Sequence[ModelFile]) -> dict[str, TraceFile]:
    """The traces a native run is checked against: their y is what each output must equal, and a
    drafter's trace holds the decisions its configurations must take (docs/METHODS.md §6.4 Drafters and
    decisions checked against the trace)."""
    traces = load_trace_dir(traces_dir)
    check_against_windows(traces, windows)
    check_trace_templates(traces, target, drafters, windows)
    check_traced_target(traces, target)
    return traces


def check_traced_target(traces: Mapping[str, TraceFile], target: ModelFile) -> TraceFile:
    """Refuse a target that is not the one the traces were made with (its outputs are what native
    outputs are checked against); returns the first trace file."""
    first = next(iter(traces.values()))
    if first.target.sha256 != target.sha256:
        raise SpecbenchError(f"{first.path}: traced with target {first.target.name} ({first.target.sha256[:12]}), "
                             f"not {target.path} ({target.sha256[:12]})",
                             hint="pass the target the traces were made with")
    return first


def native_plans(devices: Sequence[Device], windows: list[Window], windows_path: Path, target: ModelFile,
                 drafters: Sequence[ModelFile], configs: list[MethodConfig], traces_dir: Path | None,
                 profile_path: Path | None, placement_spec: str | None, runs: int = 1,
                 warmup: int = 0, energy: EnergySettings | None = None) -> list[NativePlan]:
    """One plan per device, in the placement of `profile_path` (else `placement_spec`, else shared);
    outputs and decisions are checked against the traces when `traces_dir` is given, outputs else
    against target-only's. Every (window, configuration) is decoded `runs` times after `warmup`
    untimed decodes, with the drafter it names (one that is not among `drafters` is refused here)."""
    traces = None if traces_dir is None else native_traces(traces_dir, windows, target, drafters)
    profile = load_profile(profile_path) if profile_path is not None else None
    return [NativePlan(dev, windows, target, tuple(drafters), configs, native_placement(dev, placement_spec, profile),
                       traces, str(windows_path), profile_ref(profile), runs, warmup, energy=energy)
            for dev in devices]


def run_plans(plans: Sequence[NativePlan], out: Path, resume: bool) -> None:
    """Every plan on its device, in parallel; one device's results go to `out`, several to out/<device>/."""

    outcomes: list[NativeOutcome] = []

    def one(plan: NativePlan, advance) -> None:
        where = out if len(plans) == 1 else out / safe_name(plan.device.name)
        run = run_native if plan.sustained is None else run_sustained
        with removed_if_refused(where):  # a refused run leaves nothing that would refuse its corrected rerun
            outcome = run(plan, where, resume, advance)
        outcomes.append(outcome)
        results = outcome.results
        stderr.print(f"{outcome.added} rows written to {results.rows_path}")
        energy = read_manifest(results.manifest_path).energy
        if energy is not None and energy.no_source is not None:
            stderr.print(f"{plan.device.name}: {energy.no_source}; the rows carry no energy")
        report_outcome(outcome, stderr.print)

    by_device = {plan.device.name: plan for plan in plans}
    on_devices([plan.device for plan in plans], "running on", lambda dev: native_steps(by_device[dev.name]),
               lambda dev, advance: one(by_device[dev.name], advance))
    refuse_mismatches(outcomes)


def report_outcome(outcome: NativeOutcome, say: Callable[[str], None]) -> None:
    """What a native run's checks found, on stderr: divergences, decisions differing from the trace's,
    configurations whose decisions could not be checked."""
    directory = outcome.results.directory
    if outcome.diverged:
        near = outcome.diverged - len(outcome.unexplained)
        say(f"warning: {outcome.diverged} (window, method) outputs differ from the reference, {near} explained as "
            f"near-ties of the target's batched forward; see {directory / DIVERGENCES}")
    for line in outcome.unchecked.values():
        say(f"warning: {line}")
    explained = [m for m in outcome.mismatches if m.explained is not None]
    if explained:
        say(f"warning: {len(explained)} native rows decided otherwise than the trace where {explained[0].explained} "
            f"(replay priced the traced decisions); see {directory / DECISIONS}")
    if outcome.mismatched:
        say(f"error: {outcome.mismatched} native rows: decisions differ from the trace; see {directory / DECISIONS}")


def refuse_mismatches(outcomes: Sequence[NativeOutcome]) -> None:
    """A run whose decisions differ from the trace's, or whose output differs from the reference other than
    at a near-tie (docs/METHODS.md §6.5 Divergences explained), fails (its rows, decisions.jsonl and
    divergences.jsonl are kept)."""
    odd = [o for o in outcomes if o.unexplained]
    if odd:
        div = odd[0].unexplained[0]
        m = div.margins
        where = ("no target forward committed it" if m is None else
                 f"width 1 ranks token {m.single_top2[0]} first, not the reference's {div.expected}"
                 if m.single_top2[0] != div.expected else
                 f"width-1 gap {m.single_gap:.4f} > 2 x the largest logit difference {m.max_logit_diff:.4f} "
                 f"between width 1 and width {div.width}")
        raise SpecbenchError(f"outputs differ from the reference, not at a near-tie: "
                             f"{sum(len(o.unexplained) for o in odd)} (window, method) outputs, first {div.config} "
                             f"on window '{div.window_id}' at position {div.position} ({where}); see "
                             f"{odd[0].results.directory / DIVERGENCES}",
                             hint="a decoding bug or a nondeterministic build: the method did not commit the "
                                  "target's greedy output")
    bad = [o for o in outcomes if o.mismatched]
    if bad:
        first = next(m for m in bad[0].mismatches if m.explained is None)
        raise SpecbenchError(f"decisions differ from the trace: {sum(o.mismatched for o in bad)} native rows, "
                             f"first {first.config} on window '{first.window_id}': {first.difference} "
                             f"(drafter sha256 {str(first.drafter_sha256)[:12]}, the trace's "
                             f"{first.trace_drafter_sha256[:12]}); see {bad[0].results.directory / DECISIONS}",
                             hint="run with the drafter file the traces were recorded with, or trace again")
