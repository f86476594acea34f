"""`specbench trace --ray [ADDRESS]`: the shards of a trace as Ray tasks, then merged.

Each of N shards (`--shard K/N`'s windows) is one Ray task that runs one runner on its
worker (`trace_windows` on that node's local device, the runner found as `specbench trace`
finds it there) and appends to OUT/shard-K-of-N/<drafter>.jsonl with resume, so a rerun
after an interruption keeps every finished window and reuses every finished shard. The
driver then merges the shards into OUT/<drafter>.jsonl (app/trace_shards.py), which is the
single-process trace line for line. OUT and the model files must be at the same paths on
every node (a shared filesystem), as for a Slurm job array (docs/USAGE.md "Cached and
sharded traces").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from specbench.app.trace_shards import merge_shards
from specbench.errors import SpecbenchError
from specbench.extras import require
from specbench.schemas.traces import Shard, load_trace_dir, load_trace_file
from specbench.schemas.windows import Window
from specbench.world.model_files import ModelFile


def shard_dir(out: Path, shard: Shard) -> Path:
    """Where `trace --shard K/N` writes shard K (one directory per shard)."""
    return Path(out) / f"shard-{shard.index}-of-{shard.count}"


def _trace_shard(windows: Sequence[Window], target: ModelFile, drafter: ModelFile, out: Path, k_max: int,
                 threads: int | None, specasr: Sequence, shard: Shard) -> int:
    """One shard on this worker's own runner; returns the windows traced now."""
    from specbench.world.devices.local import LocalDevice
    from specbench.world.tracing import trace_windows

    _, count = trace_windows(LocalDevice(), windows, target, drafter, shard_dir(out, shard), k_max, True, threads,
                             specasr=specasr, shard=shard)
    return count


def trace_on_ray(address: str | None, windows: Sequence[Window], target: ModelFile, drafters: Sequence[ModelFile],
                 out: Path, k_max: int, threads: int | None, specasr: Sequence, workers: int | None,
                 say: Callable[[str], None]) -> list[Path]:
    """Trace every drafter's shards as Ray tasks (one per worker) and merge them into `out`.

    `address`: a running cluster's address, or None for a cluster of this host alone."""
    ray = require("ray", "ray", "trace --ray")
    ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
    cpus_per_task = threads or 1
    if workers is None:
        workers = max(1, int(ray.cluster_resources().get("CPU", 1)) // cpus_per_task)
    count = max(1, min(workers, len(windows)))
    task = ray.remote(num_cpus=cpus_per_task, max_retries=0)(_trace_shard)
    shards = [Shard(k, count) for k in range(1, count + 1)]
    dirs = [shard_dir(out, shard) for shard in shards]
    futures = [task.remote(windows, target, drafter, Path(out), k_max, threads, list(specasr), shard)
               for drafter in drafters for shard in shards]
    try:
        traced = sum(ray.get(futures))
    except ray.exceptions.RayTaskError as exc:
        cause = exc.as_instanceof_cause()
        if isinstance(cause, SpecbenchError):
            raise SpecbenchError(str(cause.args[0]) if cause.args else str(cause)) from None
        raise
    total = len(windows) * len(drafters)
    say(f"{traced} windows traced by {len(futures)} Ray tasks into {Path(out)}/shard-*-of-{count} "
        f"({total - traced} already there)")
    merged = [Path(out) / f"{drafter.name}.jsonl" for drafter in drafters]
    keys = load_trace_dir(dirs[0])
    if all(path.exists() and load_trace_file(path).key == keys[path.stem].key for path in merged):
        for path in merged:
            say(f"reusing {path}: merged from shards of the same key")
        return merged
    return merge_shards(dirs, Path(out))
