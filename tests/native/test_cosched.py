"""The runner's co-scheduling measurement (docs/METHODS.md §4.3 Co-scheduling ratios): rho_target(w), rho_drafter(w)."""

from __future__ import annotations


def test_cosched_reports_every_width_with_samples(run_job, tiny):
    job = {"mode": "cosched", "target": {"path": str(tiny.target), "threads": 1},
           "drafter": {"path": str(tiny.near), "threads": 1}, "widths": [1, 4, 8], "depths": [0, 32],
           "warmup": 1, "repetitions": 5}
    out = run_job(job)
    assert out.returncode == 0, (out.error, out.stderr[-2000:])
    assert {(r["width"], r["depth"]) for r in out.results} == {(w, d) for w in (1, 4, 8) for d in (0, 32)}
    for r in out.results:
        assert r["kind"] == "cosched"
        s = r["samples"]
        assert len(s["target_alone_us"]) == 5 and len(s["target_together_us"]) >= 5
        assert len(s["drafter_alone_us"]) >= 5 and len(s["drafter_together_us"]) >= 5
        assert r["rho_target"] == r["target_together_us"] / r["target_alone_us"]
        assert r["rho_drafter"] == r["drafter_together_us"] / r["drafter_alone_us"]
        for key in ("target_alone", "target_together", "drafter_alone", "drafter_together"):
            sp = r["spread"][key]
            assert sp["min_us"] <= sp["max_us"] and sp["n"] == len(s[key + "_us"])
        assert r["target_threads"] == 1 and r["drafter_threads"] == 1


def test_cosched_refuses_fewer_than_five_repetitions(run_job, tiny):
    out = run_job({"mode": "cosched", "target": {"path": str(tiny.target)}, "drafter": {"path": str(tiny.near)},
                   "widths": [2], "repetitions": 3})
    assert out.returncode == 1 and "repetitions" in out.error["error"]
