"""The runner's pieces `specbench validate` builds on: reference probes (in decode jobs and the
`probe` mode) and `alternate` (odd samples run the methods in reverse order, ABBA)."""

from __future__ import annotations

from .test_native_runner import WINDOWS

METHODS = [{"name": "target"}, {"name": "sd", "width": 4}, {"name": "target"}, {"name": "sd", "width": 3}]


def test_alternate_reverses_odd_samples_and_names_each_slot(run_job, tiny):
    job = {"mode": "decode", "threads": 1, "target": {"path": str(tiny.target)}, "drafter": {"path": str(tiny.near)},
           "methods": METHODS, "windows": WINDOWS[:2], "runs": 2, "alternate": True, "probe": {"repetitions": 3}}
    out = run_job(job)
    assert out.returncode == 0, (out.error, out.stderr[-2000:])
    decodes = [r for r in out.results if r["kind"] == "decode"]
    order = [(r["window_id"], r["sample"], r["slot"]) for r in decodes]
    assert order == [(w["id"], s, slot) for w in WINDOWS[:2] for s in range(2)
                     for slot in ([0, 1, 2, 3] if s == 0 else [3, 2, 1, 0])]
    for r in decodes:  # a slot names the method that ran in it
        assert r["method"]["name"] == METHODS[r["slot"]]["name"]
        assert r["method"].get("width", 1) == METHODS[r["slot"]].get("width", 1)
    # one probe before the first window and one after each, both models timed at depth 0
    probes = [r for r in out.results if r["kind"] == "probe"]
    assert [(p["where"], p.get("window_id")) for p in probes] == [("start", None)] + \
        [("after", w["id"]) for w in WINDOWS[:2]]
    for p in probes:
        assert len(p["target_samples_us"]) == 3 and p["target_us"] > 0 and p["drafter_us"] > 0
        assert isinstance(p["run_queue_wait_us"], int) and isinstance(p["cpu_khz"], list)
    # the probes run between the windows: every probe after a window comes after its last decode
    kinds = [(r["kind"], r.get("window_id")) for r in out.results]
    assert kinds.index(("probe", WINDOWS[0]["id"])) > max(i for i, k in enumerate(kinds) if k == ("decode",
                                                                                                    WINDOWS[0]["id"]))


def test_decode_without_probe_or_alternate_is_unchanged(run_job, tiny):
    job = {"mode": "decode", "threads": 1, "target": {"path": str(tiny.target)}, "drafter": {"path": str(tiny.near)},
           "methods": METHODS[:2], "windows": WINDOWS[:1], "runs": 2}
    out = run_job(job)
    assert all(r["kind"] == "decode" for r in out.results)
    assert [r["slot"] for r in out.results] == [0, 1, 0, 1]


def test_probe_mode_and_its_errors(run_job, tiny):
    job = {"mode": "probe", "threads": 1, "target": {"path": str(tiny.target)}, "drafter": {"path": str(tiny.near)},
           "count": 2, "where": "refresh-1 before", "probe": {"repetitions": 4}}
    out = run_job(job)
    assert out.returncode == 0, out.error
    assert [(r["kind"], r["where"], r["index"]) for r in out.results] == [("probe", "refresh-1 before", 0),
                                                                          ("probe", "refresh-1 before", 1)]
    assert all(len(r["drafter_samples_us"]) == 4 for r in out.results)
    lookup = run_job({"mode": "probe", "target": {"path": str(tiny.target)}, "drafter": {"lookup": "pld"}})
    assert lookup.returncode == 0 and lookup.results[0]["drafter_us"] > 0  # the lookup's own cost
    bad = run_job({"mode": "probe", "target": {"path": str(tiny.target)}, "probe": {"repetitions": 2}})
    assert bad.returncode == 1 and bad.error["error"] == "probe.repetitions must be >= 3 (a probe is a median)"
