"""A private adb server for tests: its own port, its own HOME, stopped with kill-server.

The default server (port 5037) belongs to the user and may be talking to real phones;
tests never touch it. adbutils' wheel bundles an adb binary (`adbutils.adb_path()`), so no
Android SDK is needed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from specbench.emuphone.server import RESERVED_PORTS
from specbench.errors import SpecbenchError
from specbench.extras import require

if TYPE_CHECKING:
    import adbutils

    from specbench.emuphone.server import EmulatedPhone

DEFAULT_SERVER_PORT = 5037


@dataclass(frozen=True)
class AdbServer:
    """A running private adb server."""

    adb_path: str
    port: int
    home: Path
    """The temporary HOME it runs with (adb writes ~/.android/adbkey there)."""
    owns_home: bool = False
    """True when start_adb_server made `home` and stop_adb_server should remove it."""

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("ANDROID_", "ADB_"))}  # no vendor keys, no other server
        env.update({"HOME": str(self.home), "ANDROID_ADB_SERVER_PORT": str(self.port),
                    "ADB_MDNS": "0", "ADB_MDNS_AUTO_CONNECT": "0",
                    "ADB_LIBUSB": "0"})  # libusb start-up costs 3 s; no USB phones here anyway
        return env

    def adb(self, *args: str, timeout_s: float = 30, check: bool = True) -> subprocess.CompletedProcess:
        """Run the adb command line against this server (`adb -P PORT ARGS`)."""
        result = subprocess.run([self.adb_path, "-P", str(self.port), *args], env=self.env(),
                                capture_output=True, text=True, timeout=timeout_s)
        if check and result.returncode != 0:
            raise SpecbenchError(f"adb {' '.join(args)} failed ({result.returncode}): "
                                 f"{(result.stderr or result.stdout).strip()}")
        return result

    def client(self, socket_timeout_s: float = 10) -> adbutils.AdbClient:
        adbutils = require("adbutils", "adb", "the emulated phone's adb server")

        return adbutils.AdbClient(host="127.0.0.1", port=self.port, socket_timeout=socket_timeout_s)


class PhoneHandle(NamedTuple):
    """What the test fixture yields: unpack as `serial, phone, client = handle`."""

    serial: str
    phone: EmulatedPhone
    client: adbutils.AdbClient

    @property
    def device(self) -> adbutils.AdbDevice:
        return self.client.device(self.serial)


def free_port(avoid: range = RESERVED_PORTS) -> int:
    """A currently free loopback TCP port outside `avoid` and 5037."""
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if port not in avoid and port != DEFAULT_SERVER_PORT:
            return port
    raise SpecbenchError("found no free loopback port")


def bundled_adb_path() -> str:
    """The adb binary adbutils would use (ADBUTILS_ADB_PATH, PATH, then its bundled one)."""
    return require("adbutils", "adb", "the emulated phone's adb server").adb_path()


def start_adb_server(port: int | None = None, home: Path | None = None,
                     adb_path: str | None = None) -> AdbServer:
    """Start a private adb server and wait until it answers."""
    if port in RESERVED_PORTS or port == DEFAULT_SERVER_PORT:
        raise SpecbenchError(f"port {port} is not private", hint="leave port unset to pick a free one")
    server = AdbServer(adb_path=adb_path or bundled_adb_path(), port=port or free_port(),
                       home=Path(home) if home else Path(tempfile.mkdtemp(prefix="specbench-adb-home-")),
                       owns_home=home is None)
    server.home.mkdir(parents=True, exist_ok=True)
    server.adb("start-server")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            server.client().server_version()
            return server
        time.sleep(0.1)
    stop_adb_server(server)
    raise SpecbenchError(f"the adb server on port {server.port} did not answer within 10 s")


def stop_adb_server(server: AdbServer) -> None:
    """kill-server; never raises (it runs in teardown)."""
    with contextlib.suppress(Exception):
        server.adb("kill-server", timeout_s=10, check=False)
    if server.owns_home:
        shutil.rmtree(server.home, ignore_errors=True)


def connect_phone(server: AdbServer, phone: EmulatedPhone, timeout_s: float = 15) -> PhoneHandle:
    """`adb connect` the phone and wait until the server lists it as `device`."""
    client = server.client()
    deadline = time.monotonic() + timeout_s
    last = ""
    while time.monotonic() < deadline:
        last = client.connect(phone.serial, timeout=timeout_s)
        if wait_for_state(client, phone.serial, "device", timeout_s=min(3.0, deadline - time.monotonic())):
            return PhoneHandle(phone.serial, phone, client)
    raise SpecbenchError(f"{phone.serial} did not come up as 'device' within {timeout_s} s (adb said: {last})")


def device_state(client: adbutils.AdbClient, serial: str) -> str | None:
    """The server's state for `serial` (device, offline, ...), or None if it is not listed."""
    for info in client.list():
        if info.serial == serial:
            return info.state
    return None


def wait_for_state(client: adbutils.AdbClient, serial: str, state: str | None, timeout_s: float) -> bool:
    """Poll until `serial` is in `state` (None: not listed); False on timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        if device_state(client, serial) == state:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


@contextlib.contextmanager
def private_adb_server(**kwargs) -> Iterator[AdbServer]:
    server = start_adb_server(**kwargs)
    try:
        yield server
    finally:
        stop_adb_server(server)


@contextlib.contextmanager
def connected_phone(server: AdbServer, phone: EmulatedPhone, timeout_s: float = 15) -> Iterator[PhoneHandle]:
    """Start `phone`, connect it to `server`, and on exit disconnect and stop it."""
    with phone:
        handle = connect_phone(server, phone, timeout_s)
        try:
            yield handle
        finally:
            with contextlib.suppress(Exception):
                handle.client.disconnect(phone.serial)
