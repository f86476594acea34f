"""Each model's forwards as serial decodes meet them (docs/METHODS.md §4.4 Overheads, "Serial decodes"): the
ratio measured, priced, and how the AS2D decodes' co-scheduling ratios read it."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from specbench.core.decomposition import decode_contention
from specbench.core.pricing import CLASS_FORWARDS, CostTable, DecodeRatio, decode_ratio
from specbench.world.overheads import serial_forwards
from tests.core.test_decomposition import RHO_TRUE, native_run
from tests.helpers import make_profile

CELLS = CostTable(np.array([0.0, 100.0]), {1: np.array([0.010, 0.020]), 2: np.array([0.030, 0.030])}, "t")


def test_the_ratio_is_the_decodes_time_over_the_cells_price_pooled_and_per_width_class():
    # width 1 at depth 50 is priced 15 ms; the decodes ran them at 18 ms, and width 2 (30 ms) at 27 ms
    single = [(1, 50.0, 18_000.0)] * CLASS_FORWARDS
    wider = [(2, 0.0, 27_000.0)] * CLASS_FORWARDS
    ratio = decode_ratio(single + wider, CELLS)
    assert (ratio.single, ratio.wider) == (pytest.approx(1.2), pytest.approx(0.9))
    assert ratio.realised == pytest.approx((18 + 27) / (15 + 30)) and ratio.forwards == 2 * CLASS_FORWARDS
    # a class with too few forwards is priced at the pooled ratio; a width the cells lack is left out
    few = decode_ratio(single + wider[:3] + [(5, 0.0, 1e9)], CELLS)
    assert few.wider is None and few.at(2) == few.realised == pytest.approx((8 * 18 + 3 * 27) / (8 * 15 + 3 * 30))
    assert decode_ratio([(5, 0.0, 1.0)], CELLS) is None and decode_ratio([], CELLS) is None
    # measured against the cells, not against a ratio the table already holds
    assert decode_ratio(single, replace(CELLS, decode=DecodeRatio(3.0, 9))).realised == pytest.approx(1.2)


def test_a_table_prices_every_width_at_its_class_ratio_in_scalar_and_bulk_alike():
    table = replace(CELLS, decode=DecodeRatio(1.5, 40, single=1.2, single_forwards=20))
    assert table.cost(1, 50.0) == pytest.approx(0.015 * 1.2)
    assert table.cost(2, 50.0) == pytest.approx(0.030 * 1.5)  # no wider class: the pooled ratio
    assert table.costs(np.array([1, 2]), np.array([50.0, 50.0])).tolist() == [table.cost(1, 50.0),
                                                                            table.cost(2, 50.0)]
    assert table.seconds[1].tolist() == [0.010, 0.020]  # the cells stay as measured


def test_serial_forwards_take_the_target_only_and_sd_decodes_by_model_and_leave_as2d_out():
    op = {"model": "target", "width": 1, "depth": 7, "us": 100}
    results = [{"kind": "decode", "method": {"name": "target"}, "ops": [op]},
               {"kind": "decode", "method": {"name": "sd", "width": 5},
                "ops": [op | {"width": 3}, {"model": "drafter", "width": 2, "depth": 9, "us": 40}]},
               {"kind": "decode", "method": {"name": "as2d"}, "producer": {}, "ops": [op | {"us": 999}]},
               {"kind": "probe"}]
    assert serial_forwards(results) == {"target": [(1, 7.0, 100.0), (3, 7.0, 100.0)], "drafter": [(2, 9.0, 40.0)]}


def test_the_targets_ratio_beside_the_producer_does_not_move_with_its_serial_decode_ratio():
    # AS2D's target ratio is its time over its solo work (the price times the target-only decodes' speed), so a
    # price scaled by the serial decodes' ratio leaves it as it was, and the priced forward is the native one
    profile = make_profile(rho=(1.2, 1.0))
    native, _ = native_run()
    plain = decode_contention([native], profile.target_costs, profile.cosched(None))
    scaled = replace(profile.target_costs, decode=DecodeRatio(1.3, 40))
    met = decode_contention([native], scaled, profile.cosched(None))
    assert met.realised == pytest.approx(plain.realised) == pytest.approx(RHO_TRUE)
