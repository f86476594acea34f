"""`specbench run`: replay methods on windows with device profiles."""

from __future__ import annotations

from pathlib import Path

import click

from specbench.cli.common import (
    DEFAULT_METHODS,
    RESULTS,
    check_results_dir,
    configs_from,
    existing_dir,
    existing_file,
    method_options,
)
from specbench.cli.run_native import NativeOptions, native_options, refuse_native_only, run_native_command
from specbench.errors import SpecbenchError


@click.command()
@click.argument("windows", type=existing_file)
@click.option("--traces", "traces_dir", type=existing_dir, default=None,
              help="Traces directory (specbench trace); with --native, the reference outputs.")
@click.option("--profile", "profile_paths", type=existing_file, multiple=True,
              help="Device profile YAML; repeat for several devices (replay).")
@method_options
@click.option("--drafter", "drafter_specs", multiple=True, metavar="NAME|NAME=PATH",
              help="Replay: the drafter of methods that do not name one (default: the only one traced). "
                   "--native: NAME=PATH (or pld), repeatable: each method runs with the drafter it names "
                   "(drafter=NAME; one naming none takes the only --drafter).")
@click.option("--budget", "budget_path", type=existing_file, default=None,
              help="Budget YAML from select-budget: replaces the default as2d configuration.")
@click.option("--split", type=click.Choice(["dev", "test"]), default=None, help="Only windows of this split.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Results directory (default: results/<profile names>, or results/native-<device> with --native).")
@click.option("--resume", is_flag=True, help="Continue an interrupted run in --out (skips finished windows).")
@click.option("--sensitivity", is_flag=True,
              help="Also replay AS2D with the min and max measured co-scheduling ratios for unmeasured widths, "
                   "and every method with costs beyond the measured KV depths extended linearly (depth-linear).")
@click.option("--workers", type=click.IntRange(1), default=None, help="Processes for replay (default: one per CPU).")
@native_options
def run(windows: Path, traces_dir: Path | None, profile_paths: tuple[Path, ...], method_names: str | None,
        method_specs: tuple[str, ...], drafter_specs: tuple[str, ...], budget_path: Path | None, split: str | None,
        out: Path | None,
        resume: bool, sensitivity: bool, workers: int | None, native: NativeOptions) -> None:
    """Replay decoding methods on WINDOWS with device profiles, or run them with --native.

    Every method decodes the same windows; serial methods are priced op by op from the
    profile, AS2D is simulated as two lanes sharing the device. With --native the methods
    run for real on --device (outputs checked against --traces or target-only). Rows are
    appended to OUT/rows.jsonl as windows finish, so an interrupted run resumes with --resume.

    Example:

        specbench run windows.jsonl --traces traces/ --profile device_profiles/pixel8.yaml
        --methods target,sd,specasr --method 'as2d:B=1..15' --out results/pixel8

        specbench run windows.jsonl --device local --native --target models/target.gguf
        --drafter small=models/draft.gguf --methods target,sd --runs 5 --warmup 1 --out results/local-native

        specbench run windows.jsonl --device local --native --target models/target.gguf --traces traces/
        --drafter small=models/draft.gguf --drafter other=models/other.gguf --template other=gemma
        --method 'sd:W=5,drafter=small' --method 'as2d:B=3,drafter=other' --out results/two-drafters
    """
    from specbench.app.progress import progress_bar, stderr
    from specbench.app.study import check_budget_device, load_inputs, run_replay, study_size
    from specbench.schemas.budgets import load_budget

    if out is None:
        out = default_results_dir(native.native, native.device, profile_paths)
    check_results_dir(out)
    if native.asked:
        run_native_command(windows, traces_dir, profile_paths, method_names, method_specs, drafter_specs,
                           budget_path, split, out, resume, sensitivity, native)
        return
    refuse_native_only(native)
    if len(drafter_specs) > 1:
        raise SpecbenchError(f"--drafter given {len(drafter_specs)} times ({', '.join(drafter_specs)}): replay takes "
                             "one, the drafter of methods that name none",
                             hint="name each method's drafter in its spec, e.g. --method 'sd:W=5,drafter=small'")
    drafter = drafter_specs[0] if drafter_specs else None
    if traces_dir is None or not profile_paths:
        raise SpecbenchError("replay needs --traces and --profile (or pass --native to run on a device)")
    default = DEFAULT_METHODS
    if budget_path is not None:  # the budget file's configuration replaces the default as2d
        device, budget_config = load_budget(budget_path)
        default = tuple(m for m in DEFAULT_METHODS if m != "as2d")
        if method_names is not None:
            method_names = ",".join(n for n in method_names.split(",") if n.strip() != "as2d")
        stderr.print(f"as2d from {budget_path} (selected for {device}): {budget_config.label}")
    configs = configs_from(method_names, method_specs, drafter, lambda: default)
    if budget_path is not None and budget_config not in configs:
        configs.append(budget_config)
    inputs = load_inputs(windows, traces_dir, profile_paths, split)
    if budget_path is not None:
        check_budget_device(budget_path, device, inputs.profiles)
    total = study_size(inputs, configs, sensitivity)
    with progress_bar("replaying", total) as advance:
        results, added = run_replay(inputs, configs, list(profile_paths), out, resume, sensitivity, advance, workers)
    stderr.print(f"{added} rows written to {results.rows_path}")


def default_results_dir(native: bool, device: str | None, profile_paths: tuple[Path, ...]) -> Path:
    """results/ is the output root: a run is named after its profiles (replay) or its device."""
    from specbench.schemas.fileio import safe_name

    if native or device is not None:
        return RESULTS / f"native-{safe_name(device or 'device')}"
    return RESULTS / ("+".join(safe_name(p.stem) for p in profile_paths) or "replay")

