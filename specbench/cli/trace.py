"""`specbench trace`: record what the real models decide on each window."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from specbench.cli.common import TEMPLATE_HELP, existing_file
from specbench.cli.devices import runner_option
from specbench.errors import SpecbenchError

if TYPE_CHECKING:
    from specbench.core.methods.configs import SpecAsrConfig


@click.command()
@click.argument("windows", type=existing_file)
@click.option("--target", "target_path", type=click.Path(path_type=Path), required=True,
              help="Target model (.gguf, or a Whisper model in whisper.cpp's format).")
@click.option("--drafter", "drafter_specs", multiple=True, required=True, metavar="NAME=PATH",
              help="Drafter model, named (traces/NAME.jsonl), or pld (prompt lookup, no model). Repeatable: one "
                   "trace file per drafter.")
@click.option("--target-mmproj", type=click.Path(path_type=Path), default=None,
              help="The target's audio projector (.gguf) for audio windows (Qwen3-ASR's mmproj).")
@click.option("--drafter-mmproj", "drafter_mmproj_specs", multiple=True, metavar="[NAME=]PATH",
              help="A drafter's audio projector for audio windows (NAME=PATH per drafter, or PATH for one).")
@click.option("--template", "template_specs", multiple=True, metavar="NAME=TEMPLATE", help=TEMPLATE_HELP)
@click.option("--k-max", type=click.IntRange(1, 64), default=16, show_default=True,
              help="Drafts per prefix-conditioned row (SD replay up to W = k_max + 1).")
@click.option("--specasr", "specasr_specs", multiple=True, metavar="SPEC",
              help="Also record the recycling queries of these SpecASR configurations, e.g. "
                   "'specasr:k_max=8,tau=0.5' or 'specasr:k_max=6|8,tau=0.3|0.5' (repeatable). "
                   "Replay of a SpecASR configuration needs them.")
@click.option("--split", type=click.Choice(["dev", "test"]), default=None, help="Only windows of this split.")
@click.option("--threads", type=click.IntRange(1), default=None, help="Threads per model (default: all).")
@click.option("--device", default="local", show_default=True, help="Where the models run.")
@runner_option
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("traces"), show_default=True,
              help="Traces directory.")
@click.option("--resume", is_flag=True, help="Continue interrupted trace files (skips windows already traced).")
@click.option("--no-cache", is_flag=True,
              help="Trace even when a finished trace of the same runner, models, templates, windows and k_max exists "
                   "(in OUT or the specbench cache).")
@click.option("--shard", "shard_spec", default=None, metavar="K/N",
              help="Trace only the K-th of N deterministic window shards, into OUT/shard-K-of-N/ (merge the N "
                   "directories with `specbench merge-traces`).")
@click.option("--ray", "ray_address", is_flag=False, flag_value="", default=None, metavar="[ADDRESS]",
              help="Run the shards as Ray tasks, one runner per worker, on the cluster at ADDRESS (alone: a cluster "
                   "of this host), then merge them into OUT; resumable like a local trace. OUT and the models must "
                   "be at the same paths on every node. Needs the 'ray' extra.")
@click.option("--workers", type=click.IntRange(1), default=None,
              help="With --ray: how many shards (Ray tasks) per drafter (default: the cluster's CPUs / --threads).")
def trace(windows: Path, target_path: Path, drafter_specs: tuple[str, ...], target_mmproj: Path | None,
          drafter_mmproj_specs: tuple[str, ...], template_specs: tuple[str, ...], k_max: int,
          specasr_specs: tuple[str, ...], split: str | None, threads: int | None, device: str, out: Path,
          resume: bool, no_cache: bool, shard_spec: str | None, ray_address: str | None,
          workers: int | None) -> None:
    """Trace WINDOWS: the target's greedy output, the drafter's prefix-conditioned drafts
    and its producer stream, per window, for replay.

    Each window is appended to OUT/<drafter>.jsonl when done; an interrupted trace
    continues with --resume. A finished trace of the same runner, models, chat templates,
    windows and k_max (in OUT, or in the specbench cache) is reused instead (--no-cache:
    trace again).

    Example:

        specbench trace windows.jsonl --target models/target.gguf --drafter small=models/draft.gguf
        --k-max 16 --specasr 'specasr:k_max=8,tau=0.3|0.5' --out traces/

        specbench trace windows.jsonl --target smollm2.gguf --drafter gemma3=gemma-3-270m.gguf
        --template gemma3=gemma --out traces/

        specbench trace windows.jsonl --target smollm2.gguf --drafter pld --out traces/

        specbench trace windows.jsonl --target t.gguf --drafter small=d.gguf --shard 3/8 --out parts/

        specbench trace windows.jsonl --target t.gguf --drafter small=d.gguf --ray 10.0.0.5:6379 --out traces/
    """
    from specbench.app.progress import progress_bar, stderr
    from specbench.schemas.windows import load_split
    from specbench.world.devices.base import open_device
    from specbench.world.dirs import cache_dir
    from specbench.world.model_files import (
        drafter_mmproj,
        parse_named,
        target_file,
        unique_names,
        with_mmproj,
        with_templates,
    )
    from specbench.world.trace_cache import parse_shard, shard_windows
    from specbench.world.tracing import trace_windows

    shard = parse_shard(shard_spec) if shard_spec is not None else None
    if ray_address is not None and shard is not None:
        raise SpecbenchError(f"--ray with --shard {shard_spec}: --ray makes the shards itself",
                             hint="drop --shard, or run each shard without --ray")
    if workers is not None and ray_address is None:
        raise SpecbenchError(f"--workers {workers} without --ray: only Ray runs several workers")
    if shard is not None:
        out = out / f"shard-{shard.index}-of-{shard.count}"
    specasr = specasr_configs(specasr_specs)
    items = load_split(windows, split)
    target = with_mmproj(target_file(target_path), target_mmproj, "--target-mmproj")
    drafters = drafter_mmproj(unique_names([parse_named(s) for s in drafter_specs]), drafter_mmproj_specs)
    target, drafters = with_templates(target, drafters, template_specs)
    if ray_address is not None:
        from specbench.app.trace_ray import trace_on_ray

        if device != "local":
            raise SpecbenchError(f"--ray with --device {device}: each Ray worker runs its own host's runner",
                                 hint="drop --device")
        trace_on_ray(ray_address or None, items, target, drafters, out, k_max, threads, specasr, workers,
                     stderr.print)
        return
    dev = open_device(device)
    mine = len(shard_windows(items, shard))
    for drafter in drafters:
        with progress_bar(f"tracing {drafter.name}", mine) as advance:
            path, count = trace_windows(dev, items, target, drafter, out, k_max, resume, threads, advance,
                                         specasr=specasr, cache=None if no_cache else cache_dir() / "traces",
                                         shard=shard, say=stderr.print)
        stderr.print(f"{count} windows traced into {path} ({mine - count} already there)")


def specasr_configs(specs: tuple[str, ...]) -> list[SpecAsrConfig]:
    from specbench.core.methods.configs import SpecAsrConfig, parse_method_spec, parse_method_specs

    for spec in specs:
        wrong = [c.label for c in parse_method_spec(spec) if not isinstance(c, SpecAsrConfig)]
        if wrong:
            raise SpecbenchError(f"--specasr {spec}: expected specasr configurations, got {wrong[0]}")
    return [c for c in parse_method_specs(list(specs)) if isinstance(c, SpecAsrConfig)]  # all of them, checked above
