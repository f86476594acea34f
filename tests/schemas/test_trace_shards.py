"""Trace keys and shards: `--shard K/N` partitions the windows with no overlap and no gap,
`merge-traces` gives back the single-process file and refuses shards that are not one
study (one line each, nothing written), a previous trace version is refused naming both
versions, and a resume under another key is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from bench.synthetic_study import synthetic_study
from specbench.cli import main
from specbench.errors import SpecbenchError
from specbench.schemas import traces
from specbench.schemas.traces import Shard, TraceKey, TraceWriter, load_trace_file, windows_digest
from specbench.world.trace_cache import parse_shard, shard_windows, trace_key

HINT = " (hint: write the file again with this specbench)"


@given(n_windows=st.integers(0, 60), count=st.integers(1, 12))
def test_the_shards_partition_the_windows_with_no_overlap_and_no_gap(n_windows, count):
    windows = list(range(n_windows))
    parts = [shard_windows(windows, Shard(k, count)) for k in range(1, count + 1)]
    assert sorted(i for part in parts for i in part) == windows
    assert all(part == sorted(part) for part in parts)  # each shard in file order
    assert max(map(len, parts)) - min(map(len, parts)) <= 1  # balanced
    assert parts == [shard_windows(windows, Shard(k, count)) for k in range(1, count + 1)]  # deterministic


@pytest.mark.parametrize("spec, message", [
    ("0/4", "--shard 0/4: shard 0 is outside 1..4"),
    ("5/4", "--shard 5/4: shard 5 is outside 1..4"),
    ("1/0", "--shard 1/0: expected K/N, two integers with 1 <= K <= N (the K-th of N shards)"),
    ("two/4", "--shard two/4: expected K/N, two integers with 1 <= K <= N (the K-th of N shards)"),
    ("3", "--shard 3: expected K/N, two integers with 1 <= K <= N (the K-th of N shards)"),
])
def test_a_shard_out_of_range_is_one_line_naming_the_flag(spec, message):
    with pytest.raises(SpecbenchError) as error:
        parse_shard(spec)
    assert str(error.value) == message
    assert parse_shard("3/4") == Shard(3, 4)


def test_the_cli_refuses_a_bad_shard_before_loading_anything(tmp_path):
    windows = tmp_path / "w.jsonl"
    windows.write_text("")
    result = CliRunner().invoke(main, ["trace", str(windows), "--target", "t.gguf", "--drafter", "d=d.gguf",
                                       "--shard", "5/4", "--out", str(tmp_path / "out")])
    assert result.exit_code == 1 and result.output.strip().splitlines() == [
        "Error: --shard 5/4: shard 5 is outside 1..4"]
    assert not (tmp_path / "out").exists()


def _study(n_windows=7):
    study = synthetic_study(n_windows=n_windows, n_devices=1, seed=0)
    name = sorted(study.traces)[0]
    return study.windows, study.traces[name]


def _write(path: Path, trace_file, windows, key: TraceKey, shard: Shard | None) -> Path:
    writer = TraceWriter(path, trace_file.target, trace_file.drafter, {"target": "chatml", "drafter": "chatml"},
                         key=key, shard=shard)
    for window in shard_windows(windows, shard):
        writer.write(trace_file.windows[window.window_id])
    return path


def _shards(tmp_path: Path, count: int, key_of=lambda k, key: key) -> tuple[list[Path], Path, TraceKey]:
    """The study written whole (single.jsonl) and as `count` shard directories."""
    windows, trace_file = _study()
    key = trace_key("r" * 64, windows, 4, [])
    name = f"{trace_file.drafter.name}.jsonl"
    single = _write(tmp_path / "single" / name, trace_file, windows, key, None)
    dirs = [tmp_path / "parts" / f"shard-{k}-of-{count}" for k in range(1, count + 1)]
    for k, directory in enumerate(dirs, 1):
        _write(directory / name, trace_file, windows, key_of(k, key), Shard(k, count))
    return dirs, single, key


def _merge(dirs, out):
    return CliRunner().invoke(main, ["merge-traces", *map(str, dirs), "--out", str(out)])


def test_merged_shards_are_the_single_process_trace(tmp_path):
    dirs, single, key = _shards(tmp_path, 3)
    result = _merge(dirs, tmp_path / "merged")
    assert result.exit_code == 0, result.output
    merged = tmp_path / "merged" / single.name
    assert merged.read_text() == single.read_text()
    assert load_trace_file(merged).key == key and load_trace_file(merged).shard is None


def test_shards_of_another_key_are_refused(tmp_path):
    dirs, single, _ = _shards(tmp_path, 3, lambda k, key: TraceKey(key.runner_sha256, key.windows_sha256,
                                                                   key.n_windows, 8 if k == 2 else key.k_max))
    result = _merge(dirs, tmp_path / "merged")
    assert result.exit_code == 1 and result.output.strip().splitlines() == [
        f"Error: {dirs[1] / single.name}: another study than {dirs[0] / single.name} (key: k_max 8 vs 4)"]
    assert not (tmp_path / "merged").exists()


def test_overlapping_shards_are_refused(tmp_path):
    dirs, single, key = _shards(tmp_path, 3)
    windows, trace_file = _study()
    # shard 2's file also holds a window of shard 1
    path = dirs[1] / single.name
    path.unlink()
    writer = TraceWriter(path, trace_file.target, trace_file.drafter, {"target": "chatml", "drafter": "chatml"},
                         key=key, shard=Shard(2, 3))
    for window in [windows[0], *shard_windows(windows, Shard(2, 3))]:
        writer.write(trace_file.windows[window.window_id])
    result = _merge(dirs, tmp_path / "merged")
    assert result.exit_code == 1 and result.output.strip().splitlines() == [
        f"Error: {path}: window '{windows[0].window_id}' is also in {dirs[0] / single.name} (overlapping shards)"]
    assert not (tmp_path / "merged").exists()


def test_a_missing_shard_is_refused(tmp_path):
    dirs, single, _ = _shards(tmp_path, 4)
    result = _merge([dirs[0], dirs[1], dirs[3]], tmp_path / "merged")
    assert result.exit_code == 1 and result.output.strip().splitlines() == [
        f"Error: {tmp_path / 'parts'}: drafter {single.stem}: shard 3/4 missing (given: 1/4, 2/4, 4/4)"]
    assert not (tmp_path / "merged").exists()


def test_an_unfinished_shard_is_refused(tmp_path):
    dirs, single, _ = _shards(tmp_path, 2)
    path = dirs[1] / single.name
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:-1]))
    result = _merge(dirs, tmp_path / "merged")
    assert result.exit_code == 1 and result.output.strip().splitlines() == [
        f"Error: {path}: shard 2/2 holds 2 windows, the key's 7 windows put 3 in it (an unfinished or altered shard)"]
    assert not (tmp_path / "merged").exists()


def test_a_trace_of_the_previous_version_is_refused_naming_both_versions(tmp_path):
    windows, trace_file = _study(2)
    path = _write(tmp_path / "t.jsonl", trace_file, windows, trace_key("r" * 64, windows, 4, []), None)
    lines = path.read_text().splitlines(keepends=True)
    header = json.loads(lines[0]) | {"schema_version": traces.VERSION - 1}
    path.write_text(json.dumps(header) + "\n" + "".join(lines[1:]))
    with pytest.raises(SpecbenchError) as error:
        load_trace_file(path)
    assert str(error.value) == (f"{path}: line 1: schema_version {traces.VERSION - 1}, this specbench reads "
                                f"{traces.VERSION}{HINT}")


def test_a_trace_resumes_only_under_its_own_key_and_shard(tmp_path):
    windows, trace_file = _study(4)
    key = trace_key("r" * 64, windows, 4, [])
    path = tmp_path / "t.jsonl"
    writer = TraceWriter(path, trace_file.target, trace_file.drafter, key=key, shard=Shard(1, 2))
    writer.write(trace_file.windows[windows[0].window_id])
    other = TraceKey(key.runner_sha256, key.windows_sha256, key.n_windows, 8)
    with pytest.raises(SpecbenchError) as error:
        TraceWriter(path, trace_file.target, trace_file.drafter, resume=True, key=other, shard=Shard(1, 2))
    assert str(error.value) == (f"{path}: cannot resume: traced with other settings (k_max 4 vs 8 (the file's vs "
                                "this run's)) (hint: trace into another --out directory)")
    with pytest.raises(SpecbenchError, match=r"cannot resume: traced with other settings \(shard 1/2 in the file, "
                                             r"2/2 now\)"):
        TraceWriter(path, trace_file.target, trace_file.drafter, resume=True, key=key, shard=Shard(2, 2))
    # more windows: resumed, and the header names the new set
    grown = TraceKey(key.runner_sha256, windows_digest(windows[:3]), 3, 4)
    resumed = TraceWriter(path, trace_file.target, trace_file.drafter, resume=True, key=grown, shard=Shard(1, 2))
    assert list(resumed.done) == [windows[0].window_id]
    assert load_trace_file(path).key == grown and load_trace_file(path).shard == Shard(1, 2)
