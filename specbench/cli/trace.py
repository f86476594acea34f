"""`specbench trace`: record what the real models decide on each window."""

from __future__ import annotations

from pathlib import Path

import click

from specbench.cli.common import TEMPLATE_HELP, existing_file
from specbench.cli.devices import runner_option


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
    from specbench.app.trace import TraceRequest
    from specbench.app.trace import trace as trace_request

    trace_request(TraceRequest(
        windows=windows, target=target_path, drafter_specs=drafter_specs, target_mmproj=target_mmproj,
        drafter_mmproj=drafter_mmproj_specs, templates=template_specs, k_max=k_max, specasr_specs=specasr_specs,
        split=split, threads=threads, device=device, out=out, resume=resume, no_cache=no_cache, shard=shard_spec,
        ray_address=ray_address, workers=workers))
