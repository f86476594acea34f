"""`specbench trace`: what the real models decide on each window, traced on one device, one shard
of the windows, or as Ray tasks (app/trace_ray.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from specbench.errors import SpecbenchError

if TYPE_CHECKING:
    from specbench.core.methods.configs import SpecAsrConfig


@dataclass(frozen=True)
class TraceRequest:
    """`trace`'s options, as given."""

    windows: Path
    """WINDOWS: the windows file."""
    target: Path
    """--target: the target model file."""
    drafter_specs: tuple[str, ...]
    """--drafter NAME=PATH (or pld), each time given: one trace file per drafter."""
    target_mmproj: Path | None
    """--target-mmproj: the target's audio projector."""
    drafter_mmproj: tuple[str, ...]
    """--drafter-mmproj [NAME=]PATH, each time given."""
    templates: tuple[str, ...]
    """--template NAME=TEMPLATE, each time given."""
    k_max: int
    """--k-max: drafts per prefix-conditioned row."""
    specasr_specs: tuple[str, ...]
    """--specasr, each time given: SpecASR configurations whose recycling queries are recorded too."""
    split: str | None
    """--split: only windows of this split (None: all)."""
    threads: int | None
    """--threads per model (None: all)."""
    device: str
    """--device: where the models run."""
    out: Path
    """--out: the traces directory."""
    resume: bool
    """--resume: continue interrupted trace files."""
    no_cache: bool
    """--no-cache: trace even when a finished trace of the same key exists."""
    shard: str | None
    """--shard K/N as typed (None: every window)."""
    ray_address: str | None
    """--ray [ADDRESS] ('': a cluster of this host; None: no Ray)."""
    workers: int | None
    """--workers: shards per drafter with --ray (None: the cluster's CPUs / --threads)."""


def trace(request: TraceRequest) -> None:
    """Trace every drafter of `request` on its windows into OUT/<drafter>.jsonl (or OUT/shard-K-of-N/),
    reusing a finished trace of the same key unless --no-cache; stderr says how many windows each traced."""
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

    r = request
    shard = parse_shard(r.shard) if r.shard is not None else None
    if r.ray_address is not None and shard is not None:
        raise SpecbenchError(f"--ray with --shard {r.shard}: --ray makes the shards itself",
                             hint="drop --shard, or run each shard without --ray")
    if r.workers is not None and r.ray_address is None:
        raise SpecbenchError(f"--workers {r.workers} without --ray: only Ray runs several workers")
    out = r.out
    if shard is not None:
        out = out / f"shard-{shard.index}-of-{shard.count}"
    specasr = specasr_configs(r.specasr_specs)
    items = load_split(r.windows, r.split)
    target = with_mmproj(target_file(r.target), r.target_mmproj, "--target-mmproj")
    drafters = drafter_mmproj(unique_names([parse_named(s) for s in r.drafter_specs]), r.drafter_mmproj)
    target, drafters = with_templates(target, drafters, r.templates)
    if r.ray_address is not None:
        from specbench.app.trace_ray import trace_on_ray

        if r.device != "local":
            raise SpecbenchError(f"--ray with --device {r.device}: each Ray worker runs its own host's runner",
                                 hint="drop --device")
        trace_on_ray(r.ray_address or None, items, target, drafters, out, r.k_max, r.threads, specasr, r.workers,
                     stderr.print)
        return
    dev = open_device(r.device)
    mine = len(shard_windows(items, shard))
    for drafter in drafters:
        with progress_bar(f"tracing {drafter.name}", mine) as advance:
            path, count = trace_windows(dev, items, target, drafter, out, r.k_max, r.resume, r.threads, advance,
                                        specasr=specasr, cache=None if r.no_cache else cache_dir() / "traces",
                                        shard=shard, say=stderr.print)
        stderr.print(f"{count} windows traced into {path} ({mine - count} already there)")


def specasr_configs(specs: tuple[str, ...]) -> list[SpecAsrConfig]:
    """The SpecASR configurations of --specasr; another method's is refused, naming the spec."""
    from specbench.core.methods.configs import SpecAsrConfig, parse_method_spec, parse_method_specs

    for spec in specs:
        wrong = [c.label for c in parse_method_spec(spec) if not isinstance(c, SpecAsrConfig)]
        if wrong:
            raise SpecbenchError(f"--specasr {spec}: expected specasr configurations, got {wrong[0]}")
    return [c for c in parse_method_specs(list(specs)) if isinstance(c, SpecAsrConfig)]  # all of them, checked above
