"""`specbench profile`: measure a device's forward costs into a profile YAML."""

from __future__ import annotations

from pathlib import Path

import click

from specbench.cli.devices import device_names, phone_options, phone_settings
from specbench.core.repetitions import (
    DEFAULT_MAX_REPETITIONS,
    DEFAULT_PRECISION,
    MAX_PRECISION_REPETITIONS,
    MIN_REPETITIONS,
)
from specbench.errors import SpecbenchError


@click.command()
@click.argument("device_specs", nargs=-1, metavar="[DEVICE]...")
@click.option("--target", "target_path", type=click.Path(path_type=Path), default=None,
              help="Target model (.gguf, or a Whisper model in whisper.cpp's format). Default: the demo target "
                   "(smollm2-135m-f16), fetched and derived once.")
@click.option("--drafter", "drafter_specs", multiple=True, metavar="NAME=PATH",
              help="A drafter model to profile, named as in traces, or pld (prompt lookup: its measured cost). "
                   "Repeatable. Default: the demo drafters.")
@click.option("--max-width", type=click.IntRange(1, 64), default=16, show_default=True,
              help="Target widths 1..W (AS2D budget B needs W >= B+1; SD width W needs W).")
@click.option("--drafter-max-width", type=click.IntRange(1, 64), default=None,
              help="Drafter widths 1..n (default: --max-width; SpecASR's ingest needs up to k_max).")
@click.option("--depths", default="0,128,256", show_default=True, help="KV depths to measure at (comma-separated).")
@click.option("--precision", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=DEFAULT_PRECISION,
              show_default=True,
              help="Time each cell until the half-width of its median's ~95% confidence interval is within this "
                   "fraction of the median (0.02 = 2%), between --min-repetitions and --max-repetitions "
                   "(docs/METHODS.md §4.2 Forward costs: CT, CD and the all-rows table).")
@click.option("--min-repetitions", type=click.IntRange(MIN_REPETITIONS), default=MIN_REPETITIONS, show_default=True,
              help="Timed forwards every cell takes (a co-scheduling cell: target forwards alone and together).")
@click.option("--max-repetitions", type=click.IntRange(MIN_REPETITIONS, MAX_PRECISION_REPETITIONS),
              default=DEFAULT_MAX_REPETITIONS, show_default=True,
              help="Most timed forwards a cell takes chasing --precision; a cell that stops here short of it is "
                   "warned about.")
@click.option("--repetitions", type=click.IntRange(MIN_REPETITIONS), default=None,
              help="A fixed count of timed forwards per cell instead of --precision.")
@click.option("--placement", "placement_spec", default="shared", show_default=True, metavar="split|shared|SPEC",
              help="Where each lane runs while measuring (every table is measured there): split = target and "
                   "drafter on disjoint halves of the CPUs, shared = both on all of them, or "
                   "'target=PROC@CPUS[/THREADS],drafter=PROC@CPUS[/THREADS]' (e.g. target=GPUOpenCL@4-7/1,"
                   "drafter=cpu@0-3). One profile per placement.")
@click.option("--no-cosched", is_flag=True,
              help="Skip the co-scheduling measurement (AS2D replay then refuses the profile).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Profile YAML to write (raw samples go beside it, *.samples.jsonl). Default: "
                   "device_profiles/<device>-<placement>.yaml; with several devices, <stem>-<device>.yaml each.")
