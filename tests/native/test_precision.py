"""Profiles measured to a stated precision (docs/METHODS.md §4.2 Forward costs: CT, CD and the all-rows table): the
runner's stop decision and achieved precision agree with the rule in specbench.core.samples, counts stay within
their bounds, and a cell that stops at the maximum short of the precision is named in the profile's warnings."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from specbench.core.repetitions import RepetitionRule, achieved_precision
from specbench.core.stability import stability_warnings
from specbench.schemas.placement import resolve
from specbench.schemas.profiles import load_profile
from specbench.world.profiling import SweepPlan, drafter_widths, measured, profile_device, write_profile

pytestmark = pytest.mark.serial  # the precision rule stops on the spread of what it times


def sweep(tiny, **rule):
    return {"mode": "sweep", "threads": 1, "target": {"path": str(tiny.target)}, "drafter": {"path": str(tiny.near)},
            "widths": [1, 2, 3, 4], "drafter_widths": [1, 2], "depths": [0, 32], **rule}


def agrees_with_the_rule(record: dict, rule: RepetitionRule) -> None:
    """The runner's record against the pure rule recomputed from its samples (in the order taken)."""
    samples = record["samples_us"]
    assert record["repetitions"] == len(samples) == rule.stop_count(samples)
    assert rule.min_repetitions <= len(samples) <= rule.max_repetitions
    achieved = achieved_precision(samples)
    assert (record["achieved_precision"] is None) == math.isinf(achieved)
    if record["achieved_precision"] is not None:
        assert record["achieved_precision"] == pytest.approx(achieved, rel=1e-12)
    if rule.precision is not None:
        assert record["converged"] == (achieved <= rule.precision)
        assert record["converged"] or len(samples) == rule.max_repetitions  # short of it only at the maximum


@pytest.mark.parametrize("precision,most", [(0.5, 12), (0.02, 9), (1e-6, 6)])
def test_the_runner_stops_each_cell_where_the_rule_does(run_job, tiny, precision, most):
    rule = RepetitionRule(5, most, precision)
    out = run_job(sweep(tiny, precision=precision, min_repetitions=5, max_repetitions=most))
    assert out.returncode == 0, out.error
    assert len(out.results) == 4 * 2 + 2 * 2
    for record in out.results:
        assert (record["precision"], record["min_repetitions"], record["max_repetitions"]) == (precision, 5, most)
        agrees_with_the_rule(record, rule)


def test_a_fixed_count_records_what_it_reached(run_job, tiny):
    out = run_job(sweep(tiny, repetitions=6))
    assert out.returncode == 0, out.error
    for record in out.results:
        assert record["precision"] is None and record["converged"] is None
        agrees_with_the_rule(record, RepetitionRule.fixed(6))


def test_a_drafter_only_sweep_leaves_the_target_untimed(run_job, tiny):
    out = run_job(sweep(tiny, repetitions=5) | {"widths": []})
    assert out.returncode == 0, out.error
    assert {r["model"] for r in out.results} == {"drafter"}


@pytest.mark.parametrize("keys,error", [
    ({"precision": 0}, "job key 'precision': expected a fraction of the median in (0, 1), e.g. 0.02, got 0.000000"),
    ({"precision": 1.5}, "job key 'precision': expected a fraction of the median in (0, 1), e.g. 0.02, got 1.500000"),
    ({"precision": "2%"}, "job key 'precision': expected a number, got \"2%\""),
    ({"precision": 0.02, "min_repetitions": 4}, "job key 'min_repetitions' must be >= 5 (got 4)"),
    ({"precision": 0.02, "min_repetitions": 8, "max_repetitions": 7},
     "job key 'max_repetitions' must be between 'min_repetitions' (8) and 1000 (got 7)"),
    ({"precision": 0.02, "max_repetitions": 1001},
     "job key 'max_repetitions' must be between 'min_repetitions' (5) and 1000 (got 1001)"),
    ({"precision": 0.02, "repetitions": 5},
     "job key 'repetitions' (a fixed count) goes without 'precision', 'min_repetitions' and 'max_repetitions'"),
    ({"max_repetitions": 9}, "job keys 'min_repetitions' and 'max_repetitions' need 'precision'"),
])
def test_bad_rule_keys_are_one_line_errors(run_job, tiny, keys, error):
    out = run_job(sweep(tiny) | keys)
    assert out.returncode == 1 and out.error["error"] == error and out.results == []


