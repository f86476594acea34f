"""The --native half of `specbench run`: options and wiring to specbench.app.native."""

from __future__ import annotations

from pathlib import Path

import click

from specbench.cli.common import TEMPLATE_HELP, configs_from
from specbench.cli.devices import device_names, phone_options, phone_settings
from specbench.errors import SpecbenchError


def native_options(func):
    func = click.option("--placement", "placement_spec", default=None, metavar="split|shared|SPEC",
                        help="--native: where each lane runs (see `specbench profile --help`); default: the "
                             "placement of --profile, else shared. A --profile of another placement is refused.")(func)
    func = click.option("--target", "target_path", type=click.Path(path_type=Path), default=None,
                        help="--native: the target model (.gguf).")(func)
    func = click.option("--device", default=None,
                        help="--native: where to run: local (this host) or phone serials, comma-separated "
                             "(several: in parallel, results in OUT/<serial>/).")(func)
    func = click.option("--native", is_flag=True,
                        help="Run the methods for real on --device instead of replaying them "
                             "(--drafter then takes NAME=PATH, or pld: prompt lookup, no model).")(func)
    func = click.option("--drafter-mmproj", type=click.Path(path_type=Path), default=None, expose_value=False,
                        callback=_keep("drafter_mmproj"),
                        help="--native: the drafter's audio projector (.gguf), for audio windows.")(func)
    func = click.option("--target-mmproj", type=click.Path(path_type=Path), default=None, expose_value=False,
                        callback=_keep("target_mmproj"),
                        help="--native: the target's audio projector (.gguf), for audio windows.")(func)
    func = click.option("--template", "template_specs", multiple=True, metavar="NAME=TEMPLATE", expose_value=False,
                        callback=_keep("templates"), help="--native: " + TEMPLATE_HELP)(func)
    func = click.option("--warmup", "warmup_text", default=None, metavar="M", expose_value=False,
                        callback=_keep("warmup"),
                        help="--native: untimed decodes of every configuration (on the first window to do) before "
                             "the timed ones, once per device run (default 0).")(func)
    func = click.option("--runs", "runs_text", default=None, metavar="N", expose_value=False, callback=_keep("runs"),
                        help="--native: timed decodes of every (window, configuration) (default 1); every sample "
                             "is kept in the row (samples_s), the row is the median one.")(func)
    return phone_options(func)


REPEAT_FLAGS = (("--runs", "runs", 1), ("--warmup", "warmup", 0))
"""(flag, ctx.meta key, default): the repeat counts of a native run."""


def repeat_counts(meta: dict) -> tuple[int, int]:
    """(--runs, --warmup) as integers, range-checked (check_repeats), naming the flag."""
    from specbench.world.native_run import check_repeats

    counts = []
    for flag, key, default in REPEAT_FLAGS:
        text = meta.get(f"specbench.{key}")
        try:
            counts.append(default if text is None else int(text))
        except ValueError:
            raise SpecbenchError(f"{flag} {text}: expected an integer") from None
    check_repeats(*counts)
    return counts[0], counts[1]


def replay_refuses_repeats(meta: dict) -> None:
    """Replay prices each window once from the profile: --runs/--warmup are for --native."""
    for flag, key, _ in REPEAT_FLAGS:
        if meta.get(f"specbench.{key}") is not None:
            raise SpecbenchError(f"{flag} is for --native runs (replay prices each window once from the profile)")


def _keep(key: str):
    """Stores an option in ctx.meta (audio projectors, templates; `run`'s signature stays as it is)."""
    def callback(ctx: click.Context, _param, value):
        ctx.meta[f"specbench.{key}"] = value
        return value
    return callback


def run_native_command(windows_path: Path, traces_dir: Path | None, profile_paths: tuple[Path, ...],
                       method_names: str | None, method_specs: tuple[str, ...], drafter_spec: str | None,
                       budget_path: Path | None, split: str | None, out: Path, resume: bool, sensitivity: bool,
                       native: bool, device: str | None, target_path: Path | None, placement_spec: str | None) -> None:
    from specbench.app.devices import open_devices
    from specbench.app.native import common_methods, native_plans, run_plans
    from specbench.schemas.windows import load_split
    from specbench.world.model_files import parse_named, target_file, with_mmproj, with_templates

    if not native:
        raise SpecbenchError("--device and --target are for native runs: add --native")
    for flag, given in (("--budget", budget_path is not None), ("--sensitivity", sensitivity)):
        if given:
            raise SpecbenchError(f"{flag} is for replay; a --native run measures on the device itself")
    if len(profile_paths) > 1:
        raise SpecbenchError("--native takes one --profile (the placement to run in)")
    if target_path is None:
        raise SpecbenchError("--native needs --target PATH (the target model file)")
    meta = click.get_current_context().meta
    runs, warmup = repeat_counts(meta)  # before any device is opened
    devices = open_devices(device_names([device or "local"]), phone_settings())
    windows = load_split(windows_path, split)
    target = with_mmproj(target_file(target_path), meta.get("specbench.target_mmproj"), "--target-mmproj")
    drafter = parse_named(drafter_spec) if drafter_spec else None
    if drafter is not None:
        drafter = with_mmproj(drafter, meta.get("specbench.drafter_mmproj"), "--drafter-mmproj")
    target, drafters = with_templates(target, [drafter] if drafter else [], meta.get("specbench.templates", ()))
    drafter = drafters[0] if drafters else None
    configs = configs_from(method_names, method_specs, drafter.name if drafter else None,
                           lambda: common_methods(devices))
    plans = native_plans(devices, windows, windows_path, target, drafter, configs, traces_dir,
                         profile_paths[0] if profile_paths else None, placement_spec, runs, warmup)
    run_plans(plans, out, resume)
