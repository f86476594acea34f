"""`specbench validate`'s options as one request (ValidationRequest), and the command's flow: its inputs
checked before any profiling, the device opened, the blocks run (app/validate.py), the tables and figures
written (app/validation_report.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from specbench.app.options import DEFAULT_MAX_REPETITIONS, MAX_PRECISION_REPETITIONS, OVERHEADS_WINDOWS, PhoneOptions
from specbench.errors import SpecbenchError

if TYPE_CHECKING:
    from specbench.render.tables import Table


MAX_REPEATS = 10
"""Most --repeats: past it a block's decodes outlast the drift its refreshes bracket."""


@dataclass(frozen=True)
class ValidationRequest:
    """`validate`'s arguments and options, as given (each one's range checked where it is parsed)."""

    windows: Path
    """WINDOWS: the windows file."""
    traces_dir: Path
    """--traces: one trace per drafter of WINDOWS."""
    target: Path
    """--target: the target model the traces were made with."""
    drafter_specs: tuple[str, ...]
    """--drafter NAME=PATH (or pld), each time given."""
    method_names: str | None = None
    """--methods as typed (None: not given)."""
    method_specs: tuple[str, ...] = ()
    """--method, each time given."""
    template_specs: tuple[str, ...] = ()
    """--template NAME=TEMPLATE, each time given."""
    device: str = "local"
    """--device: local or one phone serial."""
    placement_specs: tuple[str, ...] = ()
    """--placement, each time given (none: shared)."""
    depths: str = "0,64,128"
    """--depths as typed (comma-separated KV depths)."""
    block_windows: int = 6
    """--block-windows: windows per block."""
    min_blocks: int = 2
    """--min-blocks: blocks per placement before the stopping rule is asked."""
    max_blocks: int = 8
    """--max-blocks: the block budget per placement."""
    halfwidth_pct: float = 1.0
    """--halfwidth: stop when every bias interval's half-width is within this (%)."""
    probe_threshold_pct: float = 5.0
    """--probe-threshold: the least probe move that voids a block (%)."""
    probe_spreads: float = 3.0
    """--probe-spreads: the probes' scatters a window's probes may move before the block is voided."""
    max_voids: int = 2
    """--max-voids: redos of a voided block."""
    cooldown_s: float = 30.0
    """--cooldown: seconds to wait before redoing a voided block."""
    repetitions: int = 5
    """--repetitions: timed forwards per profile cell (the minimum with a precision)."""
    precision: float | None = None
    """--precision: profile cells to this fraction of their median (None: a fixed count)."""
    max_repetitions: int = DEFAULT_MAX_REPETITIONS
    """--max-repetitions: with a precision, most timed forwards a cell takes."""
    overheads_windows: int = OVERHEADS_WINDOWS
    """--overheads-windows: copies of the overheads window in the full profile and each refresh."""
    probe_repetitions: int = 5
    """--probe-repetitions: width-1 forwards per model in one probe."""
    repeats: int = 1
    """--repeats: passes of each of Na and Nb over a block's windows."""
    speedup_bound_pct: float = 3.0
    """--speedup-bound: the speedup bias's 90% interval must lie within ±this (%)."""
    throughput_bound_pct: float = 5.0
    """--throughput-bound: the throughput bias's 90% interval must lie within ±this (%)."""
    error_bound_pct: float = 5.0
    """--error-bound: the excess error's upper 95% bound must be below this (%)."""
    seed: int = 1
    """--seed: of the blocks' random orders."""
    out: Path | None = None
    """--out: the validation directory (None: results/validate-<device>)."""
    resume: bool = False
    """--resume: continue an interrupted validation in `out`."""
    phone: PhoneOptions = PhoneOptions()
    """The phone options."""

    def __post_init__(self) -> None:
        # the rules between options; each option's own range is its parser's
        if self.precision is not None and not self.repetitions <= self.max_repetitions <= MAX_PRECISION_REPETITIONS:
            raise SpecbenchError(f"--max-repetitions {self.max_repetitions}: expected between --repetitions "
                                 f"({self.repetitions}) and {MAX_PRECISION_REPETITIONS}")
        if self.max_blocks < self.min_blocks:
            raise SpecbenchError(f"--max-blocks {self.max_blocks}: expected >= --min-blocks ({self.min_blocks})")

    @property
    def out_dir(self) -> Path:
        """The validation directory: --out, or results/validate-<device>."""
        return self.out or Path("results") / f"validate-{self.device}"


