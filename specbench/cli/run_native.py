"""The --native half of `specbench run`: options and wiring to specbench.app.native."""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import click

from specbench.cli.common import TEMPLATE_HELP, configs_from
from specbench.cli.devices import device_names, phone_options, phone_settings
from specbench.errors import SpecbenchError

if TYPE_CHECKING:
    from specbench.world.native_energy import EnergySettings
    from specbench.world.native_run import SustainedLoad


@dataclass(frozen=True)
class NativeOptions:
    """`run`'s --native options, read once from the command line."""

    native: bool
    """--native: run on a device instead of replaying."""
    device: str | None
    """--device: local or phone serials, comma-separated."""
    target: Path | None
    """--target: the target model file."""
    placement: str | None
    """--placement: split, shared or an explicit placement (None: the profile's, else shared)."""
    target_mmproj: Path | None
    """--target-mmproj: the target's audio projector."""
    drafter_mmproj: tuple[str, ...]
    """--drafter-mmproj [NAME=]PATH, as given: a drafter's audio projector."""
    templates: tuple[str, ...]
    """--template NAME=TEMPLATE, as given."""
    runs: str | None
    """--runs as typed (checked by `repeat_counts`, naming the flag)."""
    warmup: str | None
    """--warmup as typed."""
    sustained: str | None = None
    """--sustained DURATION as typed (checked by `sustained_load`)."""
    pace: str | None = None
    """--pace realtime|back-to-back (None: not given; realtime)."""
    rate: float | None = None
    """--rate: requests per second for windows without an audio duration."""
    no_cooldown: bool = False
    """--no-cooldown: no cool-down between a sustained run's streams."""
    energy_interval_ms: int = 0
    """--energy-interval: milliseconds between battery samples (0: off)."""
    energy_idle_s: float | None = None
    """--energy-idle: seconds of idle draw measured before the first window (None: not given, 5)."""
    energy_convention: str | None = None
    """--energy-convention as typed (None: detected)."""
    energy_paths: str | None = None
    """--energy-paths CURRENT,VOLTAGE,STATUS as typed (None: the battery's usual files)."""
    reuse_encoder: bool = False
    """--reuse-encoder: a Whisper model encodes each window once per job."""

    @property
    def asked(self) -> bool:
        """A native run was asked for (by --native, or by a flag only a native run reads)."""
        return self.native or self.device is not None or self.target is not None


DEFAULT_IDLE_S = 5.0
"""--energy-idle when not given: long enough for a few fuel-gauge updates of most phones."""

