"""`specbench run`: one request (app/run_request.py), replayed with device profiles (app/study.py) or
run on devices (app/device_runs.py)."""

from __future__ import annotations

from pathlib import Path

from specbench.app.run_request import NativeOptions, RunRequest
from specbench.errors import SpecbenchError


def run(request: RunRequest) -> None:
    """Replay `request` (app/study.py), or run it on its devices when a native run was asked (app/device_runs.py);
    the output directory is refused before any work when it cannot be written."""
    from specbench.app.options import check_results_dir

    out = request.out
    if out is None:
        out = default_results_dir(request.native.native, request.native.device, request.profile_paths)
    check_results_dir(out)
    if request.native.asked:
        from specbench.app.device_runs import run_on_devices

        run_on_devices(request, out)
        return
    from specbench.app.study import replay_run

    refuse_native_only(request.native)
    replay_run(request, out)


def default_results_dir(native: bool, device: str | None, profile_paths: tuple[Path, ...]) -> Path:
    """results/ is the output root: a run is named after its profiles (replay) or its device."""
    from specbench.app.options import RESULTS
    from specbench.schemas.fileio import safe_name

    if native or device is not None:
        return RESULTS / f"native-{safe_name(device or 'device')}"
    return RESULTS / ("+".join(safe_name(p.stem) for p in profile_paths) or "replay")


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
