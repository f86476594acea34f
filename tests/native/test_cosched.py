"""The runner's co-scheduling measurement (docs/METHODS.md §4.3 Co-scheduling ratios): rho_target(w), rho_drafter(w),
each cell in ABBA rounds after every width's warm-up, the width order seeded and recorded."""

from __future__ import annotations

import re

import pytest

from specbench.core.cosched import CellSamples

pytestmark = pytest.mark.serial  # co-scheduling ratios below 1 are refused, and a busy host makes them


def test_cosched_reports_every_width_with_samples_and_order(run_job, tiny):
    job = {"mode": "cosched", "target": {"path": str(tiny.target), "threads": 1},
           "drafter": {"path": str(tiny.near), "threads": 1}, "widths": [1, 4, 8], "depths": [0, 32],
           "warmup": 1, "repetitions": 5, "seed": 7}
    out = run_job(job)
    assert out.returncode == 0, (out.error, out.stderr[-2000:])
    assert {(r["width"], r["depth"]) for r in out.results} == {(w, d) for w in (1, 4, 8) for d in (0, 32)}
    for depth in (0, 32):
        cells = sorted((r for r in out.results if r["depth"] == depth), key=lambda r: r["order"])
        # the cells ran in the recorded order, a permutation of the widths, in that order on stdout
        order = cells[0]["width_order"]
        assert sorted(order) == [1, 4, 8] and [r["width"] for r in cells] == order
        assert [r["order"] for r in cells] == [0, 1, 2]
        assert [r["width"] for r in out.results if r["depth"] == depth] == order
    for r in out.results:
        assert r["kind"] == "cosched" and r["seed"] == 7
        s = r["samples"]
        # ABBA rounds of one forward per half, the last round of an odd count AB; a together half runs
        # longer until as many drafter steps as target forwards fell inside it
        assert re.fullmatch(r"(ABB+A){2}AB+", r["bursts"])
        assert len(s["target_alone_us"]) == 5 and len(s["target_together_us"]) == r["bursts"].count("B") >= 5
        assert len(s["drafter_alone_us"]) == 5 * 4 and len(s["drafter_together_us"]) >= 5
        assert r["rho_target"] == r["target_together_us"] / r["target_alone_us"]
        assert r["rho_drafter"] == r["drafter_together_us"] / r["drafter_alone_us"]
        for key in ("target_alone", "target_together", "drafter_alone", "drafter_together"):
            sp = r["spread"][key]
            assert sp["min_us"] <= sp["max_us"] and sp["n"] == len(s[key + "_us"])
        assert r["target_threads"] == 1 and r["drafter_threads"] == 1
        # the raw samples give the record's ratio through the pure core (the profile's estimate)
        cell = CellSamples.empty((r["width"], r["depth"])).add(r)
        assert cell.rho_target().ratio == r["rho_target"] and cell.count == 5


def test_cosched_measures_the_cells_it_is_given(run_job, tiny):
    out = run_job({"mode": "cosched", "target": {"path": str(tiny.target), "threads": 1},
                   "drafter": {"path": str(tiny.near), "threads": 1}, "cells": [[2, 32], [1, 0]],
                   "repetitions": 2, "warmup": 0})
    assert out.returncode == 0, (out.error, out.stderr[-2000:])
    assert sorted((r["width"], r["depth"]) for r in out.results) == [(1, 0), (2, 32)]
    assert all(re.fullmatch("ABB+A", r["bursts"]) and len(r["samples"]["target_alone_us"]) == 2 for r in out.results)


def test_cosched_refuses_no_repetitions(run_job, tiny):
    out = run_job({"mode": "cosched", "target": {"path": str(tiny.target)}, "drafter": {"path": str(tiny.near)},
                   "widths": [2], "repetitions": 0})
    assert out.returncode == 1 and "repetitions" in out.error["error"]
