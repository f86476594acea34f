"""The decode job's "energy" key (specbench/native/src/energy.cpp): samples on the decode clock,
the idle period first, batches after each window; missing files are one event and no samples."""

from __future__ import annotations

import time

from .test_native_runner import WINDOWS

METHODS = [{"name": "target"}, {"name": "sd", "width": 4, "p_min": 0.0}]


def energy_job(tiny, energy: dict) -> dict:
    return {"mode": "decode", "threads": 1, "target": {"path": str(tiny.target)}, "drafter": {"path": str(tiny.near)},
            "methods": METHODS, "windows": WINDOWS[:2], "energy": energy}


def battery(tmp_path, current: str = "-410000\n"):
    (tmp_path / "current_now").write_text(current)
    (tmp_path / "voltage_now").write_text("3950000\n")
    (tmp_path / "status").write_text("Discharging\n")
    return {"current": str(tmp_path / "current_now"), "voltage": str(tmp_path / "voltage_now"),
            "status": str(tmp_path / "status")}


def test_samples_are_on_the_decode_clock_idle_first_then_a_batch_per_window(run_job, tiny, tmp_path):
    before_us = time.monotonic() * 1e6  # the runner's now_us is CLOCK_MONOTONIC, as time.monotonic()
    out = run_job(energy_job(tiny, battery(tmp_path) | {"interval_ms": 5, "idle_ms": 60}))
    after_us = time.monotonic() * 1e6
    assert out.returncode == 0, (out.error, out.stderr[-2000:])
    started = [e for e in out.events if e["event"] == "energy"]
    assert len(started) == 1 and started[0]["status"] == "Discharging" and started[0]["interval_ms"] == 5
    kinds = [r["kind"] for r in out.results]
    # the idle period, then per window its decodes and a batch of samples; the last batch at the end
    assert kinds == ["energy_idle"] + ["decode"] * 2 + ["energy"] + ["decode"] * 2 + ["energy", "energy"]
    idle = out.results[0]
    assert before_us < idle["start_us"] and idle["end_us"] - idle["start_us"] >= 60_000
    decodes = [r for r in out.results if r["kind"] == "decode"]
    spans = [(r["start_us"], r["end_us"]) for r in decodes]
    assert all(a < b for a, b in spans) and all(b1 <= a2 for (_, b1), (a2, _) in zip(spans, spans[1:], strict=False))
    assert idle["end_us"] <= spans[0][0] and spans[-1][1] < after_us
    samples = [s for r in out.results if r["kind"] == "energy" for s in r["samples"]]
    times = [s[0] for s in samples]
    assert times == sorted(times) and {tuple(s[1:]) for s in samples} == {(-410000, 3950000)}
    # sampling covers the idle period and every decode
    assert times[0] <= idle["start_us"] + 5_000 and times[-1] >= spans[-1][1]
    assert sum(idle["start_us"] <= t <= idle["end_us"] for t in times) >= 5


def test_missing_battery_files_are_one_event_and_no_samples(run_job, tiny, tmp_path):
    out = run_job(energy_job(tiny, {"current": str(tmp_path / "none"), "interval_ms": 5, "idle_ms": 50}))
    assert out.returncode == 0, (out.error, out.stderr[-2000:])
    assert [e for e in out.events if e["event"] == "energy"] == [
        {"event": "energy", "source": None, "key": "current", "missing": str(tmp_path / "none")}]
    assert {r["kind"] for r in out.results} == {"decode"}  # no idle period, no samples
    assert all("start_us" in r and "end_us" in r for r in out.results)


def test_bad_energy_keys_are_job_errors(run_job, tiny, tmp_path):
    for energy, message in (({"interval_ms": 0}, "'energy.interval_ms' must be in 1..60000, got 0"),
                            ({"idle_ms": -1}, "'energy.idle_ms' must be in 0..600000, got -1"),
                            ({"period": 5}, "energy.period")):
        out = run_job(energy_job(tiny, battery(tmp_path) | energy))
        assert out.returncode == 1 and message in out.error["error"], out.error
