"""`specbench profile`: measure a device's forward costs into a profile YAML."""

from __future__ import annotations

from pathlib import Path

import click

from specbench.app.options import MAX_OVERHEADS_WINDOWS, MAX_PRECISION_REPETITIONS, MIN_REPETITIONS
from specbench.app.profile import ProfileRequest
from specbench.cli.devices import phone_options, phone_settings

REQUEST = ProfileRequest
"""Where the options' defaults live: the request's field defaults, written once."""


@click.command()
@click.argument("device_specs", nargs=-1, metavar="[DEVICE]...")
@click.option("--target", "target_path", type=click.Path(path_type=Path), default=None,
              help="Target model (.gguf, or a Whisper model in whisper.cpp's format). Default: the demo target "
                   "(smollm2-135m-f16), fetched and derived once.")
@click.option("--drafter", "drafter_specs", multiple=True, metavar="NAME=PATH",
              help="A drafter model to profile, named as in traces, or pld (prompt lookup: its measured cost). "
                   "Repeatable. Default: the demo drafters.")
@click.option("--max-width", type=click.IntRange(1, 64), default=REQUEST.max_width, show_default=True,
              help="Target widths 1..W (AS2D budget B needs W >= B+1; SD width W needs W).")
@click.option("--drafter-max-width", type=click.IntRange(1, 64), default=None,
              help="Drafter widths 1..n (default: --max-width; SpecASR's ingest needs up to k_max).")
@click.option("--depths", default=REQUEST.depths, show_default=True, help="KV depths to measure at (comma-separated).")
@click.option("--precision", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=REQUEST.precision,
              show_default=True,
              help="Time each cell until the half-width of its median's ~95% confidence interval is within this "
                   "fraction of the median (0.02 = 2%), between --min-repetitions and --max-repetitions "
                   "(docs/METHODS.md §4.2 Forward costs: CT, CD and the all-rows table).")
@click.option("--min-repetitions", type=click.IntRange(MIN_REPETITIONS), default=REQUEST.min_repetitions,
              show_default=True,
              help="Timed forwards every cell takes (a co-scheduling cell: target forwards alone and together).")
@click.option("--max-repetitions", type=click.IntRange(MIN_REPETITIONS, MAX_PRECISION_REPETITIONS),
              default=REQUEST.max_repetitions, show_default=True,
              help="Most timed forwards a cell takes chasing --precision; a cell that stops here short of it is "
                   "warned about.")
@click.option("--repetitions", type=click.IntRange(MIN_REPETITIONS), default=None,
              help="A fixed count of timed forwards per cell instead of --precision.")
@click.option("--placement", "placement_spec", default=REQUEST.placement, show_default=True,
              metavar="split|shared|SPEC",
              help="Where each lane runs while measuring (every table is measured there): split = target and "
                   "drafter on disjoint halves of the CPUs, shared = both on all of them, or "
                   "'target=PROC@CPUS[/THREADS],drafter=PROC@CPUS[/THREADS]' (e.g. target=GPUOpenCL@4-7/1,"
                   "drafter=cpu@0-3). One profile per placement.")
@click.option("--no-cosched", is_flag=True,
              help="Skip the co-scheduling measurement (AS2D replay then refuses the profile).")
@click.option("--overheads-windows", type=click.IntRange(1, MAX_OVERHEADS_WINDOWS), default=REQUEST.overheads_windows,
              show_default=True,
              help="Copies of the 48-token window each drafter's overheads decodes take, each decoded twice by "
                   "target-only, by AS2D and by SD (AS2D's overheads and the target's ratio beside the producer are "
                   "their medians, each model's decode ratio their serial decodes' pooled; fewer: a quicker, noisier "
                   "profile).")
@click.option("--windows", "windows_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The workload's windows (a windows file, as `specbench windows` writes): each drafter's overheads "
                   "decodes run on as many of them, spread over the file, as hold --overheads-windows copies of "
                   "the passage of prose (text models: its tokens) or of the bundled speech sample (Whisper "
                   "models: its seconds of speech) instead of those copies (the target's ratio beside the "
                   "producer moves with the windows decoded: pass the windows you will replay).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Profile YAML to write (raw samples go beside it, *.samples.jsonl). Default: "
                   "device_profiles/<device>-<placement>.yaml; with several devices, <stem>-<device>.yaml each.")
@phone_options
def profile(device_specs: tuple[str, ...], target_path: Path | None, drafter_specs: tuple[str, ...], max_width: int,
            drafter_max_width: int | None, depths: str, precision: float, min_repetitions: int,
            max_repetitions: int, repetitions: int | None, placement_spec: str, no_cosched: bool,
            overheads_windows: int, windows_path: Path | None, out: Path | None) -> None:
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
    from specbench.app.profile import profile as profile_request

    profile_request(ProfileRequest(
        device_specs=device_specs, target=target_path, drafter_specs=drafter_specs, max_width=max_width,
        drafter_max_width=drafter_max_width, depths=depths, precision=precision, min_repetitions=min_repetitions,
        max_repetitions=max_repetitions, repetitions=repetitions, placement=placement_spec, no_cosched=no_cosched,
        overheads_windows=overheads_windows, windows=windows_path, out=out, phone=phone_settings()))
