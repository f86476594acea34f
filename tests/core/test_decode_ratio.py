"""Each model's forwards as serial decodes meet them (docs/METHODS.md §4.4 Overheads, "Serial decodes"): the
ratio measured, priced, and how the AS2D decodes' co-scheduling ratios read it."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from specbench.core.decomposition import decode_contention
from specbench.core.pricing import CLASS_FORWARDS, CostTable, DecodeRatio, decode_ratio, timed_forwards
from specbench.world.overheads import serial_forwards
from tests.core.test_decomposition import RHO_TRUE, native_run
from tests.helpers import make_profile

CELLS = CostTable(np.array([0.0, 100.0]), {1: np.array([0.010, 0.020]), 2: np.array([0.030, 0.030])}, "t")


def test_the_ratio_is_the_decodes_time_over_the_cells_price_pooled_and_per_width_class():
    # width 1 at depth 50 is priced 15 ms; the decodes ran them at 18 ms, and width 2 (30 ms) at 27 ms
    single = [(1, 50.0, 18_000.0, None)] * CLASS_FORWARDS
    wider = [(2, 0.0, 27_000.0, None)] * CLASS_FORWARDS
    ratio = decode_ratio(single + wider, CELLS)
    assert (ratio.single, ratio.wider) == (pytest.approx(1.2), pytest.approx(0.9))
    assert ratio.realised == pytest.approx((18 + 27) / (15 + 30)) and ratio.forwards == 2 * CLASS_FORWARDS
    # a class with too few forwards is priced at the pooled ratio; a width the cells lack is left out
    few = decode_ratio(single + wider[:3] + [(5, 0.0, 1e9, None)], CELLS)
    assert few.wider is None and few.at(2) == few.realised == pytest.approx((8 * 18 + 3 * 27) / (8 * 15 + 3 * 30))
    assert decode_ratio([(5, 0.0, 1.0, None)], CELLS) is None and decode_ratio([], CELLS) is None
    assert ratio.host is None and ratio.host_at(1) == 0.0  # no op starts recorded: no host work priced
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
    results = [{"kind": "decode", "method": {"name": "target"}, "ops": [op], "decode_s": 0.0002},
               {"kind": "decode", "method": {"name": "sd", "width": 5}, "decode_s": 0.0002,
                "ops": [op | {"width": 3}, {"model": "drafter", "width": 2, "depth": 9, "us": 40}]},
               {"kind": "decode", "method": {"name": "as2d"}, "producer": {}, "ops": [op | {"us": 999}]},
               {"kind": "probe"}]
    assert serial_forwards(results) == {"target": [(1, 7.0, 100.0, None), (3, 7.0, 100.0, None)],
                                        "drafter": [(2, 9.0, 40.0, None)]}


def test_the_host_work_after_a_forward_runs_to_the_next_forwards_start_or_the_decodes_end():
    # a verification at 0 for 100 us, a drafter forward from 130 to 170, a step from 175 to 275; the decode ends at 300
    ops = [{"model": "target", "width": 3, "depth": 7, "us": 100, "t_us": 0},
           {"model": "drafter", "width": 1, "depth": 9, "us": 40, "t_us": 130},
           {"model": "target", "width": 1, "depth": 10, "us": 100, "t_us": 175}]
    assert timed_forwards(ops, 300.0) == [("target", (3, 7.0, 100.0, 30.0)), ("drafter", (1, 9.0, 40.0, 5.0)),
                                          ("target", (1, 10.0, 100.0, 25.0))]
    # clocks a microsecond apart never make work negative; an op log without starts times none
    assert timed_forwards(ops[:1], 99.0)[0][1][3] == 0.0
    assert [f[3] for _, f in timed_forwards([{k: v for k, v in op.items() if k != "t_us"} for op in ops], 300.0)] \
        == [None] * 3


def test_the_host_work_is_priced_after_each_forward_by_width_class_in_scalar_and_bulk_alike():
    single = [(1, 50.0, 15_000.0, 200.0)] * CLASS_FORWARDS
    wider = [(2, 0.0, 30_000.0, 600.0)] * (CLASS_FORWARDS - 1) + [(2, 0.0, 30_000.0, None)]
    ratio = decode_ratio(single + wider, CELLS)
    host = ratio.host
    assert (host.single, host.wider, host.wider_forwards) == (pytest.approx(200e-6), None, CLASS_FORWARDS - 1)
    assert host.seconds == pytest.approx((8 * 200 + 7 * 600) / 15 * 1e-6) == host.at(2)  # too few: pooled
    table = replace(CELLS, decode=ratio)
    assert table.price(1, 50.0) == table.cost(1, 50.0) + 200e-6
    assert table.price(2, 0.0) == table.cost(2, 0.0) + host.seconds
    widths, depths = np.array([1, 2, 1]), np.array([50.0, 0.0, 100.0])
    assert table.prices(widths, depths).tolist() == [table.price(int(w), d) for w, d in zip(widths, depths)]
    assert CELLS.prices(widths, depths).tolist() == CELLS.costs(widths, depths).tolist()  # unmeasured: nothing


def test_the_targets_ratio_beside_the_producer_does_not_move_with_its_serial_decode_ratio():
    # AS2D's target ratio is its time over its solo work (the price times the target-only decodes' speed), so a
    # price scaled by the serial decodes' ratio leaves it as it was, and the priced forward is the native one
    profile = make_profile(rho=(1.2, 1.0))
    native, _ = native_run()
    plain = decode_contention([native], profile.target_costs, profile.cosched(None))
    scaled = replace(profile.target_costs, decode=DecodeRatio(1.3, 40))
    met = decode_contention([native], scaled, profile.cosched(None))
    assert met.realised == pytest.approx(plain.realised) == pytest.approx(RHO_TRUE)
