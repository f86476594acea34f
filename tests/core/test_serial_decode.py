"""SD's forwards as serial decodes meet them (core/serial_decode.py), priced on the cells of SD's and SpecASR's
forwards by the reference and the bulk replay alike, and the profile's `serial` entry read and written."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from specbench.core.methods.configs import SdConfig, TargetConfig
from specbench.core.pricing import CLASS_FORWARDS, SerialDecode
from specbench.core.replay.bulk import replay_study
from specbench.core.replay.reference import replay_window
from specbench.core.serial_decode import serial_decode
from specbench.errors import SpecbenchError
from specbench.schemas.profiles import profile_from_dict, profile_to_dict
from specbench.schemas.traces import ModelRef, TraceFile
from tests.helpers import linear_costs, make_profile, make_trace, window_for

TARGET = linear_costs(0.010, 0.002, 8, "target", (0, 64), 1e-5)
DRAFTER = linear_costs(0.004, 0.001, 8, "drafter", (0, 64), 1e-5)


def decode(method: str, ops: list[tuple[str, int, int, float]]) -> dict:
    """A runner decode record: ops (model, width, depth, time over the cell)."""
    table = {"target": TARGET, "drafter": DRAFTER}
    return {"kind": "decode", "method": {"name": method},
            "ops": [{"model": m, "width": w, "depth": d, "us": 1e6 * table[m].cost(w, d) * over}
                    for m, w, d, over in ops]}


def test_each_class_is_its_time_over_its_cells_over_target_only_s_in_the_same_job():
    # the device ran 10% slow throughout; SD's verifications a further 4%, its drafter forwards a further 2%
    solo = decode("target", [("target", 1, d, 1.10) for d in range(20, 40)])
    sd = decode("sd", [op for d in range(20, 40, 2)
                       for op in (("drafter", 2 if d > 20 else 1, d, 1.10 * 1.02), ("drafter", 1, d + 1, 1.10 * 1.02),
                                  ("target", 3, d, 1.10 * 1.04))]
                + [("target", 1, 60, 1.5)] * (CLASS_FORWARDS - 1))  # too few single-token steps for a ratio
    as2d = decode("as2d", [("target", 2, 30, 3.0)] * 20) | {"producer": {}}  # beside the producer: not serial
    got = serial_decode([solo, sd, as2d], TARGET, DRAFTER)
    assert got.verify == pytest.approx(1.04) and got.verify_forwards == 10
    assert got.drafter == pytest.approx(1.02) and got.drafter_forwards == 20
    assert got.single is None and got.single_forwards == CLASS_FORWARDS - 1
    assert (got.target(1), got.target(5), got.draft()) == (1.0, got.verify, got.drafter)


def test_without_both_kinds_of_decode_or_beyond_the_limits_nothing_is_measured():
    solo = decode("target", [("target", 1, 30, 1.0)] * 10)
    sd = decode("sd", [("target", 3, 30, 1.0)] * 10 + [("drafter", 1, 30, 1.0)] * 10)
    assert serial_decode([solo], TARGET, DRAFTER) is None
    assert serial_decode([sd], TARGET, DRAFTER) is None
    wild = decode("sd", [("target", 3, 30, 2.5)] * 10 + [("drafter", 1, 30, 0.4)] * 10)
    got = serial_decode([solo, wild], TARGET, DRAFTER)  # a disturbed measurement prices the cells
    assert (got.verify, got.drafter, got.verify_forwards, got.drafter_forwards) == (None, None, 10, 10)
    # an AS2D profile's drafter table holds width 1 alone: SD's wider ingests are left out of the drafter's class
    narrow = linear_costs(0.004, 0.001, 1, "drafter", (0, 64), 1e-5)
    ingests = decode("sd", [("target", 3, 30, 1.0)] * 10 + [("drafter", 1, 30, 1.1)] * 10
                     + [("drafter", 2, 30, 9.9)] * 5)
    got = serial_decode([solo, ingests], TARGET, narrow)
    assert got.drafter == pytest.approx(1.1) and got.drafter_forwards == 10


def _sd_study():
    y = list(range(100, 130))
    drafts = [[y[t + i] if (t + i) % 7 else 1 for i in range(4) if t + i < len(y)] for t in range(len(y))]
    trace = make_trace(y, drafts=drafts, k_max=4, n_prompt=5)
    window = window_for(trace, cap=len(y))
    files = TraceFile(ModelRef("t", "t", 1 << 20), ModelRef("drafter", "d", 1 << 20), {trace.window_id: trace})
    return window, {"drafter": files}, trace


def test_sd_forwards_are_priced_at_their_cells_times_the_factors_and_bulk_equals_the_reference():
    window, traces, trace = _sd_study()
    plain = make_profile()
    serial = SerialDecode(single=1.5, single_forwards=8, verify=1.25, verify_forwards=8, drafter=2.0,
                          drafter_forwards=8)
    factored = dataclasses.replace(plain, drafters={"drafter": dataclasses.replace(plain.drafters["drafter"],
                                                                                   serial=serial)})
    # SpecASR's forwards go through the same pricing (tests/core/test_properties.py: random profiles with factors)
    for config in (SdConfig(width=5, drafter="drafter"), SdConfig(width=3, drafter="drafter"), TargetConfig()):
        before = replay_window(window, trace, plain, config)
        after = replay_window(window, trace, factored, config)
        if isinstance(config, TargetConfig):
            assert (after.v_s, after.d_s) == (before.v_s, before.d_s)  # target-only stays at its cells
        else:
            assert after.d_s == pytest.approx(2.0 * before.d_s)
            assert 1.25 * before.v_s <= after.v_s * (1 + 1e-12) and after.v_s <= 1.5 * before.v_s * (1 + 1e-12)
            assert after.v_s > before.v_s
        rows = replay_study([window], traces, [factored], [config])
        assert rows["decode_s"].iloc[0] == after.decode_s  # to the last bit


def test_a_profile_s_serial_entry_round_trips_and_its_bad_values_are_one_line():
    doc = profile_to_dict(make_profile())
    doc["drafters"][0]["serial"] = {"verify": 1.03, "verify_forwards": 120, "drafter": 0.98, "drafter_forwards": 400}
    profile = profile_from_dict(doc, Path("p.yaml"))
    assert profile.drafters["drafter"].serial == SerialDecode(verify=1.03, verify_forwards=120, drafter=0.98,
                                                              drafter_forwards=400)
    assert profile_from_dict(profile_to_dict(profile), Path("p.yaml")).drafters["drafter"].serial == \
        profile.drafters["drafter"].serial
    for value, expected in ((2.5, "expected a ratio in [0.5, 2], got 2.5"),
                            ("fast", "expected a number or null, got 'fast'")):
        doc["drafters"][0]["serial"]["verify"] = value
        with pytest.raises(SpecbenchError) as error:
            profile_from_dict(doc, Path("p.yaml"))
        assert str(error.value) == f"p.yaml: key 'drafters[0].serial.verify': {expected}"
    doc["drafters"][0]["serial"] = {"verify": 1.03, "verify_forwards": 3}
    with pytest.raises(SpecbenchError, match=r"drafters\[0\]\.serial.*verify_forwards.*a count >= 8"):
        profile_from_dict(doc, Path("p.yaml"))
    doc["drafters"][0]["serial"] = {"verify": 1.03, "verify_forwards": 30, "fast": True}
    with pytest.raises(SpecbenchError, match=r"drafters\[0\]\.serial"):
        profile_from_dict(doc, Path("p.yaml"))
