"""The emulated phones' descriptions (tests/data/phones) and one connected to a test's adb server."""

from __future__ import annotations

from pathlib import Path

from specbench.emuphone.phone import EmulatedPhone, connected_phone, load_description

PHONES_DIR = Path(__file__).resolve().parents[1] / "data" / "phones"


def connected(adb_server, name: str, sandbox: Path, monkeypatch):
    """The phone described by PHONES_DIR/`name`, sandboxed in `sandbox`, connected to `adb_server`, which
    ANDROID_ADB_SERVER_PORT names for the test (what --adb-port sets)."""
    monkeypatch.setenv("ANDROID_ADB_SERVER_PORT", str(adb_server.port))
    monkeypatch.delenv("ANDROID_ADB_SERVER_HOST", raising=False)
    return connected_phone(adb_server, EmulatedPhone(load_description(PHONES_DIR / name), sandbox))
