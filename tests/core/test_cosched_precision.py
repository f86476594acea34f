"""Co-scheduling ratios to a precision (docs/METHODS.md §4.3 Co-scheduling ratios): the profile's one repetition
rule stops each cell within its bounds and records what it reached; a ratio below 1 beyond its interval is
measured again and then warned about, never priced silently. The runner's samples are given here (the runner
itself: tests/native/test_cosched.py, tests/native/test_local_device.py)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from specbench.core.cosched import CellSamples, measure_to_rule, ratio_of_medians, reaches_one
from specbench.core.repetitions import RepetitionRule
from specbench.core.stability import stability_warnings
from specbench.schemas.fileio import dumps_line
from specbench.schemas.profiles import load_profile, profile_to_dict, save_profile
from specbench.schemas.results import ProfileInput, profile_warnings
from specbench.world.profiling import co_schedule, cosched_record
from tests.helpers import make_profile, results_manifest


class Samples:
    """A runner stand-in for the rule: each cell's next samples from its own seeded stream, the
    together side `rho` x the alone side (jobs and counts recorded)."""

    def __init__(self, rho: dict, spread: float, seed: int = 1):
        self.rho, self.spread, self.rng = rho, spread, np.random.default_rng(seed)
        self.jobs: list[tuple[tuple, int]] = []

    def __call__(self, cells, repetitions, job):
        self.jobs.append((tuple(cells), repetitions))
        out = []
        for order, (width, depth) in enumerate(cells):
            rho = self.rho[(width, depth)]
            rho = rho[min(len(self.jobs) - 1, len(rho) - 1)] if isinstance(rho, tuple) else rho

            def draw(n, scale):
                return list(scale * (1 + self.spread * self.rng.standard_normal(n)))

            out.append({"kind": "cosched", "width": width, "depth": depth, "seed": 42 + job, "order": order,
                        "samples": {"target_alone_us": draw(repetitions, 1000.0),
                                    "target_together_us": draw(repetitions, 1000.0 * rho),
                                    "drafter_alone_us": draw(4 * repetitions, 300.0),
                                    "drafter_together_us": draw(4 * repetitions, 300.0 * max(rho, 1.0))}})
        return out


def test_the_ratio_interval_is_the_bootstrap_of_the_ratio_of_medians():
    est = ratio_of_medians([100, 101, 99, 100, 102], [150, 149, 151, 150, 152])
    assert est.ratio == 150 / 100 and est.low <= est.ratio <= est.high
    assert est == ratio_of_medians([100, 101, 99, 100, 102], [150, 149, 151, 150, 152])  # seeded
    assert ratio_of_medians([100] * 5, [150] * 5).precision == 0.0 and not est.below_one()


def test_the_rule_stops_every_cell_within_its_bounds_and_records_its_precision():
    rule = RepetitionRule(5, 20, 0.02)
    cells = [(1, 0), (2, 0), (1, 64), (2, 64)]
    # quiet cells reach 2% early; noisy ones run to the maximum short of it
    quiet = measure_to_rule(Samples({c: 1.3 for c in cells}, 0.001), cells, rule)
    noisy_source = Samples({c: 1.3 for c in cells}, 0.3)
    noisy = measure_to_rule(noisy_source, cells, rule)
    # a cell far from the precision goes to the maximum in one more job (each job reloads the models)
    assert noisy_source.jobs == [(tuple(cells), 5), (tuple(cells), 15)]
    for measured, stop in ((quiet, lambda c: c.count == 5), (noisy, lambda c: c.count == 20)):
        assert set(measured.cells) == set(cells) and not measured.below_one and not measured.remeasured
        assert all(5 <= c.count <= 20 and stop(c) for c in measured.cells.values())
    assert all(c.achieved_precision() <= 0.02 for c in quiet.cells.values())
    assert all(c.achieved_precision() > 0.02 for c in noisy.cells.values())
    # the profile's cosched block keeps each cell's count and achieved precision
    records = [cosched_record(c, noisy) for c in noisy.cells.values()]
    cosched = co_schedule(records, (0, 64), rule.precision)
    assert cosched.precision == 0.02 and (cosched.repetitions[1] == 20).all()
    assert np.allclose(cosched.achieved_precision[2], [noisy.cells[(2, d)].achieved_precision() for d in (0, 64)])
    assert cosched.rho_target[1][0] == noisy.cells[(1, 0)].rho_target().ratio
    # a fixed count: one job of it
    fixed = Samples({c: 1.3 for c in cells}, 0.3)
    assert all(c.count == 7 for c in measure_to_rule(fixed, cells, RepetitionRule.fixed(7)).cells.values())
    assert fixed.jobs == [(tuple(cells), 7)]


def test_a_cell_near_its_precision_takes_the_samples_its_interval_projects():
    rule = RepetitionRule(5, 200, 0.02)
    cell = [(1, 0)]
    # the first job's samples, drawn again from the same seed
    first = CellSamples.empty((1, 0)).add(Samples({(1, 0): 1.3}, 0.03, seed=5)(cell, 5, 0)[0])
    source = Samples({(1, 0): 1.3}, 0.03, seed=5)
    measured = measure_to_rule(source, cell, rule).cells[(1, 0)]
    counts = [n for _, n in source.jobs]
    # short of 2% after 5, it takes n (achieved / precision)^2 in all next, well short of the maximum
    assert counts[0] == 5 and first.achieved_precision() > 0.02
    assert 5 + counts[1] == max(7, math.ceil(5 * (first.achieved_precision() / 0.02) ** 2)) < 200
    assert measured.count == sum(counts) < 200


def test_a_ratio_below_one_is_measured_again_then_warned_about_and_kept_in_the_profile(tmp_path):
    rule = RepetitionRule(5, 10, 0.02)
    cells = [(1, 0), (2, 0), (3, 0)]
    # width 2 is faster together in both measurements, width 3 only in the first one
    source = Samples({(1, 0): 1.2, (2, 0): 0.8, (3, 0): (0.8, 1.25)}, 0.002)
    measured = measure_to_rule(source, cells, rule)
    assert measured.remeasured == ((2, 0), (3, 0))
    assert [(b.width, b.ratio) for b in measured.below_one] == [(2, "rho_target")]
    assert measured.cells[(3, 0)].rho_target().ratio > 1  # the second measurement is the one priced
    assert source.jobs[-1] == (((2, 0), (3, 0)), 5)
    records = [cosched_record(c, measured) | {"model_name": "drafter"} for c in measured.cells.values()]
    assert [r["remeasured"] for r in records] == [False, True, True] and "first_measurement" in records[1]
    warnings = [w for w in stability_warnings(records) if w.ratio is not None]
    assert len(warnings) == 1
    low = warnings[0]
    assert (low.table, low.width, low.depth) == ("cosched rho_target", 2, 0) and low.ratio_high < 1
    assert low.message().startswith(f"cosched rho_target of drafter w=2 d=0 is {low.ratio:.3f} [")
    assert "below 1 beyond its interval after a re-measurement" in low.message()
    # stored with the profile and read back (its warnings and its cells' precision)
    base = make_profile()
    drafter = base.drafters["drafter"]
    profile = replace(base, drafters={"drafter": replace(drafter, cosched=co_schedule(records, (0,), 0.02))},
                      warnings=tuple(stability_warnings(records)))
    save_profile(tmp_path / "p.yaml", profile)
    loaded = load_profile(tmp_path / "p.yaml")
    assert profile_to_dict(loaded) == profile_to_dict(profile)
    assert [w for w in loaded.warnings if w.ratio is not None] == [low]
    assert loaded.drafters["drafter"].cosched.precision == 0.02
    # a run carries it into its manifest, and the report's profile warnings show it with its interval
    manifest = results_manifest(device="host@shared", placement_profile=ProfileInput("p.yaml", "a", warnings=(low,)))
    row = profile_warnings([manifest]).to_dict("records")[0]
    assert (row["table"], row["ratio"], row["ratio_low"], row["ratio_high"]) == \
        ("cosched rho_target", low.ratio, low.ratio_low, low.ratio_high)


def test_a_cell_without_a_drafter_ratio_runs_to_the_maximum_and_is_written_without_an_interval(tmp_path):
    class NoDrafterInside(Samples):
        def __call__(self, cells, repetitions, job):
            return [r | {"samples": r["samples"] | {"drafter_together_us": []}}
                    for r in super().__call__(cells, repetitions, job)]

    measured = measure_to_rule(NoDrafterInside({(1, 0): 1.2}, 0.0), [(1, 0)], RepetitionRule(5, 9, 0.02))
    cell = measured.cells[(1, 0)]
    assert cell.count == 9 and cell.rho_drafter() is None and cell.achieved_precision() == float("inf")
    record = cosched_record(cell, measured)
    assert record["achieved_precision"] is None and record["rho_drafter"] is None
    assert dumps_line(record)  # the samples file takes it (JSON has no infinity)
    assert co_schedule([record], (0,)) is None  # a width without a drafter ratio is not measured


def test_cell_samples_accumulate_over_jobs():
    cell = CellSamples.empty((1, 0))
    record = {"samples": {"target_alone_us": [1, 2], "target_together_us": [3], "drafter_alone_us": [],
                          "drafter_together_us": [4]}}
    cell = cell.add(record).add(record)
    assert cell.samples_us["target_alone_us"] == (1, 2, 1, 2) and cell.count == 2 and cell.rho_drafter() is None


def test_a_ratio_far_below_one_is_measured_again_even_when_its_interval_reaches_one():
    # five noisy samples a side around 0.56: the interval reaches 1, the ratio is no lane's noise
    rule = RepetitionRule.fixed(5)
    cells = [(1, 0), (4, 0)]
    source = Samples({(1, 0): 1.2, (4, 0): (0.56, 1.1)}, 0.3, seed=3)
    first = measure_to_rule(Samples({(1, 0): 1.2, (4, 0): 0.56}, 0.3, seed=3), cells, rule)
    wide = first.cells[(4, 0)].rho_target()
    assert not wide.below_one() and wide.implausible(), wide  # the case the interval rule alone missed
    measured = measure_to_rule(source, cells, rule)
    assert measured.remeasured == ((4, 0),) and not measured.below_one
    assert measured.cells[(4, 0)].rho_target().ratio > 0.75  # the second measurement is the one priced


def test_a_ratio_whose_skewed_interval_reaches_1_but_not_as_the_profile_records_it_is_warned_of(tmp_path):
    # the bootstrap's upper end reaches 1, but ratio x (1 + achieved precision), the interval the profile
    # records and its loader reads, does not: warned of, so the profile the measurement writes also loads
    skewed = {"target_alone_us": [100.0] * 7, "target_together_us": [60.0, 70, 73, 74, 101, 102, 103],
              "drafter_alone_us": [10.0] * 7, "drafter_together_us": [10.0] * 7}
    cell = CellSamples(5, 0, {k: tuple(v) for k, v in skewed.items()})
    ratio = cell.rho_target()
    assert not ratio.below_one() and ratio.high >= 1.0
    assert not reaches_one(ratio.ratio, cell.achieved_precision())
    assert [name for name, _ in cell.below_one()] == ["rho_target"]

    def same_samples(cells, repetitions, job):  # the cell measured again gives the same samples
        return [{"kind": "cosched", "width": w, "depth": d, "seed": 42 + job, "order": i, "samples": skewed}
                for i, (w, d) in enumerate(cells)]

    measured = measure_to_rule(same_samples, [(5, 0)], RepetitionRule.fixed(7))
    assert measured.remeasured == ((5, 0),) and [b.ratio for b in measured.below_one] == ["rho_target"]
    records = [cosched_record(c, measured) | {"model_name": "drafter"} for c in measured.cells.values()]
    low = next(w for w in stability_warnings(records) if w.ratio is not None)
    assert low.ratio_high >= 1 and "short of 1 as the profile records it" in low.message()
    base = make_profile()
    drafter = base.drafters["drafter"]
    profile = replace(base, drafters={"drafter": replace(drafter, cosched=co_schedule(records, (0,), None))},
                      warnings=(low,))
    save_profile(tmp_path / "p.yaml", profile)
    assert load_profile(tmp_path / "p.yaml").warnings == (low,)
