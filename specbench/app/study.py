"""Replay runs end to end: load and cross-check the inputs, replay, append results.

Everything is checked before the first row is written, so a bad input never leaves a
half-written results directory behind.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from specbench.app.cost_cells import needed_widths
from specbench.app.parallel_replay import replay_study_in_processes
from specbench.core.budget import BudgetChoice
from specbench.core.budget import select_budget as choose_budget
from specbench.core.methods.configs import As2dConfig, MethodConfig, SdConfig, SpecAsrConfig
from specbench.core.methods.sd import check_draft_rows
from specbench.core.pricing import DEPTH_POLICY, CostFit
from specbench.core.replay.bulk import COST_FITS, trace_for
from specbench.core.replay.serial import serial_ops
from specbench.errors import MissingCostError, SpecbenchError
from specbench.schemas.budgets import load_budget, save_budget
from specbench.schemas.fileio import file_sha256
from specbench.schemas.profiles import DeviceProfile, ModelId, load_profile
from specbench.schemas.results import (
    ProfileInput,
    ResultsDir,
    ResultsManifest,
    Source,
    TraceInput,
    WindowsInput,
    removed_if_refused,
)
from specbench.schemas.traces import TraceFile, check_against_windows, load_trace_dir
from specbench.schemas.windows import Split, Window, load_split, load_windows, windows_digest
from specbench.world.environment import now, session

if TYPE_CHECKING:
    from specbench.app.run_request import RunRequest


@dataclass(frozen=True)
class Inputs:
    windows: list[Window]
    traces: dict[str, TraceFile]
    profiles: list[DeviceProfile]
    windows_path: Path
    traces_dir: Path


def load_inputs(windows_path: Path, traces_dir: Path, profile_paths: Sequence[Path], split: str | None) -> Inputs:
    windows = load_split(windows_path, split)
    traces = load_trace_dir(traces_dir)
    check_against_windows(traces, windows)
    profiles = [load_profile(p) for p in profile_paths]
    names = [p.name for p in profiles]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise SpecbenchError(f"two profiles describe device '{duplicated[0]}' in the same placement; pass one "
                             "profile per device and placement")
    for profile in profiles:
        check_profile_target(profile, traces)
    return Inputs(windows, traces, profiles, Path(windows_path), Path(traces_dir))


def replay_run(request: RunRequest, out: Path) -> None:
    """`run` without --native: replay the configurations asked (a --budget's as2d in place of the
    default one) on the windows with every profile, appending rows to `out` as they are priced."""
    from specbench.app.options import DEFAULT_METHODS, configs_from
    from specbench.app.progress import progress_bar, stderr

    drafter_specs = request.drafter_specs
    if len(drafter_specs) > 1:
        raise SpecbenchError(f"--drafter given {len(drafter_specs)} times ({', '.join(drafter_specs)}): replay takes "
                             "one, the drafter of methods that name none",
                             hint="name each method's drafter in its spec, e.g. --method 'sd:W=5,drafter=small'")
    drafter = drafter_specs[0] if drafter_specs else None
    if request.traces_dir is None or not request.profile_paths:
        raise SpecbenchError("replay needs --traces and --profile (or pass --native to run on a device)")
    default = DEFAULT_METHODS
    method_names = request.method_names
    budget_path = request.budget_path
    if budget_path is not None:  # the budget file's configuration replaces the default as2d
        device, budget_config = load_budget(budget_path)
        default = tuple(m for m in DEFAULT_METHODS if m != "as2d")
        if method_names is not None:
            method_names = ",".join(n for n in method_names.split(",") if n.strip() != "as2d")
        stderr.print(f"as2d from {budget_path} (selected for {device}): {budget_config.label}")
    configs = configs_from(method_names, request.method_specs, drafter, lambda: default)
    if budget_path is not None and budget_config not in configs:
        configs.append(budget_config)
    inputs = load_inputs(request.windows, request.traces_dir, request.profile_paths, request.split)
    if budget_path is not None:
        check_budget_device(budget_path, device, inputs.profiles)
    total = study_size(inputs, configs, request.sensitivity)
    with progress_bar("replaying", total) as advance:
        results, added = run_replay(inputs, configs, list(request.profile_paths), out, request.resume,
                                    request.sensitivity, advance, request.workers)
    stderr.print(f"{added} rows written to {results.rows_path}")


def check_profile_target(profile: DeviceProfile, traces: dict[str, TraceFile]) -> None:
    """A profile measured for another target prices forwards the traces never made: refused."""
    target_sha = next(iter(traces.values())).target.sha256
    profiled = profile.target_model.sha256
    if profiled and profiled != target_sha:
        raise SpecbenchError(f"profile {profile.path}: measured for target model sha256 {profiled}, but the "
                             f"traces are of {target_sha}")


def check_budget_device(budget_path: Path, device: str, profiles: Sequence[DeviceProfile]) -> None:
    """A budget is chosen for one device@placement (its costs decide it): deployed on another, its
    rows would carry a choice nobody made for that device. Refused, naming both."""
    names = [p.name for p in profiles]
    if device not in names:
        raise SpecbenchError(f"{budget_path}: device = {device!r}, expected one of the profiled devices "
                             f"({', '.join(names)})", hint="select a budget for that device with "
                                                           "`specbench select-budget --profile` of its profile")


def dev_inputs(windows_path: Path, traces_dir: Path, profile_path: Path) -> tuple[Inputs, int]:
    """Inputs of budget selection: the dev windows traced in `traces_dir`, and how many traced
    test windows were left out (a budget chosen on test windows would flatter the results)."""
    traces = load_trace_dir(traces_dir)
    traced = set.intersection(*(set(t.windows) for t in traces.values()))
    windows = [w for w in load_windows(windows_path) if w.window_id in traced]
    if not windows:
        raise SpecbenchError(f"{traces_dir}: traces none of the windows in {windows_path}")
    dev = [w for w in windows if w.split is Split.DEV]
    if not dev:
        raise SpecbenchError(f"{traces_dir}: traces only test windows of {windows_path}; budget selection uses "
                             "development windows only", hint="trace the dev windows too")
    check_against_windows(traces, dev)
    profile = load_profile(profile_path)
    check_profile_target(profile, traces)
    inputs = Inputs(dev, traces, [profile], Path(windows_path), Path(traces_dir))
    return inputs, len(windows) - len(dev)


def check_costs(inputs: Inputs, configs: Sequence[MethodConfig]) -> None:
    """Every width a configuration may need must be measured (never guessed). Checked
    before anything is written, naming the configuration, the width and what was measured."""
    # Traces with rows never recorded (imported): replay's decisions run here once, so a window
    # that needs such a row is refused before anything is written.
    partial = any(t.drafts is not None and t.drafts.recorded is not None
                  for f in inputs.traces.values() for t in f.windows.values())
    for profile in inputs.profiles:
        for config in configs:
            drafts = trace_for(inputs.traces, config, inputs.windows[0].window_id)[1].drafts if inputs.windows else None
            target_max, drafter_max = needed_widths(config, drafts is not None and drafts.lookup is not None)
            try:
                for width in range(1, target_max + 1):
                    profile.target_costs.require(width)
                if drafter_max:
                    drafter = profile.drafter(getattr(config, "drafter", None) or _only_drafter(inputs, config))
                    for width in range(1, drafter_max + 1):
                        drafter.costs.require(width)
                        if isinstance(config, SpecAsrConfig):
                            drafter.ingest_costs().require(width)
                    if isinstance(config, As2dConfig) and (drafts is None or drafts.lookup is None):
                        profile.cosched(drafter.name)  # the lookup drafter's producer never computes
            except MissingCostError as exc:
                raise MissingCostError(f"{config.label}: {exc.args[0]}", exc.hint) from None
            for window in inputs.windows if partial else inputs.windows[:1]:
                name, trace = trace_for(inputs.traces, config, window.window_id)
                if isinstance(config, SdConfig) and trace.drafts is not None and trace.drafts.cross is None \
                        and trace.drafts.lookup is None:
                    check_draft_rows(trace, config)  # every window of a trace file has the same k_max
                if partial and isinstance(config, (SdConfig, SpecAsrConfig)) and trace.drafts is not None \
                        and trace.drafts.recorded is not None:
                    serial_ops(config, trace, window.cap, name)  # a row never recorded fails here, before any output


def _only_drafter(inputs: Inputs, config: MethodConfig) -> str:
    name, _ = trace_for(inputs.traces, config, inputs.windows[0].window_id)
    return name


def manifest_for(inputs: Inputs, configs: Sequence[MethodConfig], profile_paths: Sequence[Path],
                 sensitivity: bool) -> ResultsManifest:
    return ResultsManifest(
        Source.REPLAY, session(None),
        WindowsInput(str(inputs.windows_path), windows_digest(inputs.windows), len(inputs.windows)),
        tuple(c.label for c in configs),
        traces={name: TraceInput(str(t.path), ModelId(t.target.name, t.target.sha256),
                                 ModelId(t.drafter.name, t.drafter.sha256))
                for name, t in sorted(inputs.traces.items())},
        profiles=tuple(ProfileInput(str(path), file_sha256(path), p.name,
                                    None if p.runner is None else p.runner.sha256, p.placement, p.warnings,
                                    p.environment, p.declared_costs())
                       for p, path in zip(inputs.profiles, profile_paths, strict=False)),
        depth_policy=DEPTH_POLICY, sensitivity=sensitivity)


SENSITIVITY_FITS = tuple(f for f in COST_FITS if f != CostFit.MEDIAN)


def fit_configs(configs: Sequence[MethodConfig], fit: str) -> list[MethodConfig]:
    """The configurations replayed with a cost fill-in: co-scheduling ratio variants concern
    AS2D only (serial methods never overlap); every method prices depths."""
    if fit in (CostFit.MEDIAN, CostFit.DEPTH_LINEAR):
        return list(configs)
    return [c for c in configs if isinstance(c, As2dConfig)]


def run_replay(inputs: Inputs, configs: Sequence[MethodConfig], profile_paths: Sequence[Path], out: Path,
               resume: bool, sensitivity: bool, progress: Callable[[int], None] | None = None,
               workers: int | None = None) -> tuple[ResultsDir, int]:
    """Replay every (device, configuration, window) not already in `out`; returns rows added."""
    check_costs(inputs, configs)
    results = ResultsDir(out)
    with removed_if_refused(out):  # also gives the writer lock back, whatever the end
        done = results.open(manifest_for(inputs, configs, profile_paths, sensitivity), resume)
        added = _replay_into(results, done, inputs, configs, sensitivity, progress, workers)
    return results, added


def _replay_into(results: ResultsDir, done: set, inputs: Inputs, configs: Sequence[MethodConfig], sensitivity: bool,
                 progress: Callable[[int], None] | None, workers: int | None) -> int:
    fits = (CostFit.MEDIAN,) + (SENSITIVITY_FITS if sensitivity else ())
    added = 0
    for fit in fits:
        todo = [c for c in fit_configs(configs, fit) if not _all_done(done, inputs, c, fit)]
        if not todo:
            continue
        frame = replay_study_in_processes(inputs.windows, inputs.traces, inputs.profiles, todo, progress, workers, fit)
        keys = list(zip(frame["device"], frame["config"], frame["window_id"], frame["cost_fit"], strict=False))
        fresh = frame[[key not in done for key in keys]]
        results.append_frame(fresh)
        added += len(fresh)
    results.finish(now())
    return added


def _all_done(done: set, inputs: Inputs, config: MethodConfig, fit: str) -> bool:
    return all((p.name, config.label, w.window_id, fit) in done for p in inputs.profiles for w in inputs.windows)


def study_size(inputs: Inputs, configs: Sequence[MethodConfig], sensitivity: bool) -> int:
    fits = (CostFit.MEDIAN,) + (SENSITIVITY_FITS if sensitivity else ())
    return len(inputs.windows) * len(inputs.profiles) * sum(len(fit_configs(configs, fit)) for fit in fits)


@dataclass(frozen=True)
class BudgetRequest:
    """`select-budget`'s options, as given."""

    windows: Path
    """WINDOWS: the windows file."""
    traces_dir: Path
    """--traces: the traces of WINDOWS."""
    profile_path: Path
    """--profile: the device's profile."""
    catalog: str
    """--catalog: the AS2D configurations to choose from, as a method spec."""
    split: str
    """--split: dev (test is refused)."""
    out: Path | None
    """--out: the budget file (None: results/budgets/<profile name>.yaml)."""


