"""The runner's paced decode streams (job key `pace`, docs/METHODS.md §6.3 Sustained load): requests
cycle over the windows, each arrives on the runner's clock as scheduled and never starts before
it arrives; back-to-back requests arrive when the previous one ends. Nothing here asserts speed."""

from __future__ import annotations

import pytest

from .test_native_runner import WINDOWS


def paced(run_job, tiny, pace, methods=({"name": "target"},)):
    job = {"mode": "decode", "threads": 1, "target": {"path": str(tiny.target)}, "methods": list(methods),
           "windows": WINDOWS[:2], "pace": pace}
    return run_job(job)


def test_realtime_arrivals_follow_the_gaps_and_requests_wait_for_them(run_job, tiny):
    out = paced(run_job, tiny, {"duration_s": 0.35, "gaps_us": [100000, 50000]})
    assert out.returncode == 0, out.error
    zero = next(e["zero_us"] for e in out.events if e["event"] == "paced")
    # arrivals at 0, 0.1, 0.15, 0.25, 0.3 s: the next one (0.4 s) is past the duration
    assert [r["arrival_us"] - zero for r in out.results] == [0, 100000, 150000, 250000, 300000]
    assert [r["request"] for r in out.results] == list(range(5))
    assert [r["window_id"] for r in out.results] == [WINDOWS[k % 2]["id"] for k in range(5)]
    assert all(r["arrival_us"] <= r["start_us"] <= r["end_us"] for r in out.results)
    assert all(b["start_us"] >= a["end_us"] for a, b in zip(out.results, out.results[1:], strict=False))


def test_back_to_back_requests_arrive_when_the_previous_ends(run_job, tiny):
    out = paced(run_job, tiny, {"duration_s": 0.2})
    assert out.returncode == 0, out.error
    records = out.results
    assert len(records) >= 2
    assert all(b["arrival_us"] == a["end_us"] for a, b in zip(records, records[1:], strict=False))
    assert all(r["arrival_us"] <= r["start_us"] <= r["end_us"] for r in records)


@pytest.mark.parametrize(("pace", "methods", "message"), [
    ({"duration_s": 0}, [{"name": "target"}], "job key 'pace.duration_s' must be > 0"),
    ({"duration_s": 1, "gaps_us": [1]}, [{"name": "target"}], "job key 'pace.gaps_us' must have one gap per window"),
    ({"duration_s": 1, "gaps_us": [1, -1]}, [{"name": "target"}], "job key 'pace.gaps_us' must hold gaps >= 0"),
    ({"duration_s": 1, "every": 2}, [{"name": "target"}], "pace.every"),
    ({"duration_s": 1}, [{"name": "target"}, {"name": "target"}], "job key 'pace' takes one method and runs 1"),
])
def test_bad_pace_keys_are_job_errors(run_job, tiny, pace, methods, message):
    out = paced(run_job, tiny, pace, methods)
    assert out.returncode == 1 and out.results == [] and message in out.error["error"], out.error
