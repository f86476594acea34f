"""Traces are decisions, so they are cached: a finished trace is reused only when every key
field matches (runner build, target and drafter files, each chat template, the windows,
k_max); changing any one traces again. A sharded trace merged is the single-process trace
line for line. Real runner, tiny models, two short windows."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import pytest

from specbench.app.trace_shards import merge_shards
from specbench.schemas.traces import Shard, load_trace_file
from specbench.schemas.windows import make_text_window
from specbench.world.devices.local import LocalDevice
from specbench.world.model_files import ModelFile
from specbench.world.trace_cache import REUSED
from specbench.world.tracing import trace_windows

WINDOWS = [make_text_window("w0", "hello the world", "Repeat this.", 6, "tiny", "dev"),
           make_text_window("w1", "in the heat", "Repeat this.", 6, "tiny", "test"),
           make_text_window("w2", "the end", "Repeat this.", 6, "tiny", "test")]


@pytest.fixture()
def traced(device, models, tmp_path):
    """trace(out, **changes) -> (file, windows traced, what was said), against one cache."""

    def trace(out, device=device, target=models[0], drafter=models[1], windows=WINDOWS[:2], k_max=4,
              cache=tmp_path / "cache", shard=None):
        said: list[str] = []
        path, count = trace_windows(device, windows, target, drafter, tmp_path / out, k_max, threads=1,
                                    cache=cache, shard=shard, say=said.append)
        return path, count, said

    return trace


def test_a_finished_trace_is_reused_only_when_every_key_field_matches(traced, runner, models, tiny, tmp_path):
    target, near = models
    first, count, said = traced("base")
    assert count == 2 and said == []
    # the same key into another directory: copied from the cache, byte for byte
    again, count, said = traced("again")
    assert count == 0 and again.read_bytes() == first.read_bytes()
    assert len(said) == 1 and said[0].startswith("reusing ") and said[0].endswith(f": {REUSED}")
    assert load_trace_file(again).key.k_max == 4
    # the output path itself, when its header key matches
    _, count, said = traced("base")
    assert count == 0 and said == [f"reusing {first}: {REUSED}"]

    other_runner = tmp_path / "runner" / "specbench-runner"
    other_runner.parent.mkdir()
    shutil.copy2(runner, other_runner)
    with open(other_runner, "ab") as handle:
        handle.write(b"\0another build")  # same behaviour, another sha256
    changes = {
        "runner": {"device": LocalDevice(runner=other_runner)},
        "target model": {"target": ModelFile("target", tiny.far)},
        "drafter model": {"drafter": ModelFile("near", tiny.far)},
        "target template": {"target": replace(target, template="chatml")},
        "drafter template": {"drafter": replace(near, template="chatml")},
        "windows": {"windows": [WINDOWS[0], replace(WINDOWS[1], window_sha256="1" * 64)]},
        "k_max": {"k_max": 5},
    }
    for n, (what, change) in enumerate(changes.items()):
        path, count, said = traced(f"changed-{n}", **change)
        assert (count, said) == (2, []), what
        assert path.read_bytes() != first.read_bytes(), what
    # every changed trace went into the cache under its own key: each is reused in turn
    for n, (what, change) in enumerate(changes.items()):
        _, count, said = traced(f"again-{n}", **change)
        assert count == 0 and len(said) == 1, what
    # no cache: traced again
    _, count, said = traced("uncached", cache=None)
    assert (count, said) == (2, [])


def test_merged_shards_equal_the_single_process_trace(traced, tmp_path):
    single, _, _ = traced("single", windows=WINDOWS)
    dirs = []
    for k in (1, 2):
        path, count, _ = traced(f"parts/shard-{k}-of-2", windows=WINDOWS, shard=Shard(k, 2))
        assert count == len(WINDOWS[k - 1::2])
        dirs.append(path.parent)
    assert load_trace_file(dirs[0] / single.name).shard == Shard(1, 2)
    [merged] = merge_shards(dirs, tmp_path / "merged")
    # byte for byte after the header's environment block (each shard ran as its own session)
    assert without_environment(merged) == without_environment(single)


def without_environment(path):
    header, *lines = path.read_text().splitlines()
    return [{k: v for k, v in json.loads(header).items() if k != "environment"}, *lines]


def test_the_cli_says_it_reuses_and_traces_shards_into_their_own_directories(tiny, runner, tmp_path):
    from click.testing import CliRunner

    from specbench.cli import main
    from specbench.schemas.windows import save_windows

    windows = tmp_path / "windows.jsonl"
    save_windows(windows, WINDOWS)
    env = {"SPECBENCH_CACHE": str(tmp_path / "cache"), "SPECBENCH_RUNNER": str(runner)}

    def trace(*extra):
        result = CliRunner().invoke(main, ["trace", str(windows), "--target", str(tiny.target), "--drafter",
                                           f"near={tiny.near}", "--k-max", "4", "--threads", "1", *extra], env=env)
        assert result.exit_code == 0, result.output
        return " ".join(result.output.split())  # the console wraps long paths

    assert "3 windows traced into" in trace("--out", str(tmp_path / "a"))
    output = trace("--out", str(tmp_path / "b"))
    assert f": {REUSED}" in output and "0 windows traced into" in output
    assert "3 windows traced into" in trace("--out", str(tmp_path / "c"), "--no-cache")
    for k in (1, 2):
        output = trace("--out", str(tmp_path / "parts"), "--shard", f"{k}/2", "--no-cache")
        assert output.startswith(f"{len(WINDOWS[k - 1::2])} windows traced into ")
        assert load_trace_file(tmp_path / "parts" / f"shard-{k}-of-2" / "near.jsonl").shard == Shard(k, 2)
    result = CliRunner().invoke(main, ["merge-traces", str(tmp_path / "parts" / "shard-1-of-2"),
                                       str(tmp_path / "parts" / "shard-2-of-2"), "--out", str(tmp_path / "merged")])
    assert result.exit_code == 0, result.output
    assert without_environment(tmp_path / "merged" / "near.jsonl") == without_environment(tmp_path / "c" / "near.jsonl")


def test_a_ray_trace_equals_the_single_process_trace(device, models, runner, tmp_path, monkeypatch):
    """Two Ray workers on a local cluster of this host, each running its own runner on one shard."""
    ray = pytest.importorskip("ray", reason="the 'ray' extra is not installed (pip install 'specbench[ray]')")
    from specbench.app.trace_ray import trace_on_ray

    target, near = models
    single, _ = trace_windows(device, WINDOWS, target, near, tmp_path / "single", 4, threads=1)
    monkeypatch.setenv("SPECBENCH_RUNNER", str(runner))  # the workers inherit it: each finds this runner
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        said: list[str] = []
        [merged] = trace_on_ray(None, WINDOWS, target, [near], tmp_path / "ray", 4, 1, [], 2, said.append)
        assert without_environment(merged) == without_environment(single)
        assert said[0].startswith("3 windows traced by 2 Ray tasks")
        # resumable: a rerun keeps the finished shards and the merged file
        said.clear()
        assert trace_on_ray(None, WINDOWS, target, [near], tmp_path / "ray", 4, 1, [], 2, said.append) == [merged]
        assert said[0].startswith("0 windows traced by 2 Ray tasks") and said[1].startswith(f"reusing {merged}")
    finally:
        ray.shutdown()
