"""The --native half of `specbench run`: its options, read into one NativeOptions (specbench.app.run_request)."""

from __future__ import annotations

import functools
from pathlib import Path

import click

from specbench.app.options import PACES
from specbench.app.run_request import NativeOptions
from specbench.cli.common import TEMPLATE_HELP
from specbench.cli.devices import phone_options

NATIVE = NativeOptions
"""Where the options' defaults live: the --native half's field defaults, written once."""

_NATIVE_OPTIONS = (  # in the order --help lists them
    click.option("--energy-interval", "energy_interval_ms", type=click.IntRange(0, 60000),
                 default=NATIVE.energy_interval_ms, metavar="MS",
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
    click.option("--pace", type=click.Choice(PACES), default=None,
                 help="--sustained: realtime (default: a request arrives as its audio would, an audio window's "
                      "duration after the previous one, or at --rate) or back-to-back (when the previous ends)."),
    click.option("--rate", type=click.FloatRange(0, 1000, min_open=True), default=None, metavar="R",
                 help="--sustained --pace realtime: requests per second for windows with no audio duration "
                      "(text windows need it)."),
    click.option("--reuse-encoder", is_flag=True,
                 help="--native with Whisper models: encode each window once and keep the encoder's output for "
                      "its other decodes (methods, --runs), in a split placement both models at once, each on its "
                      "lane; the decode clock excludes the encoder either way, and rows say so "
                      "(audio_prefill_reused)."),
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
        options = NativeOptions(
            native=native, device=device, target=target_path, placement=placement_spec, target_mmproj=target_mmproj,
            drafter_mmproj=tuple(drafter_mmproj), templates=tuple(template_specs), runs=runs_text,
            warmup=warmup_text, sustained=sustained_text, pace=pace, rate=rate, no_cooldown=no_cooldown,
            energy_interval_ms=energy_interval_ms, energy_idle_s=energy_idle_s,
            energy_convention=energy_convention, energy_paths=energy_paths, reuse_encoder=reuse_encoder)
        return func(*args, native=options, **kwargs)

    for option in reversed(_NATIVE_OPTIONS):
        wrapper = option(wrapper)
    return phone_options(wrapper)
