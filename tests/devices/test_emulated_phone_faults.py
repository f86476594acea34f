"""Injected faults surface through the real adb server and adbutils as they would with hardware."""

from __future__ import annotations

import os
import struct
import time

import pytest

from specbench.emuphone.phone import device_state, wait_for_state

adbutils = pytest.importorskip("adbutils")
AdbError = adbutils.AdbError

WORK = "/data/local/tmp/specbench"

# what an adbutils call may raise when the phone goes away mid-call (a frame cut short: struct.error too)
TRANSFER_ERRORS = (AdbError, struct.error, EOFError, ConnectionError)


def test_packet_delay_slows_but_completes(emulated_phone):
    emulated_phone.phone.set_packet_delay(0.02)
    start = time.monotonic()
    assert emulated_phone.device.shell2("echo slow", v2=True).stdout == "slow\n"
    assert time.monotonic() - start >= 0.04  # OKAY + WRTE(s), each delayed


def test_command_delay_slows_but_completes(emulated_phone):
    emulated_phone.phone.set_command_delay(0.4)
    start = time.monotonic()
    result = emulated_phone.device.shell2("echo late", v2=True)
    assert (result.returncode, result.stdout) == (0, "late\n")
    assert time.monotonic() - start >= 0.4


def test_injected_exit_code_then_normal_again(emulated_phone):
    serial, phone, client = emulated_phone
    d = client.device(serial)
    phone.fail_next_commands(42, match="runner")
    assert d.shell2("echo untouched", v2=True).returncode == 0  # does not match
    failed = d.shell2("./runner --bench", v2=True)
    assert failed.returncode == 42 and "injected failure" in failed.stderr
    assert d.shell2("echo ./runner ok", v2=True).returncode == 0  # count=1 was used up
    assert "./runner --bench" in phone.commands


def test_dropped_pull_raises_instead_of_silent_short_file(emulated_phone, tmp_path):
    serial, phone, client = emulated_phone
    d = client.device(serial)
    payload = os.urandom(1024 * 1024)
    d.sync.push(payload, f"{WORK}/model.bin")
    phone.drop_next_transfer(300_000, service_prefix="sync:", how="connection")
    local = tmp_path / "model.bin"
    with pytest.raises(TRANSFER_ERRORS):
        d.sync.pull(f"{WORK}/model.bin", str(local))
    assert not local.exists() or local.stat().st_size < len(payload)
    # the adb server reconnects on its own, as after a USB glitch
    assert wait_for_state(client, serial, "device", timeout_s=15)
    assert client.device(serial).sync.read_bytes(f"{WORK}/model.bin") == payload


def test_dropped_stream_pull_raises(emulated_phone, tmp_path):
    d = emulated_phone.device
    d.sync.push(os.urandom(500_000), f"{WORK}/w.bin")
    emulated_phone.phone.drop_next_transfer(100_000, how="stream")
    with pytest.raises(TRANSFER_ERRORS):
        d.sync.read_bytes(f"{WORK}/w.bin")
    assert d.shell("echo still-here") == "still-here"  # only that stream died


def test_dropped_push_leaves_no_file(emulated_phone):
    serial, phone, client = emulated_phone
    phone.drop_next_transfer(200_000, how="connection")
    with pytest.raises(TRANSFER_ERRORS + (OSError,)):
        client.device(serial).sync.push(os.urandom(2 * 1024 * 1024), f"{WORK}/partial.bin")
    assert wait_for_state(client, serial, "device", timeout_s=15)
    assert not client.device(serial).sync.exists(f"{WORK}/partial.bin")


@pytest.mark.parametrize("mode", ["refuse", "silent"])
def test_offline_then_back_online(emulated_phone, mode):
    serial, phone, client = emulated_phone
    phone.go_offline(mode)
    assert wait_for_state(client, serial, "offline", timeout_s=5)
    with pytest.raises(AdbError, match="offline"):
        client.device(serial).shell("echo hi")
    phone.go_online()
    assert wait_for_state(client, serial, "device", timeout_s=15)
    assert client.device(serial).shell("echo back") == "back"


def test_no_space_left_fails_push_clearly(emulated_phone, adb_server, tmp_path):
    serial, phone, client = emulated_phone
    d = client.device(serial)
    phone.set_free_space(1_000_000)
    with pytest.raises(AdbError, match="FAIL"):  # adbutils drops FAIL's message
        d.sync.push(os.urandom(3 * 1024 * 1024), f"{WORK}/big.bin")
    assert not d.sync.exists(f"{WORK}/big.bin")
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(2 * 1024 * 1024))
    cli = adb_server.adb("-s", serial, "push", str(big), f"{WORK}/big.bin", check=False)
    assert cli.returncode != 0 and "No space left on device" in cli.stderr
    assert d.sync.push(b"small", f"{WORK}/small.txt") == 5  # what fits still goes
    assert device_state(client, serial) == "device"


def test_wrong_abi(emulated_phone):
    emulated_phone.phone.set_abi("x86_64")
    d = emulated_phone.device
    assert d.getprop("ro.product.cpu.abi") == "x86_64"
    assert d.getprop("ro.product.cpu.abilist") == "x86_64"


def test_thermal_and_battery_change_while_running(emulated_phone):
    phone = emulated_phone.phone
    phone.set_thermal(status=3, temps_c={"BIG": 78.25})
    phone.set_battery(level_percent=20, charging="none")
    d = emulated_phone.device
    assert "Thermal Status: 3" in d.shell("dumpsys thermalservice")
    assert d.shell("cat /sys/class/thermal/thermal_zone0/temp") == "78250"
    assert (d.battery().level, d.battery().usb_powered) == (20, False)
