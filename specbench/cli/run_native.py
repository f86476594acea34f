"""The --native half of `specbench run`: options and wiring to specbench.native_run."""

from __future__ import annotations

from pathlib import Path

import click
from click.core import ParameterSource

from ..errors import SpecbenchError
from ..model_files import parse_named, target_file
from ..native_run import NativePlan, native_methods, native_steps, open_device, run_native
from ..traces import check_against_windows, load_trace_dir
from ..windows import load_split
from .common import configs_from, progress_bar, stderr


def native_options(func):
    func = click.option("--threads", type=click.IntRange(1), default=None,
                        help="--native: threads per model (default: all hardware threads).")(func)
    func = click.option("--target", "target_path", type=click.Path(path_type=Path), default=None,
                        help="--native: the target model (.gguf).")(func)
    func = click.option("--device", default=None, help="--native: where to run (local: this host).")(func)
    func = click.option("--native", is_flag=True,
                        help="Run the methods for real on --device instead of replaying them "
                             "(--drafter then takes NAME=PATH).")(func)
    return func


def run_native_command(windows_path: Path, traces_dir: Path | None, profile_paths: tuple[Path, ...],
                       method_names: str, method_specs: tuple[str, ...], drafter_spec: str | None,
                       budget_path: Path | None, split: str | None, out: Path, resume: bool, sensitivity: bool,
                       native: bool, device: str | None, target_path: Path | None, threads: int | None) -> None:
    if not native:
        raise SpecbenchError("--device and --target are for native runs: add --native")
    for flag, given in (("--profile", bool(profile_paths)), ("--budget", budget_path is not None),
                        ("--sensitivity", sensitivity)):
        if given:
            raise SpecbenchError(f"{flag} is for replay; a --native run measures on the device itself")
    if target_path is None:
        raise SpecbenchError("--native needs --target PATH (the target model file)")
    dev = open_device(device or "local")
    if click.get_current_context().get_parameter_source("method_names") is ParameterSource.DEFAULT:
        method_names = ",".join(native_methods(dev))
    windows = load_split(windows_path, split)
    target = target_file(target_path)
    drafter = parse_named(drafter_spec) if drafter_spec else None
    configs = configs_from(method_names, method_specs, drafter.name if drafter else None)
    references = None
    if traces_dir is not None:
        traces = load_trace_dir(traces_dir)
        check_against_windows(traces, windows)
        first = next(iter(traces.values()))
        if first.target.sha256 != target.sha256:
            raise SpecbenchError(f"{first.path}: traced with target {first.target.name} ({first.target.sha256[:12]}), "
                                 f"not {target.path} ({target.sha256[:12]})")
        references = {w.window_id: first.windows[w.window_id].y.tolist() for w in windows}
    plan = NativePlan(dev, windows, target, drafter, configs, references, threads,
                      str(windows_path))
    with progress_bar(f"running on {plan.device.name}", native_steps(plan)) as advance:
        results, added, diverged = run_native(plan, out, resume, advance)
    stderr.print(f"{added} rows written to {results.rows_path}")
    if diverged:
        stderr.print(f"warning: {diverged} (window, method) outputs differ from the reference; "
                     f"see {results.directory / 'divergences.jsonl'}")