def test_a_precision_profile_records_counts_and_names_the_cells_short_of_it(device, models, tmp_path):
    target, near = models
    placement = resolve("shared", device.cpus(), device.processors())
    # 1e-6 of a forward is below the clock's microsecond: a cell reaches it only if all its samples tie
    plan = SweepPlan((1, 2, 3), (1, 2), (0, 32), placement, 5, cosched=False, precision=1e-6, max_repetitions=7)
    run = profile_device(device, target, [near], plan)
    write_profile(tmp_path / "p.yaml", run)
    profile = load_profile(tmp_path / "p.yaml")
    tables = {"CT": profile.target_costs, "CD": profile.drafter("near").costs,
              "CD_all": profile.drafter("near").all_rows_costs}
    for table in tables.values():
        assert table is not None and table.precision == 1e-6
        assert all(((5 <= n) & (n <= 7)).all() for n in table.repetitions.values())
    short = {(w.table, w.width, w.depth) for w in profile.warnings if w.short_of_precision()}
    expected = {(name, w, int(d)) for name, table in tables.items() for w in table.widths()
                for i, d in enumerate(table.depths) if table.achieved_precision[w][i] > 1e-6}
    assert short == expected and short  # every cell at the maximum short of P, and only those
    for warning in profile.warnings:
        if warning.short_of_precision():
            assert warning.samples == 7 and f"w={warning.width} d={warning.depth}: 7 repetitions, ±" in \
                warning.message()
    assert list(profile.warnings) == stability_warnings(run.samples)
    assert "repetitions until the median's ~95% interval is within +/-0.0001% (5..7)" in profile.notes
    within = 14 - len(short)
    assert measured(profile).startswith(f"CT w=1..3, near CD w=1..2, near CD_all w=1..2 at depths 0, 32 (14 cells); "
                                        f"{within} of 14 cells within ±0.0001% of their median (")


def test_co_scheduling_ratios_take_the_profiles_rule_and_record_their_precision(device, models, tmp_path):
    """docs/METHODS.md §4.3 Co-scheduling ratios: each cell's ratios measured until their bootstrap interval reaches
    the precision or the maximum (here unreachable: every cell stops at the maximum, in two jobs)."""
    target, near = models
    placement = resolve("shared", device.cpus(), device.processors())
    plan = SweepPlan((1, 2), (1,), (0,), placement, 5, cosched=True, all_rows=frozenset(), overheads=False,
                     precision=1e-6, max_repetitions=7)
    run = profile_device(device, target, [near], plan)
    write_profile(tmp_path / "p.yaml", run)
    cosched = load_profile(tmp_path / "p.yaml").drafter("near").cosched
    assert cosched.precision == 1e-6 and set(cosched.rho_target) == {1, 2}
    assert all((n == 7).all() for n in cosched.repetitions.values())
    assert all((a > 1e-6).all() for a in cosched.achieved_precision.values())
    records = [s for s in run.samples if s["kind"] == "cosched"]
    for record in records:  # the minimum first, then the rest up to the maximum: every sample kept
        assert [job["repetitions"] for job in record["jobs"]] == [5, 2]
        assert len(record["samples"]["target_alone_us"]) == 7 and record["repetitions"] == 7
        assert record["rho_target"] == cosched.rho_target[record["width"]][0]
    assert "co-scheduled near w=1..2 (0 of 2 cells' ratios within ±0.0001%, 7 repetitions each side)" in \
        measured(load_profile(tmp_path / "p.yaml"))


