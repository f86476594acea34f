"""One phone through an adb server: shell commands, a streaming shell, verified pushes.

Every adbutils failure becomes a SpecbenchError naming the serial and what was being
done: a dropped connection surfaces from adbutils as AdbError, EOFError, struct.error or a
socket error, depending on where the stream broke (see /proc of an unplugged phone).
Pushes go to `<dst>.part`, are checked by sha256 on the phone and only then renamed, so a
runner cut short by a dropped transfer is never executed.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import socket
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from specbench.errors import SpecbenchError, stderr_tail
from specbench.extras import require

SERVER_HOST_ENV = "ANDROID_ADB_SERVER_HOST"
SERVER_PORT_ENV = "ANDROID_ADB_SERVER_PORT"
PUSH_ATTEMPTS = 3
STDIN_PACKET_BYTES = 32 * 1024
"""Shell v2 stdin packet size; adbd buffers one packet at a time."""
RECONNECT_WAIT_S = 20.0
"""How long a retry waits for the adb server to see the phone again after a dropped transfer."""


def transfer_errors() -> tuple[type[BaseException], ...]:
    adbutils = require("adbutils", "adb", "the adb device")

    return (adbutils.AdbError, EOFError, struct.error, ConnectionError, socket.timeout, OSError)


def adb_client(socket_timeout_s: float = 30):
    """An adbutils client for the adb server named by ANDROID_ADB_SERVER_HOST/PORT (adb's own
    settings; --adb-host/--adb-port set them), else 127.0.0.1:5037."""
    adbutils = require("adbutils", "adb", "the adb device")
    host = os.environ.get(SERVER_HOST_ENV) or "127.0.0.1"
    port_text = os.environ.get(SERVER_PORT_ENV) or "5037"
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise SpecbenchError(f"{SERVER_PORT_ENV}={port_text!r}: expected a TCP port number (e.g. 5037)")
    return adbutils.AdbClient(host=host, port=int(port_text), socket_timeout=socket_timeout_s)


def server_address() -> str:
    return f"{os.environ.get(SERVER_HOST_ENV) or '127.0.0.1'}:{os.environ.get(SERVER_PORT_ENV) or '5037'}"


def server_running(timeout_s: float = 2.0) -> bool:
    """Whether something listens at the adb server address (adbutils would start a server otherwise)."""
    host = os.environ.get(SERVER_HOST_ENV) or "127.0.0.1"
    port = os.environ.get(SERVER_PORT_ENV) or "5037"
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            return True
    except (OSError, ValueError):
        return False


def list_states(client) -> dict[str, str]:
    """{serial: state} as the adb server lists them ('device', 'offline', 'unauthorized'...)."""
    try:
        return {info.serial: info.state for info in client.list()}
    except transfer_errors() as exc:
        raise SpecbenchError(f"cannot reach the adb server at {server_address()}: {exc or type(exc).__name__}",
                             hint="start it with `adb start-server`, "
                                  "or point --adb-host/--adb-port at a running one") from None


@dataclass
class ShellResult:
    returncode: int
    stdout: str
    stderr: str


class AdbLink:
    """Shell and sync for one serial; `what` strings name the operation in errors."""

    def __init__(self, serial: str, client=None):
        self.serial = serial
        self.client = client or adb_client()
        self._checked = False

    @property
    def device(self):
        return self.client.device(self.serial)

    def check_online(self) -> None:
        """SpecbenchError unless the server lists the serial as 'device' and it has shell_v2."""
        states = list_states(self.client)
        state = states.get(self.serial)
        if state != "device":
            listed = ", ".join(f"{s} ({st})" for s, st in sorted(states.items())) or "none"
            why = "is not connected" if state is None else f"is '{state}'"
            raise SpecbenchError(f"phone {self.serial} {why} (adb server {server_address()} lists: {listed})",
                                 hint="check the cable and `adb devices`; for a network phone `adb connect HOST:PORT`")
        if not self._checked:
            with self.errors("reading its features"):
                features = self.device.get_features()
            if "shell_v2" not in features:
                raise SpecbenchError(f"phone {self.serial} has no shell_v2 (exit codes and stderr): Android 7+ needed")
            self._checked = True

    @contextlib.contextmanager
    def errors(self, what: str) -> Iterator[None]:
        try:
            yield
        except SpecbenchError:
            raise
        except transfer_errors() as exc:
            raise SpecbenchError(f"phone {self.serial}: {what} failed: {_describe(exc)}",
                                 hint="the phone may be unplugged or offline (`specbench devices`); "
                                      "a run continues with --resume") from None

    def shell(self, command: str, what: str, timeout_s: float = 60, check: bool = True) -> ShellResult:
        """Run `command` (already quoted) with shell v2; SpecbenchError on a non-zero exit when `check`."""
        with self.errors(what):
            done = self.device.shell2(command, timeout=timeout_s, v2=True)
        result = ShellResult(done.returncode, done.stdout or "", done.stderr or "")
        if check and result.returncode != 0:
            raise SpecbenchError(f"phone {self.serial}: {what} failed (exit {result.returncode})"
                                 f"{stderr_tail(result.stderr or result.stdout)}")
        return result

    def stream(self, command: str, what: str, on_stdout: Callable[[bytes], None],
               on_stderr: Callable[[bytes], None], timeout_s: float, opened: Callable[[object], None],
               stdin: bytes = b"") -> int:
        """Run `command` with shell v2, feeding it `stdin` (then end of input) and handing output
        chunks over as they arrive; the exit code. `opened(connection)` receives the live
        connection, so that another thread can close it."""
        with self.errors(what):
            conn = self.device.open_transport(timeout=timeout_s)
            try:
                opened(conn)
                conn.send_command(f"shell,v2:{command}")
                conn.check_okay()
                for start in range(0, len(stdin), STDIN_PACKET_BYTES):
                    chunk = stdin[start:start + STDIN_PACKET_BYTES]
                    conn.send(bytes([0]) + len(chunk).to_bytes(4, "little") + chunk)
                conn.send(bytes([4, 0, 0, 0, 0]))  # close stdin: the command sees end of input
                while True:
                    header = conn.read_exact(5)
                    kind, length = header[0], int.from_bytes(header[1:5], "little")
                    data = conn.read_exact(length) if length else b""
                    if kind == 1:
                        on_stdout(data)
                    elif kind == 2:
                        on_stderr(data)
                    elif kind == 3:
                        return data[0] if data else 255
            finally:
                with contextlib.suppress(Exception):  # cancel() may have closed it from another thread
                    conn.close()

    def remote_sha256(self, path: str) -> str | None:
        done = self.shell(f"sha256sum {shlex.quote(path)} 2>/dev/null", f"hashing {path}", check=False)
        digest = done.stdout.split()[0] if done.returncode == 0 and done.stdout.split() else ""
        return digest if len(digest) == 64 else None

    def push_verified(self, local: Path, remote: str, sha256: str, mode: int) -> bool:
        """Make `remote` a copy of `local` (sha256 known): skipped when the phone already has it,
        else pushed to remote.part, verified and renamed. True when bytes were sent."""
        if self.remote_sha256(remote) == sha256:
            return False
        part = remote + ".part"
        size = local.stat().st_size
        last = ""
        for attempt in range(1, PUSH_ATTEMPTS + 1):
            try:
                with self.errors(f"pushing {local.name} ({size} bytes) to {remote}"):
                    self.device.sync.push(local, part, mode=mode)
            except SpecbenchError as exc:
                if "FAIL" in str(exc):  # the phone refused the file: retrying cannot help
                    self.shell(f"rm -f {shlex.quote(part)}", "removing a partial file", check=False)
                    raise SpecbenchError(f"phone {self.serial} refused {local.name} ({size / 1e6:.1f} MB) at {remote}: "
                                         "adb sync FAIL, usually no space left on /data",
                                         hint="free space on the phone (adb shell df /data) and rerun") from None
                last = str(exc)
                self._wait_back()
                continue
            got = self.remote_sha256(part)
            if got == sha256:
                self.shell(f"chmod {mode:o} {shlex.quote(part)} && mv -f {shlex.quote(part)} {shlex.quote(remote)}",
                           f"installing {remote}")
                return True
            last = f"sha256 on the phone {got or 'unreadable'} != {sha256[:12]}… (attempt {attempt})"
        self.shell(f"rm -f {shlex.quote(part)}", "removing a partial file", check=False)
        raise SpecbenchError(f"phone {self.serial}: could not push {local.name} intact after {PUSH_ATTEMPTS} attempts: "
                             f"{last}", hint="check the cable/connection and rerun")

    def _wait_back(self) -> None:
        """After a dropped transfer the adb server reconnects the phone by itself; wait for it."""
        deadline = time.monotonic() + RECONNECT_WAIT_S
        while time.monotonic() < deadline:
            with contextlib.suppress(SpecbenchError):
                if list_states(self.client).get(self.serial) == "device":
                    return
            time.sleep(0.2)


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    if isinstance(exc, (EOFError, struct.error)) or not text:
        return f"the connection closed mid-transfer ({type(exc).__name__})"
    return f"{type(exc).__name__}: {text[:200]}"