_NATIVE_OPTIONS = (  # in the order --help lists them
    click.option("--energy-interval", "energy_interval_ms", type=click.IntRange(0, 60000), default=0, metavar="MS",
                 help="--native: the runner samples the battery's current and voltage every MS milliseconds on its "
                      "decode clock, and rows get energy_j (docs/METHODS.md §10 Energy); 0 (default): off, so a "
                      "throughput run shares its CPUs with no sampler."),
    click.option("--energy-idle", "energy_idle_s", type=click.FloatRange(0, 600), default=None, metavar="S",
                 help="--native with --energy-interval: seconds of idle draw measured before the first window "
                      "(default 5; 0: no idle baseline, energy_above_idle_j stays empty)."),
    click.option("--energy-convention", default=None, metavar="I,V,SIGN",
                 help="--native with --energy-interval: how current_now/voltage_now read, e.g. "
                      "uA,uV,discharging_negative (units uA|mA, uV|mV; sign discharging_negative|positive); "
                      "default: detected from the values and the battery's status."),
    click.option("--energy-paths", default=None, metavar="CURRENT,VOLTAGE,STATUS",
                 help="--native with --energy-interval: the device's current, voltage and status files "
                      "(default /sys/class/power_supply/battery/{current_now,voltage_now,status})."),
    click.option("--runs", "runs_text", default=None, metavar="N",
                 help="--native: timed decodes of every (window, configuration) (default 1); every sample "
                      "is kept in the row (samples_s), the row is the median one."),
    click.option("--warmup", "warmup_text", default=None, metavar="M",
                 help="--native: untimed decodes of every configuration (on the first window to do) before "
                      "the timed ones, once per device run (default 0)."),
    click.option("--sustained", "sustained_text", default=None, metavar="DURATION",
                 help="--native: sustained, paced load (docs/METHODS.md §6.3 Sustained load): each method runs "
                      "its own stream of requests, cycling over the windows for DURATION (120s, 10m, 1h), each "
                      "from a fresh context, no cool-down between requests; a thermal timeline goes to "
                      "timeline.jsonl."),
    click.option("--pace", type=click.Choice(["realtime", "back-to-back"]), default=None,
                 help="--sustained: realtime (default: a request arrives as its audio would, an audio window's "
                      "duration after the previous one, or at --rate) or back-to-back (when the previous ends)."),
    click.option("--rate", type=click.FloatRange(0, 1000, min_open=True), default=None, metavar="R",
                 help="--sustained --pace realtime: requests per second for windows with no audio duration "
                      "(text windows need it)."),
    click.option("--reuse-encoder", is_flag=True,
                 help="--native with Whisper models: encode each window once and keep the encoder's output for "
                      "its other decodes (methods, --runs); the decode clock excludes the encoder either way, and "
                      "rows say so (audio_prefill_reused)."),
    click.option("--no-cooldown", is_flag=True,
                 help="--sustained: no cool-down between the methods' streams either (heat carries over)."),
    click.option("--template", "template_specs", multiple=True, metavar="NAME=TEMPLATE",
                 help="--native: " + TEMPLATE_HELP),
    click.option("--target-mmproj", type=click.Path(path_type=Path), default=None,
                 help="--native: the target's audio projector (.gguf), for audio windows."),
    click.option("--drafter-mmproj", multiple=True, metavar="[NAME=]PATH",
                 help="--native: a drafter's audio projector (.gguf), for audio windows (NAME=PATH per drafter, "
                      "or PATH for one)."),
    click.option("--native", is_flag=True,
                 help="Run the methods for real on --device instead of replaying them "
                      "(--drafter then takes NAME=PATH, or pld: prompt lookup, no model; repeat it for several "
                      "drafters, one job each). With --traces, outputs and decisions are checked against them: "
                      "decisions that differ from the trace's fail the run "
                      "(docs/METHODS.md §6.4 Drafters and decisions checked against the trace)."),
    click.option("--device", default=None,
                 help="--native: where to run: local (this host) or phone serials, comma-separated "
                      "(several: in parallel, results in OUT/<serial>/)."),
    click.option("--target", "target_path", type=click.Path(path_type=Path), default=None,
                 help="--native: the target model (.gguf, or a Whisper model in whisper.cpp's format)."),
    click.option("--placement", "placement_spec", default=None, metavar="split|shared|SPEC",
                 help="--native: where each lane runs (see `specbench profile --help`); default: the "
                      "placement of --profile, else shared. A --profile of another placement is refused."),
)


def native_options(func):
    """The --native options (and the phone options), given to `func` as one `native: NativeOptions`."""
    @functools.wraps(func)
    def wrapper(*args, native, device, target_path, placement_spec, target_mmproj, drafter_mmproj, template_specs,
                runs_text, warmup_text, sustained_text, pace, rate, no_cooldown, energy_interval_ms, energy_idle_s,
                energy_convention, energy_paths, reuse_encoder, **kwargs):
        options = NativeOptions(native, device, target_path, placement_spec, target_mmproj, tuple(drafter_mmproj),
                                tuple(template_specs), runs_text, warmup_text, sustained_text, pace, rate,
                                no_cooldown, energy_interval_ms, energy_idle_s, energy_convention, energy_paths,
                                reuse_encoder)
        return func(*args, native=options, **kwargs)

    for option in reversed(_NATIVE_OPTIONS):
        wrapper = option(wrapper)
    return phone_options(wrapper)


def repeat_counts(options: NativeOptions) -> tuple[int, int]:
    """(--runs, --warmup) as integers, range-checked (check_repeats), naming the flag."""
    from specbench.world.native_run import check_repeats

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
    from specbench.core.energy import parse_convention
    from specbench.world.native_energy import EnergySettings

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


