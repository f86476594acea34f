"""The emulated phone's synthetic thermal model (specbench/emuphone/thermal.py): zone temperatures
follow the model's formula over its own ticks, the status steps up at the thresholds, and sysfs and
dumpsys show the capped frequencies while it is hot."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from specbench.emuphone.description import parse_description
from specbench.emuphone.phone import EmulatedPhone, connected_phone, load_description
from specbench.emuphone.thermal import status_at, step
from specbench.errors import SchemaError
from specbench.world.devices import adb_state as st

pytestmark = pytest.mark.serial  # the emulated phone heats with the host's CPU load

HOT_PHONE = Path(__file__).resolve().parents[1] / "data" / "phones" / "x86-hot-emu.yaml"


@pytest.fixture
def hot_phone(adb_server, tmp_path):
    with connected_phone(adb_server, EmulatedPhone(load_description(HOT_PHONE), tmp_path / "phone")) as handle:
        yield handle


def test_status_counts_the_thresholds_reached_and_zones_cool_towards_ambient():
    model = load_description(HOT_PHONE).thermal_model
    assert [status_at(model, t) for t in (37.9, 38.0, 44.0, 60.0)] == [0, 1, 2, 3]
    assert step(model, (40.0,), 0, 1.0) == (40.0 - 0.05 * 10.0,)
    assert step(model, (40.0,), 2, 0.5) == (40.0 + (2.0 * 2 - 0.05 * 10.0) * 0.5,)


def test_a_busy_cpu_heats_the_phone_until_it_throttles(hot_phone):
    phone = hot_phone.phone
    model = phone.description.thermal_model
    # one CPU busy until the model reports status 1; the phone reads its own files meanwhile
    hot_phone.device.shell("sh -c 'while :; do :; done' & p=$!; "
                           "while [ \"$(cat /sys/class/thermal/thermal_zone0/temp)\" -lt 38500 ]; do sleep 0.1; done; "
                           "kill $p")
    trace = phone.thermal.trace()
    # the temperatures are the formula applied tick after tick, from the description's
    temps = trace[0].temps_c
    for before, tick in zip(trace, trace[1:], strict=False):
        assert tick.temps_c == step(model, before.temps_c, tick.busy_cpus, tick.dt_s)
        assert tick.status == status_at(model, max(tick.temps_c))
        temps = tick.temps_c
    assert max(temps) >= 38.0 and trace[-1].status >= 1
    snapshot = st.parse_snapshot(hot_phone.device.shell(st.SNAPSHOT_SCRIPT))
    assert snapshot["thermal"]["status"] >= 1 and snapshot["thermal_c"]["thermal_zone0:BIG"] >= 38.0
    assert [c["scaling_max_freq_khz"] for c in snapshot["clusters"]] == [model.throttled_max_freq_khz] * 2
    assert [c["max_freq_khz"] for c in snapshot["clusters"]] == [1800000, 2800000]  # cpuinfo_max_freq stays
    assert all(c["cur_freq_khz"] <= model.throttled_max_freq_khz for c in snapshot["clusters"])
    # idle, it cools: the status drops back once the hottest zone is below the first threshold
    deadline = time.monotonic() + 60
    while phone.thermal.trace()[-1].status and time.monotonic() < deadline:
        time.sleep(0.2)
    assert phone.thermal.trace()[-1].status == 0
    # read from the host: a shell in the phone reading the files is itself a busy CPU that can heat a zone just
    # below the threshold back over it (a throttled cap read over adb once, in a serial run of the suite)
    policies = [f"/sys/devices/system/cpu/cpufreq/policy{c.cpus[0]}/scaling_max_freq"
                for c in phone.description.clusters]
    assert [int(phone.sandbox.host_path(p).read_text()) for p in policies] == [1800000, 2800000]


@pytest.mark.parametrize(("change", "key", "expected"), [
    ({"throttle_at_c": [44.0, 38.0]}, "thermal.model.throttle_at_c", "1 to 6 ascending temperatures"),
    ({"throttle_at_c": []}, "thermal.model.throttle_at_c", "1 to 6 ascending temperatures"),
    ({"cool_rate_per_s": -1}, "thermal.model.cool_rate_per_s", "a rate in 0..100 per second"),
    ({"throttled_max_freq_khz": 0}, "thermal.model.throttled_max_freq_khz", "a frequency in kHz > 0"),
    ({"interval_s": 0.001}, "thermal.model.interval_s", "seconds in 0.01..10"),
])
def test_bad_thermal_models_are_refused_naming_the_key(change, key, expected):
    raw = yaml.safe_load(HOT_PHONE.read_text())
    raw["thermal"]["model"] |= change
    with pytest.raises(SchemaError) as error:
        parse_description(raw, source="hot.yaml")
    assert key in str(error.value) and expected in str(error.value) and "\n" not in str(error.value)
