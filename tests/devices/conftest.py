"""Fixtures: a private adb server (per session) and an emulated phone connected to it (per test).

    def test_model(emulated_phone):
        serial, phone, client = emulated_phone
        assert client.device(serial).getprop("ro.product.model") == phone.description.model

`emulated_phone.device` is the adbutils device; `phone` (an EmulatedPhone) takes faults.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from specbench.emuphone.phone import EmulatedPhone, connected_phone, load_description, private_adb_server
from tests.devices.phones import PHONES_DIR, connected


@pytest.fixture(scope="session")
def adb_server():
    """A private adb server: bundled adb binary, free port (not 5037/5555-5585), temporary HOME."""
    pytest.importorskip("adbutils", reason="the emulated-phone tests drive a real adb server through adbutils")
    with private_adb_server() as server:
        yield server


@pytest.fixture(scope="session")
def phone_description():
    return load_description(PHONES_DIR / "pixel-emu.yaml")


@pytest.fixture
def emulated_phone(adb_server, phone_description, tmp_path):
    """(serial, EmulatedPhone, adbutils.AdbClient), connected and in state 'device'."""
    phone = EmulatedPhone(phone_description, tmp_path / "phone")
    with connected_phone(adb_server, phone) as handle:
        yield handle


# --- phones that run the real runner (tests of AdbDevice and the CLI on phones) ---


@pytest.fixture
def x86_phone(adb_server, runner, tmp_path, monkeypatch):
    """An x86_64 emulated phone (CPUs 0 and 1) connected to the private server, which
    ANDROID_ADB_SERVER_PORT names; the host's runner executes in it."""
    with connected(adb_server, "x86-emu.yaml", tmp_path / "phone", monkeypatch) as handle:
        yield handle


@pytest.fixture
def x86_battery_phone(adb_server, runner, tmp_path, monkeypatch):
    """The x86_64 phone on battery: current_now follows its CPU load (emuphone/power.py)."""
    with connected(adb_server, "x86-battery-emu.yaml", tmp_path / "phone", monkeypatch) as handle:
        yield handle


@pytest.fixture
def x86_phones(adb_server, runner, tmp_path, monkeypatch):
    """Two such phones at once."""
    with connected(adb_server, "x86-emu.yaml", tmp_path / "phone1", monkeypatch) as one, \
            connected(adb_server, "x86-emu.yaml", tmp_path / "phone2", monkeypatch) as two:
        yield one, two


@pytest.fixture
def arm_phone(adb_server, tmp_path, monkeypatch):
    """An arm64-v8a emulated phone; the aarch64 runner runs in it under qemu-aarch64."""
    with connected(adb_server, "arm-emu.yaml", tmp_path / "phone", monkeypatch) as handle:
        yield handle


AARCH64 = Path(__file__).resolve().parents[2] / "runners" / "aarch64-linux" / "specbench-runner"


@pytest.fixture
def aarch64_runner():
    """The static aarch64 runner the arm phone runs under qemu-aarch64, or a skip saying how to build it."""
    import shutil

    if not AARCH64.exists():
        pytest.skip(f"{AARCH64} not built: scripts/build-runner --aarch64-linux --no-mtmd (needs g++-aarch64-linux-gnu)")
    if not (shutil.which("qemu-aarch64-static") or shutil.which("qemu-aarch64")):
        pytest.skip("qemu-aarch64 not installed (apt-get install qemu-user-static; `make deps`)")
    return AARCH64