def validate(request: ValidationRequest) -> list[Table]:
    """Check the inputs, run the validation on the device, write OUT/validation.md and the figures; returns
    the tables (stdout's)."""
    from specbench.app.device_runs import check_traced_target
    from specbench.app.devices import open_devices
    from specbench.app.options import configs_from, device_names
    from specbench.app.progress import progress_bar, stderr
    from specbench.app.validate import Bounds, Validation, ValidationPlan, resolve_configs
    from specbench.app.validation_report import validation_figures, validation_tables
    from specbench.core.methods.configs import TargetConfig
    from specbench.render.tables import render
    from specbench.schemas.fileio import WriterLock, write_atomic
    from specbench.schemas.placement import resolve_on
    from specbench.schemas.traces import load_trace_dir
    from specbench.schemas.validation import MANIFEST
    from specbench.schemas.windows import load_windows
    from specbench.world.model_files import parse_named, target_file, with_templates
    from specbench.world.profiling import parse_depths

    r = request
    out = r.out_dir
    if (out / MANIFEST).exists() and not r.resume:
        raise SpecbenchError(f"{out}: a validation already exists",
                             hint="pass --resume to continue it, or another --out")
    depths = parse_depths(r.depths)
    traces = load_trace_dir(r.traces_dir)
    target = target_file(r.target)
    check_traced_target(traces, target)  # before any profiling: its outputs are what decodes are checked against
    drafters = [parse_named(spec) for spec in r.drafter_specs]
    target, drafters = with_templates(target, drafters, r.template_specs)
    unknown = [d.name for d in drafters if d.name not in traces]
    if unknown:
        raise SpecbenchError(f"--drafter {unknown[0]}: not among the traced drafters ({', '.join(sorted(traces))})")
    configs = resolve_configs(configs_from(r.method_names, r.method_specs, None), traces)
    # resolve_configs puts target-only first and names every other configuration's drafter
    used = {c.drafter for c in configs[1:] if not isinstance(c, TargetConfig) and c.drafter is not None}
    missing = sorted(used - {d.name for d in drafters})
    if missing:
        raise SpecbenchError(f"--method ... drafter={missing[0]}: no --drafter {missing[0]}=PATH given")
    (dev,) = open_devices(device_names([r.device]), r.phone)
    placements = [resolve_on(dev, spec) for spec in (r.placement_specs or ("shared",))]
    plan = ValidationPlan(dev, load_windows(r.windows), r.windows, r.traces_dir, target,
                          {d.name: d for d in drafters}, configs, placements, depths, r.seed, r.block_windows,
                          r.min_blocks, r.max_blocks, r.halfwidth_pct, r.probe_threshold_pct, r.max_voids,
                          r.cooldown_s, r.repetitions, r.probe_repetitions,
                          Bounds(r.speedup_bound_pct, r.error_bound_pct),
                          Bounds(r.throughput_bound_pct, r.error_bound_pct), r.precision, r.max_repetitions,
                          r.probe_spreads, r.overheads_windows, r.repeats)
    # every window once per pass: Na and Nb, `repeats` times each
    total = (r.max_blocks * len(placements) * len(plan.groups()) * min(r.block_windows, len(plan.windows))
             * 2 * r.repeats)
    out.mkdir(parents=True, exist_ok=True)
    with WriterLock(out, "validation directory"), progress_bar("validating (windows decoded)", total) as advance:
        Validation(plan, out, lambda line: stderr.print(line, markup=False), advance).run()
        tables = validation_tables(out)
        write_atomic(out / "validation.md", render(tables, "md"))
        figures = validation_figures(out, out / "figures")
    stderr.print(f"validation written to {out} (validation.md, summary.jsonl, {len(figures)} figure files)")
    return tables
