"""Fixtures: a private adb server (per session) and an emulated phone connected to it (per test).

    def test_model(emulated_phone):
        serial, phone, client = emulated_phone
        assert client.device(serial).getprop("ro.product.model") == phone.description.model

`emulated_phone.device` is the adbutils device; `phone` (an EmulatedPhone) takes faults.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from specbench.devices.emulated_phone import (
    EmulatedPhone, connected_phone, load_description, private_adb_server)

PHONES_DIR = Path(__file__).resolve().parents[1] / "data" / "phones"


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