def refuse_native_only(options: NativeOptions) -> None:
    """Replay uses what the traces recorded and prices each window once from the profile:
    --template, --runs and --warmup are for --native runs."""
    if options.templates:
        raise SpecbenchError("--template is for --native runs (replay uses what the traces recorded)")
    if options.reuse_encoder:
        raise SpecbenchError("--reuse-encoder is for --native runs (replay runs no encoder)")
    for flag, given in (("--runs", options.runs), ("--warmup", options.warmup)):
        if given is not None:
            raise SpecbenchError(f"{flag} is for --native runs (replay prices each window once from the profile)")
    for flag, asked in (("--sustained", options.sustained is not None), ("--pace", options.pace is not None),
                        ("--rate", options.rate is not None), ("--no-cooldown", options.no_cooldown)):
        if asked:
            raise SpecbenchError(f"{flag} is for --native --sustained runs (it paces requests on a device)")
    energy = (options.energy_idle_s, options.energy_convention, options.energy_paths)
    if options.energy_interval_ms or any(v is not None for v in energy):
        raise SpecbenchError("--energy-interval, --energy-idle, --energy-convention and --energy-paths are for "
                             "--native runs (replay has no battery)")


def sustained_load(options: NativeOptions) -> SustainedLoad | None:
    """The --sustained options, range-checked (None: not a sustained run); errors name the flag."""
    from specbench.world.native_run import SustainedLoad
    from specbench.world.sustained import check_load, parse_duration

    if options.sustained is None:
        for flag, asked in (("--pace", options.pace is not None), ("--rate", options.rate is not None),
                            ("--no-cooldown", options.no_cooldown)):
            if asked:
                raise SpecbenchError(f"{flag} is for --sustained runs (add --sustained DURATION)")
        return None
    for flag, given in (("--runs", options.runs), ("--warmup", options.warmup)):
        if given is not None:
            raise SpecbenchError(f"{flag} is not for --sustained runs: a stream's requests are its samples")
    load = SustainedLoad(parse_duration(options.sustained), options.pace or "realtime", options.rate,
                         not options.no_cooldown)
    check_load(load)
    return load


def run_native_command(windows_path: Path, traces_dir: Path | None, profile_paths: tuple[Path, ...],
                       method_names: str | None, method_specs: tuple[str, ...], drafter_specs: tuple[str, ...],
                       budget_path: Path | None, split: str | None, out: Path, resume: bool, sensitivity: bool,
                       options: NativeOptions) -> None:
    from specbench.app.devices import open_devices
    from specbench.app.native import common_methods, native_plans, run_plans
    from specbench.schemas.windows import load_split
    from specbench.world.model_files import (
        drafter_mmproj,
        parse_named,
        target_file,
        unique_names,
        with_mmproj,
        with_templates,
    )

    if not options.native:
        raise SpecbenchError("--device and --target are for native runs: add --native")
    for flag, given in (("--budget", budget_path is not None), ("--sensitivity", sensitivity)):
        if given:
            raise SpecbenchError(f"{flag} is for replay; a --native run measures on the device itself")
    if len(profile_paths) > 1:
        raise SpecbenchError("--native takes one --profile (the placement to run in)")
    if options.target is None:
        raise SpecbenchError("--native needs --target PATH (the target model file)")
    load = sustained_load(options)  # before any device is opened
    if load is not None and resume:
        raise SpecbenchError("--resume is not for --sustained runs: a paced stream cannot continue where it stopped")
    runs, warmup = repeat_counts(options)
    energy = energy_settings(options)
    if load is not None and energy is not None:
        raise SpecbenchError("--energy-interval is not for --sustained runs: a paced stream's energy is not attributed "
                             "(measure energy in a run without --sustained)")
    settings = phone_settings()
    settings.cooldown = load is None or load.cooldown
    devices = open_devices(device_names([options.device or "local"]), settings)
    windows = load_split(windows_path, split)
    target = with_mmproj(target_file(options.target), options.target_mmproj, "--target-mmproj")
    drafters = drafter_mmproj(unique_names([parse_named(s) for s in drafter_specs]), options.drafter_mmproj)
    target, drafters = with_templates(target, drafters, options.templates)
    configs = configs_from(method_names, method_specs, drafters[0].name if len(drafters) == 1 else None,
                           lambda: common_methods(devices))
    plans = native_plans(devices, windows, windows_path, target, drafters, configs, traces_dir,
                         profile_paths[0] if profile_paths else None, options.placement, runs, warmup, energy)
    if load is not None:
        from specbench.world.sustained import arrival_gaps_us

        arrival_gaps_us(windows, load)  # a text window without --rate, before any stream runs
        plans = [replace(plan, sustained=load) for plan in plans]
    if options.reuse_encoder:
        plans = [replace(plan, reuse_audio_prefill=True) for plan in plans]
    run_plans(plans, out, resume)