@phone_options
def profile(device_specs: tuple[str, ...], target_path: Path | None, drafter_specs: tuple[str, ...], max_width: int,
            drafter_max_width: int | None, depths: str, precision: float, min_repetitions: int,
            max_repetitions: int, repetitions: int | None, placement_spec: str, no_cosched: bool,
            out: Path | None) -> None:
    """Profile DEVICE (default: local, this host; or phone serials, in parallel): forward costs.

    The runner times target forwards of widths 1..--max-width (logits for every row) and
    drafter forwards at each depth after warm-up, each cell (model, width, depth) until its
    median is known to --precision (between --min-repetitions and --max-repetitions; the
    cells not yet there go round in interleaved rounds), or --repetitions times; records
    the device state before and after, and co-scheduling ratios at each depth, all in one
    --placement, each lane's threads pinned to its CPUs (read back and recorded). A
    co-scheduling cell alternates the lanes alone and together (ABBA) and takes the same rule:
    until the bootstrap interval of each ratio is within --precision, or --max-repetitions. A
    timing whose samples spread more than 10% of their median, a cell that stopped at
    --max-repetitions short of --precision, and a co-scheduling ratio below 1 beyond its
    interval after a second measurement are warned about on stderr and kept in the
    profile's `warnings`, which `specbench report` shows. Phones
    (serials from `specbench devices`) get the runner and models
    pushed to /data/local/tmp/specbench, jobs pinned to --cores and a cool-down between jobs.

    Example:

        specbench profile local --target models/target.gguf --drafter small=models/draft.gguf
        --max-width 16 --depths 0,128,256 --placement split --out device_profiles/local-split.yaml

        specbench profile 0A1B2C3D R5CT20XYZ --target models/target.gguf --cores big
    """
    from contextlib import ExitStack

    from specbench.app.devices import on_devices, open_devices
    from specbench.app.progress import stderr
    from specbench.schemas.fileio import WriterLock, check_writable
    from specbench.schemas.placement import resolve_on
    from specbench.schemas.profiles import WARNING_HINT
    from specbench.world.profiling import (
        SweepPlan,
        parse_depths,
        plan_for,
        profile_device,
        repetition_rule,
        samples_path,
        write_profile,
    )

    parsed_depths = parse_depths(depths)
    if repetitions is not None:
        wanted = {"--min-repetitions": min_repetitions != MIN_REPETITIONS,
                  "--max-repetitions": max_repetitions != DEFAULT_MAX_REPETITIONS,
                  "--precision": precision != DEFAULT_PRECISION}
        clash = next((flag for flag, given in wanted.items() if given), None)
        if clash:
            raise SpecbenchError(f"--repetitions {repetitions} (a fixed count) goes without {clash}")
    rule = repetition_rule(precision, min_repetitions, max_repetitions) if repetitions is None else None
    names = device_names(device_specs)
    outs = {name: _out_path(out, name, placement_spec, len(names)) for name in names}
    target, drafters = _models(target_path, drafter_specs)
    for path in outs.values():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)  # the default device_profiles/ may not exist yet
        except OSError as exc:
            raise SpecbenchError(f"--out {path}: cannot make {path.parent} ({exc.strerror or exc})") from None
        check_writable(path.parent, "profile")  # before measuring: a profile that cannot be written is lost
    held = ExitStack()  # one writer per profile, for the whole measurement
    for path in outs.values():
        held.enter_context(WriterLock(path, "profile"))
    plans: dict[str, SweepPlan] = {}  # per device, once the devices are open

    def one(dev, advance):
        run = profile_device(dev, target, drafters, plans[dev.name], advance)
        write_profile(outs[dev.name], run)  # as soon as it is done: another phone may still fail
        stderr.print(f"profile written to {outs[dev.name]} (raw samples: {samples_path(outs[dev.name])})")
        warnings = run.profile.warnings
        for warning in warnings:
            stderr.print(f"warning: {dev.name}: {warning.message()}", markup=False, soft_wrap=True)
        if warnings:
            stderr.print(f"hint: {WARNING_HINT}", markup=False, soft_wrap=True)

    with held:
        devices = open_devices(names, phone_settings())
        plans.update({dev.name: plan_for(max_width, parsed_depths, resolve_on(dev, placement_spec),
                                         repetitions or min_repetitions, drafter_max_width, not no_cosched,
                                         None if rule is None else rule.precision, max_repetitions)
                      for dev in devices})
        on_devices(devices, "profiling", lambda dev: plans[dev.name].forwards(drafters), one)


def _out_path(out: Path | None, name: str, placement_spec: str, count: int) -> Path:
    from specbench.schemas.fileio import safe_name

    if out is None:  # one profile per placement: the name says which
        return Path("device_profiles") / f"{safe_name(name)}-{safe_name(placement_spec)}.yaml"
    return out if count == 1 else out.with_name(f"{out.stem}-{safe_name(name)}{out.suffix or '.yaml'}")


def _models(target_path: Path | None, drafter_specs: tuple[str, ...]):
    from specbench.app.demo import demo_models
    from specbench.world.model_files import parse_named, target_file, unique_names

    if target_path is None:
        if drafter_specs:
            raise SpecbenchError("--drafter without --target: pass the target model the drafters go with")
        return demo_models()
    return target_file(target_path), unique_names([parse_named(s) for s in drafter_specs])
