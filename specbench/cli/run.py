"""`specbench run`: replay methods on windows with device profiles."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from specbench.cli.common import existing_dir, existing_file, method_options
from specbench.cli.device_run_options import native_options
from specbench.cli.devices import phone_settings

if TYPE_CHECKING:
    from specbench.app.run_request import NativeOptions


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
@click.option("--workers", type=click.IntRange(1), default=None,
              help="Processes for replay (default: one per CPU, or this one alone for a study of under about 2 s).")
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
    from specbench.app.run import run as run_request
    from specbench.app.run_request import RunRequest

    run_request(RunRequest(
        windows=windows, traces_dir=traces_dir, profile_paths=profile_paths, method_names=method_names,
        method_specs=method_specs, drafter_specs=drafter_specs, budget_path=budget_path, split=split, out=out,
        resume=resume, sensitivity=sensitivity, workers=workers, native=native, phone=phone_settings()))
