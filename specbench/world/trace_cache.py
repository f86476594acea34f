"""Traces are decisions, so they are cached: a finished trace is reused when its key matches.

A trace depends only on the runner build, the two model files, their chat templates, the
windows, k_max and the SpecASR configurations whose queries it records (docs/METHODS.md
§3 Traces); the trace header records all of them (`TraceKey`, `target`, `drafter`,
`templates`). `specbench trace` and `specbench demo` look for a finished trace of the same
key, first at the output path itself, then in the content-addressed cache
`traces/<key sha256>/<drafter>.jsonl` under the specbench cache (world/dirs.py), and copy
or keep it instead of running the models again.

Shards: `--shard K/N` traces the windows i with i % N == K - 1 (file order), so N shards
partition the windows with no overlap and no gap, and a merge in file order is the
single-process trace.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from specbench.errors import SpecbenchError
from specbench.schemas.traces import ModelRef, Shard, TraceFile, TraceKey, load_trace_file, windows_digest
from specbench.schemas.windows import Window

REUSED = "same runner, models, templates, windows, k_max"
"""What a reused trace shares with the run that reuses it (the message's tail)."""


def parse_shard(spec: str) -> Shard:
    """`K/N` as the `--shard` flag takes it: the K-th (1..N) of N shards."""
    index, slash, count = spec.partition("/")
    try:
        shard = Shard(int(index), int(count)) if slash else None
    except ValueError:
        shard = None
    if shard is None or shard.count < 1:
        raise SpecbenchError(f"--shard {spec}: expected K/N, two integers with 1 <= K <= N (the K-th of N shards)")
    if not 1 <= shard.index <= shard.count:
        raise SpecbenchError(f"--shard {spec}: shard {shard.index} is outside 1..{shard.count}")
    return shard


def shard_windows(windows: Sequence[Window], shard: Shard | None) -> list[Window]:
    """The windows of `shard` (all of them for None), in file order."""
    if shard is None:
        return list(windows)
    return [w for i, w in enumerate(windows) if i % shard.count == shard.index - 1]


def trace_key(runner_sha256: str, windows: Sequence[Window], k_max: int, specasr_labels: Sequence[str],
              threads: int | None = None) -> TraceKey:
    return TraceKey(runner_sha256, windows_digest(windows), len(windows), k_max, tuple(sorted(set(specasr_labels))),
                    threads)


def cache_path(cache: Path, key: TraceKey, shard: Shard | None, target: ModelRef, drafter: ModelRef,
               templates: Mapping[str, str]) -> Path:
    """Where the trace of this key lives in the content-addressed cache."""
    key_doc = {k: v for k, v in vars(key).items() if v is not None} | {"specasr": list(key.specasr)}
    doc = {"key": key_doc, "target": target.sha256, "drafter": drafter.sha256,
           "templates": dict(templates), "shard": None if shard is None else vars(shard)}
    digest = hashlib.sha256(json.dumps(doc, sort_keys=True).encode("utf-8")).hexdigest()
    return Path(cache) / digest / f"{drafter.name}.jsonl"


def matches(path: Path, key: TraceKey, shard: Shard | None, target: ModelRef, drafter: ModelRef,
            templates: Mapping[str, str], windows: Sequence[Window]) -> bool:
    """`path` is a finished trace of exactly this key, models, templates, shard and windows."""
    if not path.is_file():
        return False
    try:
        found: TraceFile = load_trace_file(path)
    except SpecbenchError:
        return False  # an older format or a damaged file is traced again, not reused
    return (found.key == key and found.shard == shard and found.target == target and found.drafter == drafter
            and found.templates == dict(templates)
            and [(t.window_id, t.window_sha256) for t in found.windows.values()]
            == [(w.window_id, w.window_sha256) for w in windows])


def reusable(out: Path, cache: Path, key: TraceKey, shard: Shard | None, target: ModelRef, drafter: ModelRef,
             templates: Mapping[str, str], windows: Sequence[Window]) -> Path | None:
    """The finished trace to reuse for `out` (which is then in place), or None: `out` itself
    when it matches, else a matching cache entry copied to `out` (when `out` does not exist)."""
    if matches(out, key, shard, target, drafter, templates, windows):
        return out
    cached = cache_path(cache, key, shard, target, drafter, templates)
    if out.exists() or not matches(cached, key, shard, target, drafter, templates, windows):
        return None
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_suffix(".jsonl.part")
    shutil.copyfile(cached, partial)
    partial.replace(out)
    return cached


def store(path: Path, cache: Path, key: TraceKey, shard: Shard | None, target: ModelRef, drafter: ModelRef,
          templates: Mapping[str, str]) -> Path:
    """Keep a copy of the finished trace `path` in the cache under its key."""
    cached = cache_path(cache, key, shard, target, drafter, templates)
    cached.parent.mkdir(parents=True, exist_ok=True)
    partial = cached.with_suffix(".jsonl.part")
    shutil.copyfile(path, partial)
    partial.replace(cached)
    return cached
