"""Merge the shard directories of a sharded trace (`specbench trace --shard K/N`) into one traces directory.

The shards must belong to one study: every file of a drafter has the same key, models and
templates (world/trace_cache.py), each shard 1..N is there once, no window is in two
shards, and together they hold every window the key names (their ids and content hashes,
put back in file order, hash to the key's windows digest). A refusal is one line naming
the directory or file and the problem, and nothing is written. The merged file is the
single-process trace of the same windows: the same lines in the same order, its header
without `shard` and without an environment block (the shards may have run on different
machines; each shard's own file keeps its block).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from specbench.errors import SpecbenchError
from specbench.schemas.fileio import dumps_line, write_atomic
from specbench.schemas.traces import (
    Shard,
    TraceFile,
    TraceKey,
    WindowTrace,
    header_dict,
    load_trace_dir,
    window_trace_to_dict,
    windows_digest,
)

_SAME = (("target", "target model"), ("drafter", "drafter model"), ("templates", "chat templates"))


@dataclass(frozen=True)
class _ShardFile:
    """A trace file checked to be a shard: its key, shard and path are recorded."""

    trace: TraceFile
    key: TraceKey
    shard: Shard
    path: Path


def _as_shard(trace_file: TraceFile, directory: Path) -> _ShardFile:
    if trace_file.shard is None or trace_file.key is None:
        raise SpecbenchError(f"{trace_file.path or directory}: not a shard (its header records no shard; traced "
                             "without --shard K/N)")
    return _ShardFile(trace_file, trace_file.key, trace_file.shard, trace_file.path or directory)


def _check_one_study(files: Sequence[_ShardFile]) -> list[_ShardFile]:
    """The shards of one drafter, checked, in shard order."""
    first = files[0]
    for one in files[1:]:
        if one.key != first.key:
            raise SpecbenchError(f"{one.path}: another study than {first.path} (key: "
                                 f"{'; '.join(one.key.differences(first.key))})")
        for attribute, what in _SAME:
            if getattr(one.trace, attribute) != getattr(first.trace, attribute):
                raise SpecbenchError(f"{one.path}: another study than {first.path} (the {what} differ)")
        if one.shard.count != first.shard.count:
            raise SpecbenchError(f"{one.path}: shard {one.shard.label} of another split than "
                                 f"{first.path} (shard {first.shard.label})")
    by_index: dict[int, _ShardFile] = {}
    for one in files:
        other = by_index.setdefault(one.shard.index, one)
        if other is not one:
            raise SpecbenchError(f"{one.path}: shard {one.shard.label} is also {other.path}")
    count = first.shard.count
    missing = [i for i in range(1, count + 1) if i not in by_index]
    if missing:
        given = ", ".join(f"{i}/{count}" for i in sorted(by_index))
        raise SpecbenchError(f"{first.path.parent.parent}: drafter {first.trace.drafter.name}: shard "
                             f"{missing[0]}/{count} missing (given: {given})")
    seen: dict[str, Path] = {}
    for one in files:
        for window_id in one.trace.windows:
            holder = seen.setdefault(window_id, one.path)
            if holder != one.path:
                raise SpecbenchError(f"{one.path}: window '{window_id}' is also in {holder} (overlapping shards)")
    return [by_index[i] for i in range(1, count + 1)]


def _in_file_order(shards: Sequence[_ShardFile]) -> list[WindowTrace]:
    """The shards' windows put back in windows-file order (shard K holds windows K-1, K-1+N, ...)."""
    key, count = shards[0].key, len(shards)
    columns = [list(s.trace.windows.values()) for s in shards]
    expected = [len(range(s.shard.index - 1, key.n_windows, count)) for s in shards]
    for shard, column, want in zip(shards, columns, expected, strict=True):
        if len(column) != want:
            raise SpecbenchError(f"{shard.path}: shard {shard.shard.label} holds {len(column)} windows, the key's "
                                 f"{key.n_windows} windows put {want} in it (an unfinished or altered shard)")
    merged = [columns[i % count][i // count] for i in range(key.n_windows)]
    if windows_digest(merged) != key.windows_sha256:
        raise SpecbenchError(f"{shards[0].path.parent.parent}: the shards' windows do not hash to the key's windows "
                             f"digest {key.windows_sha256[:12]} (windows changed or out of order)")
    return merged


def merge_shards(directories: Sequence[Path], out: Path) -> list[Path]:
    """Merge the shard directories into `out` (one file per drafter); returns the files written."""
    if not directories:
        raise SpecbenchError("merge-traces: no shard directories given")
    by_drafter: dict[str, list[_ShardFile]] = {}
    for directory in directories:
        for name, trace_file in load_trace_dir(Path(directory)).items():
            by_drafter.setdefault(name, []).append(_as_shard(trace_file, Path(directory)))
    plans = []
    for name, files in by_drafter.items():
        if len(files) < len(directories):
            have = {f.path.parent for f in files}
            lacking = next(Path(d) for d in directories if Path(d) not in have)
            raise SpecbenchError(f"{lacking}: no trace of drafter {name} (the other shard directories have one)")
        shards = _check_one_study(files)
        target = Path(out) / f"{name}.jsonl"
        if target.exists():
            raise SpecbenchError(f"{target}: trace file already exists", hint="merge into another --out directory")
        plans.append((target, shards, _in_file_order(shards)))
    written = []
    for target, shards, windows in plans:
        first = shards[0].trace
        header = header_dict(first.target, first.drafter, first.templates, key=first.key)
        lines = [dumps_line(header)] + [dumps_line(window_trace_to_dict(w)) for w in windows]
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(target, "".join(lines))
        written.append(target)
    return written