def select_budget_file(request: BudgetRequest) -> tuple[BudgetChoice, Path]:
    """`specbench select-budget`: the options checked, then `select_and_save_budget`; returns the
    choice and the file it was written to."""
    from specbench.app.options import RESULTS, check_output_path, configs_from
    from specbench.app.progress import stderr

    if request.split == "test":
        raise SpecbenchError("--split test: budget selection uses development windows only (a budget chosen on "
                             "test windows would flatter the results)",
                             hint="select on the dev windows, "
                                  "then deploy with `specbench run --budget FILE --split test`")
    out = request.out
    if out is None:
        out = RESULTS / "budgets" / f"{request.profile_path.stem}.yaml"
        out.parent.mkdir(parents=True, exist_ok=True)
    check_output_path(out)
    configs = configs_from(None, (request.catalog,), None)
    as2d = [c for c in configs if isinstance(c, As2dConfig)]
    if len(as2d) < len(configs):
        raise SpecbenchError(f"--catalog '{request.catalog}': only as2d configurations can be selected")
    choice = select_and_save_budget(request.windows, request.traces_dir, request.profile_path, as2d, out,
                                    lambda message: stderr.print(message, highlight=False, markup=False))
    return choice, out


def select_and_save_budget(windows_path: Path, traces_dir: Path, profile_path: Path, catalog: Sequence[As2dConfig],
                          out: Path, log: Callable[[str], None]) -> BudgetChoice:
    """`specbench select-budget`: replay the AS2D `catalog` on the dev windows traced in
    `traces_dir` (the test windows there are left out, and `log` says how many of each),
    choose the best pooled throughput (ties: the smaller budget) and save the choice with its
    provenance to `out`. A catalog that names no drafter is tried with every traced drafter."""
    inputs, left_out = dev_inputs(windows_path, traces_dir, profile_path)
    log(f"using {len(inputs.windows)} dev windows" + (f", leaving out {left_out} test windows" if left_out else ""))
    configs = list(catalog)
    if all(c.drafter is None for c in configs) and len(inputs.traces) > 1:
        configs = [replace(c, drafter=name) for name in sorted(inputs.traces) for c in configs]
    check_costs(inputs, configs)
    choice = choose_budget(replay_study_in_processes(inputs.windows, inputs.traces, inputs.profiles, configs), configs)
    save_budget(out, choice, {"windows": {"path": str(windows_path), "digest": windows_digest(inputs.windows)},
                              "profile": {"path": str(profile_path), "sha256": file_sha256(profile_path)},
                              "catalog": [c.label for c in configs]})
    return choice
