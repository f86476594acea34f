"""The demo's suites are consistent: every configuration run natively is replayed, every drafter a configuration
names is traced deeply enough for it, the budget catalog prices only co-scheduled widths the profile measures."""

from __future__ import annotations

import pytest

from specbench.app.cost_cells import needed_widths, sweep_plan
from specbench.app.demo import SUITES
from specbench.core.methods.configs import As2dConfig, SdConfig, SpecAsrConfig, parse_method_specs
from specbench.schemas.placement import NAMED, resolve_on


@pytest.mark.parametrize("name", sorted(SUITES))
def test_a_suite_runs_natively_what_it_replays_and_traces_what_it_needs(name):
    suite = SUITES[name]
    drafters = {d for d, _ in suite.drafters}
    for methods, native in ((suite.methods, suite.native), (suite.quick_methods, suite.quick_native)):
        configs = parse_method_specs(list(methods))
        assert set(native) <= {c.label for c in configs}
        for config in configs:
            drafter = getattr(config, "drafter", None)
            assert drafter is None or drafter in drafters, config.label
            if isinstance(config, SdConfig) and drafter:
                assert config.width - 1 <= suite.trace_k_max[drafter], config.label
            if isinstance(config, SpecAsrConfig) and drafter:
                assert config.k_max <= suite.trace_k_max[drafter], config.label


@pytest.mark.parametrize("name", sorted(SUITES))
def test_the_budget_catalog_prices_only_measured_co_scheduled_widths(name):
    from specbench.world.devices.local import LocalDevice

    suite = SUITES[name]
    for methods, catalog in ((suite.methods, suite.budget_catalog), (suite.quick_methods, suite.quick_budget_catalog)):
        plan = sweep_plan(parse_method_specs(list(methods)), resolve_on(LocalDevice(), NAMED[0]), suite.depths)
        for config in parse_method_specs(list(catalog)):
            assert isinstance(config, As2dConfig) and config.drafter in plan.cosched_widths
            assert needed_widths(config)[0] <= max(plan.cosched_widths[config.drafter]), config.label
