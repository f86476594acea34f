"""core/energy.py against integrals worked by hand: conventions, plausibility, sample-and-hold, idle."""

from __future__ import annotations

import pytest

from specbench.core.energy import (
    Convention,
    PowerTrace,
    check_plausible,
    detect_convention,
    idle_power,
    parse_convention,
    request_energy,
)
from specbench.errors import SpecbenchError

UA_UV = Convention("uA", "uV", "discharging_negative")


def test_sample_and_hold_integral_by_hand():
    # 1 A at 4 V (4 W) from t = 0 s, 2 A (8 W) from t = 1 s, 0.5 A (2 W) from t = 3 s
    samples = [[0, -1_000_000, 4_000_000], [1_000_000, -2_000_000, 4_000_000], [3_000_000, -500_000, 4_000_000]]
    trace = PowerTrace.of(samples, UA_UV)
    assert list(trace.watts) == [4.0, 8.0, 2.0]
    # [0.5, 3.5] s: 0.5 s at 4 W + 2 s at 8 W + 0.5 s at 2 W = 2 + 16 + 1 J
    assert trace.energy_j(500_000, 3_500_000) == pytest.approx(19.0, rel=1e-12)
    # within one hold: 0.25 s at 8 W
    assert trace.energy_j(1_250_000, 1_500_000) == pytest.approx(2.0, rel=1e-12)
    # past the last sample the last value holds
    assert trace.energy_j(3_000_000, 5_000_000) == pytest.approx(4.0, rel=1e-12)
    assert trace.count(500_000, 3_500_000) == 2
    assert trace.energy_j(-1, 10) is None  # no sample at or before the start: not covered


def test_idle_subtraction_by_hand():
    # idle 1 W over [0, 2] s, then a request drawing 5 W over [2, 4] s
    trace = PowerTrace.of([[0, 250, 4000], [1_000_000, 250, 4000], [2_000_000, 1250, 4000]],
                          Convention("mA", "mV", "discharging_positive"))
    idle = idle_power(trace, 0, 2_000_000)
    assert idle is not None and (idle.watts, idle.samples, idle.seconds) == (pytest.approx(1.0), 3, 2.0)
    found = request_energy(trace, idle, 2_000_000, 4_000_000)
    assert found is not None
    assert (found.energy_j, found.energy_above_idle_j, found.samples) == (pytest.approx(10.0), pytest.approx(8.0), 1)
    assert request_energy(trace, None, 2_000_000, 4_000_000).energy_above_idle_j is None


@pytest.mark.parametrize("current, voltage, status, expected", [
    ([-410_000, -390_000], [3_950_000, 3_940_000], "Discharging", "uA,uV,discharging_negative"),
    ([410, 390], [3950, 3940], "Discharging", "mA,mV,discharging_positive"),
    ([500_000, 600_000], [4_100_000], "Charging", "uA,uV,discharging_negative"),
    ([-150], [3_950_000], "Discharging", "mA,uV,discharging_negative"),
])
def test_convention_detected_from_magnitudes_and_status(current, voltage, status, expected):
    convention = detect_convention(current, voltage, status)
    assert convention.text == expected and convention.detected


@pytest.mark.parametrize("status, current", [("Full", [-400_000]), ("Discharging", [-400_000, 400_000])])
def test_undetectable_sign_names_the_flag(status, current):
    with pytest.raises(SpecbenchError, match="cannot detect the current's sign") as info:
        detect_convention(current, [3_950_000] * len(current), status)
    assert "--energy-convention" in info.value.hint


def test_ma_declared_as_ua_is_implausible_in_one_line():
    declared = parse_convention("uA,uV,discharging_negative")
    with pytest.raises(SpecbenchError) as info:
        check_plausible(declared, [-150, -550], [3_950_000, 3_950_000])
    text = str(info.value)
    assert "\n" not in text
    assert text.startswith("--energy-convention uA,uV,discharging_negative (declared): median battery power 0.001382 W")
    assert "current_now -350" in text and "0.02..40.0 W" in text
    assert text.endswith("the unit or sign is wrong; mA,uV,discharging_negative gives 1.38 W")
    assert check_plausible(Convention("mA", "uV", "discharging_negative"), [-150, -550], [3_950_000] * 2) == \
        pytest.approx(0.35 * 3.95)


def test_wrong_sign_is_implausible():
    with pytest.raises(SpecbenchError, match="median battery power -1.58 W"):
        check_plausible(Convention("uA", "uV", "discharging_positive"), [-400_000], [3_950_000])


@pytest.mark.parametrize("text", ["uA,uV", "A,uV,discharging_negative", "uA,uV,negative", ""])
def test_bad_convention_names_the_flag(text):
    with pytest.raises(SpecbenchError, match=r"^--energy-convention .*expected CURRENT,VOLTAGE,SIGN"):
        parse_convention(text)


def test_the_manifest_counts_the_samples_flushed_after_the_last_attribution(tmp_path):
    """The runner's last batch can arrive after the last window's records were attributed (a busy
    host delays it): the manifest still counts every sample the samples file holds."""
    from specbench.world.native_energy import EnergyLog, EnergySettings

    log = EnergyLog(EnergySettings(interval_ms=20, idle_s=0.0), tmp_path)
    status = {"event": "energy", "source": "battery", "status": "Discharging"}
    batch = [[t, -500_000, 3_900_000] for t in range(0, 200_000, 20_000)]
    late = [[t, -500_000, 3_900_000] for t in range(200_000, 260_000, 20_000)]
    assert log.take(status)
    assert log.take({"result": {"kind": "energy", "samples": batch, "status": "Discharging"}})
    records = [{"start_us": 10_000, "end_us": 150_000}]
    assert log.covers(records)
    log.attach(records)
    assert log.take({"result": {"kind": "energy", "samples": late, "status": "Discharging"}})
    assert log.finish().samples == len(batch) + len(late) == 13
