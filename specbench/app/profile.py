"""`specbench profile`: one request, measured on each device (in parallel) into a profile YAML each."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from specbench.app.options import (
    DEFAULT_MAX_REPETITIONS,
    DEFAULT_PRECISION,
    MIN_REPETITIONS,
    OVERHEADS_WINDOWS,
    PhoneOptions,
)
from specbench.errors import SpecbenchError


@dataclass(frozen=True)
class ProfileRequest:
    """`profile`'s arguments and options, as given."""

    device_specs: tuple[str, ...]
    """DEVICE..., as given (none: local)."""
    target: Path | None
    """--target: the target model file (None: the demo target)."""
    drafter_specs: tuple[str, ...]
    """--drafter NAME=PATH (or pld), each time given (none with no --target: the demo drafters)."""
    max_width: int = 16
    """--max-width: target widths 1..max_width."""
    drafter_max_width: int | None = None
    """--drafter-max-width (None: max_width)."""
    depths: str = "0,128,256"
    """--depths as typed (comma-separated KV depths)."""
    precision: float = DEFAULT_PRECISION
    """--precision: the half-width of a cell's median interval, as a fraction of the median."""
    min_repetitions: int = MIN_REPETITIONS
    """--min-repetitions: timed forwards every cell takes."""
    max_repetitions: int = DEFAULT_MAX_REPETITIONS
    """--max-repetitions: most timed forwards a cell takes chasing the precision."""
    repetitions: int | None = None
    """--repetitions: a fixed count per cell instead of the precision (None: not given)."""
    placement: str = "shared"
    """--placement: split, shared or an explicit placement."""
    no_cosched: bool = False
    """--no-cosched: skip the co-scheduling measurement."""
    overheads_windows: int = OVERHEADS_WINDOWS
    """--overheads-windows: copies of the overheads window each method decodes twice."""
    windows: Path | None = None
    """--windows: the workload's windows, for AS2D's overheads decodes (None: the passage of prose)."""
    out: Path | None = None
    """--out: the profile YAML (None: device_profiles/<device>-<placement>.yaml)."""
    phone: PhoneOptions = PhoneOptions()
    """The phone options."""

    def __post_init__(self) -> None:
        if self.repetitions is not None:  # a fixed count leaves the precision rule's options unread
            wanted = {"--min-repetitions": self.min_repetitions != MIN_REPETITIONS,
                      "--max-repetitions": self.max_repetitions != DEFAULT_MAX_REPETITIONS,
                      "--precision": self.precision != DEFAULT_PRECISION}
            clash = next((flag for flag, given in wanted.items() if given), None)
            if clash:
                raise SpecbenchError(f"--repetitions {self.repetitions} (a fixed count) goes without {clash}")


def profile(request: ProfileRequest) -> None:
    """Profile every device of `request` in parallel; each profile is written (and its warnings
    printed on stderr) as soon as its device is done, every output checked writable and locked first."""
    from contextlib import ExitStack

    from specbench.app.devices import on_devices, open_devices
    from specbench.app.options import device_names
    from specbench.app.progress import stderr
    from specbench.schemas.fileio import WriterLock, check_writable
    from specbench.schemas.placement import resolve_on
    from specbench.schemas.profiles import WARNING_HINT
    from specbench.schemas.windows import load_windows
    from specbench.world.profiling import (
        SweepPlan,
        parse_depths,
        plan_for,
        profile_device,
        repetition_rule,
        samples_path,
        write_profile,
    )

    r = request
    parsed_depths = parse_depths(r.depths)
    rule = repetition_rule(r.precision, r.min_repetitions, r.max_repetitions) if r.repetitions is None else None
    names = device_names(r.device_specs)
    outs = {name: _out_path(r.out, name, r.placement, len(names)) for name in names}
    workload = tuple(load_windows(r.windows)) if r.windows is not None else ()
    target, drafters = _models(r.target, r.drafter_specs)
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
        devices = open_devices(names, r.phone)
        plans.update({dev.name: plan_for(r.max_width, parsed_depths, resolve_on(dev, r.placement),
                                         r.repetitions or r.min_repetitions, r.drafter_max_width, not r.no_cosched,
                                         None if rule is None else rule.precision, r.max_repetitions,
                                         r.overheads_windows, workload)
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
