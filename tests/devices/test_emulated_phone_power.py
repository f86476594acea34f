"""The emulated phone's synthetic power supply (specbench/emuphone/power.py): what adb and
processes in the phone read equals the model's formula, idle and under load."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from specbench.emuphone.description import parse_description
from specbench.emuphone.phone import EmulatedPhone, connected_phone, load_description
from specbench.emuphone.power import current_now_value
from specbench.errors import SchemaError

BATTERY_PHONE = Path(__file__).resolve().parents[1] / "data" / "phones" / "x86-battery-emu.yaml"
SUPPLY = "/sys/class/power_supply/battery"


@pytest.fixture
def battery_phone(adb_server, tmp_path):
    """The battery phone without the runner (conftest's x86_battery_phone has it)."""
    with connected_phone(adb_server, EmulatedPhone(load_description(BATTERY_PHONE), tmp_path / "phone")) as handle:
        yield handle


# serial: on a host loaded by a test beside it, a power tick counted a busy CPU (likely the adb read across it)
# (busy CPUs {0, 1} in a fresh-clone run on two workers)
@pytest.mark.serial
def test_idle_phone_shows_the_idle_draw_over_adb(battery_phone):
    phone = battery_phone.phone
    model, battery = phone.description.battery.power_model, phone.description.battery
    time.sleep(3 * model.interval_s)  # a few ticks with nothing running
    current, voltage, status = battery_phone.device.shell(
        f"cat {SUPPLY}/current_now {SUPPLY}/voltage_now {SUPPLY}/status").split()
    assert (int(current), int(voltage), status) == (-model.idle_ua, battery.voltage_uv, "Discharging")
    ticks = phone.power.trace()
    assert len(ticks) >= 3 and {t.busy_cpus for t in ticks} == {0} and {t.draw_ua for t in ticks} == {model.idle_ua}
    start, end = ticks[0].time_s, ticks[-1].time_s
    assert phone.power.energy_j(start, end) == pytest.approx(0.15 * 3.95 * (end - start), rel=1e-12)


def test_busy_cpu_raises_the_draw_a_process_in_the_phone_reads(battery_phone):
    phone = battery_phone.phone
    model = phone.description.battery.power_model
    before_s = time.monotonic()
    # one CPU busy for a second; a reader in the sandbox opens the file by its own path meanwhile
    output = battery_phone.device.shell(
        "sh -c 'while :; do :; done' & sleep 1; "
        "cat $EMUPHONE_ROOT/sys/class/power_supply/battery/current_now; kill $!")
    after_s = time.monotonic()
    busy = [t for t in phone.power.trace() if before_s <= t.time_s <= after_s]
    assert all(t.draw_ua == model.idle_ua + model.per_busy_cpu_ua * t.busy_cpus for t in busy)
    # the loop is runnable at every tick of that second (the shell around it, now and then)
    assert sum(t.busy_cpus >= 1 for t in busy) >= 5  # of about 10 ticks
    # the value read is the formula at a tick of that second, with the loop's CPU in it
    assert int(output.strip()) in {current_now_value(model, t.draw_ua) for t in busy}
    assert int(output.strip()) <= -(model.idle_ua + model.per_busy_cpu_ua)
    time.sleep(3 * model.interval_s)  # the loop is gone: back to idle at the next ticks
    assert phone.power.trace()[-1].busy_cpus == 0
    # read from the host: a shell in the phone reading the file is itself a busy CPU at a tick
    # (-550000 read over adb once, in a fresh-clone run on two workers)
    assert int(phone.sandbox.host_path(f"{SUPPLY}/current_now").read_text()) == -model.idle_ua


def test_sign_and_unit_follow_the_description(tmp_path):
    raw = yaml.safe_load(BATTERY_PHONE.read_text())
    raw["battery"]["power_model"].update(sign="discharging_positive", unit="mA")
    with EmulatedPhone(parse_description(raw), tmp_path / "phone") as phone:
        current = phone.sandbox.host_path(f"{SUPPLY}/current_now").read_text()
        voltage = phone.sandbox.host_path(f"{SUPPLY}/voltage_now").read_text()
    assert (current, voltage) == ("150\n", "3950000\n")  # 150000 µA shown as +150 mA; µV unchanged


@pytest.mark.parametrize("key, value, expected", [
    ("sign", "negative", "one of discharging_negative, discharging_positive"),
    ("unit", "A", "one of uA, mA"),
    ("idle_ua", -1, "a draw in µA >= 0"),
    ("interval_s", 0, "seconds in 0.01..10"),
])
def test_bad_power_model_is_one_line_naming_the_key(key, value, expected):
    raw = yaml.safe_load(BATTERY_PHONE.read_text())
    raw["battery"]["power_model"][key] = value
    with pytest.raises(SchemaError) as info:
        parse_description(raw, source="phone.yaml")
    assert str(info.value).splitlines()[0].startswith(
        f"phone.yaml: key 'battery.power_model.{key}': expected {expected}, got ")


def test_a_voltage_change_shows_from_the_next_tick(tmp_path):
    with EmulatedPhone(load_description(BATTERY_PHONE), tmp_path / "phone") as phone:
        phone.set_battery(voltage_uv=3_700_000)
        time.sleep(3 * phone.description.battery.power_model.interval_s)
        voltage = phone.sandbox.host_path(f"{SUPPLY}/voltage_now").read_text()
        ticks = phone.power.trace()
    assert voltage == "3700000\n" and (ticks[0].voltage_uv, ticks[-1].voltage_uv) == (3_950_000, 3_700_000)