def test_co_scheduling_cells_at_a_fixed_count_take_one_job_while_the_cost_cells_keep_the_precision(device, models,
                                                                                                    tmp_path):
    """`SweepPlan.cosched_fixed` (`demo --speech`): the co-scheduling cells take the plan's minimum in one job, the
    cost cells still run to the precision's maximum, and the profile records both."""
    target, near = models
    placement = resolve("shared", device.cpus(), device.processors())
    plan = SweepPlan((1, 2), (1,), (0,), placement, 5, cosched=True, all_rows=frozenset(), overheads=False,
                     precision=1e-6, max_repetitions=7, cosched_fixed=True)
    run = profile_device(device, target, [near], plan)
    write_profile(tmp_path / "p.yaml", run)
    profile = load_profile(tmp_path / "p.yaml")
    cosched = profile.drafter("near").cosched
    assert cosched.precision is None and all((n == 5).all() for n in cosched.repetitions.values())
    assert all([job["repetitions"] for job in r["jobs"]] == [5] for r in run.samples if r["kind"] == "cosched")
    assert profile.target_costs.precision == 1e-6
    assert all((n == 7).all() for n in profile.target_costs.repetitions.values())
    assert "(co-scheduling cells: 5 repetitions)" in profile.notes
    assert "co-scheduled near w=1..2 (" in measured(profile) and "5 repetitions each side" in measured(profile)


def test_the_demos_profiles_measure_exactly_the_cells_its_replay_checks():
    """docs/METHODS.md §4.2 Forward costs: CT, CD and the all-rows table: target widths up to W, k_max + 1 or B + 1;
    drafter widths up to 2 (SD), k_max (SpecASR, both tables) or 1 (AS2D); co-scheduled widths up to B + 1."""
    from specbench.app.cost_cells import sweep_plan
    from specbench.app.demo import DEMO_METHODS, DEPTHS, MAX_REPETITIONS, PRECISION, REPETITIONS
    from specbench.core.methods.configs import parse_method_specs
    from specbench.world.model_files import ModelFile

    placement = resolve("shared", [0, 1])
    plan = sweep_plan(parse_method_specs(list(DEMO_METHODS)), placement, DEPTHS, precision=PRECISION,
                      max_repetitions=MAX_REPETITIONS, repetitions=REPETITIONS)
    # sd:W=8 and as2d:B=7 need target width 8, specasr (k_max 8) 9
    assert plan.widths == tuple(range(1, 10)) and plan.depths == (0, 128)
    smollm2, gemma3 = ModelFile("smollm2", Path("s.gguf")), ModelFile("gemma3", Path("g.gguf"))
    assert drafter_widths(plan, smollm2) == tuple(range(1, 9))  # specasr's k_max
    assert drafter_widths(plan, gemma3) == (1, 2)  # sd:W=5 ingests up to 2; as2d steps 1
    assert plan.all_rows == {"smollm2"}
    assert plan.cosched_widths == {"smollm2": tuple(range(1, 9)), "gemma3": (1, 2, 3, 4)}
    assert plan.rule == RepetitionRule(5, 15, 0.02)
    # target 9 widths, smollm2 8 + 8 all-rows, gemma3 2, at 2 depths
    assert plan.forwards([smollm2, gemma3]) == (9 + 16 + 2) * 2
    # gemma3's own vocabulary: its SD re-ingests retokenized text as wide as the traces say
    widened = sweep_plan(parse_method_specs(list(DEMO_METHODS)), placement, DEPTHS, traced={"gemma3": 3, "smollm2": 2})
    assert drafter_widths(widened, gemma3) == (1, 2, 3) and drafter_widths(widened, smollm2) == tuple(range(1, 9))
    assert widened.precision is None  # validate's cells: a fixed count
