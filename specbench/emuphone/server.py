"""EmulatedPhone: a TCP "device" an adb server can `adb connect` to, run on a background loop.

All public methods are called from ordinary (test) threads; the phone itself runs on an
asyncio loop in its own daemon thread. Faults take effect for packets, commands and
connections from the moment the method returns.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from dataclasses import replace
from pathlib import Path

from specbench.emuphone.description import PhoneDescription
from specbench.emuphone.faults import DropFault, ExitFault, Faults
from specbench.emuphone.filesync import run_sync
from specbench.emuphone.load import LoadModel, LoadSampler
from specbench.emuphone.power import PowerSupply
from specbench.emuphone.sandbox import Sandbox
from specbench.emuphone.shell import parse_shell_service, run_shell
from specbench.emuphone.thermal import PhoneThermal
from specbench.emuphone.transport import Connection, ServiceRunner
from specbench.errors import SpecbenchError

log = logging.getLogger(__name__)

FEATURES = ("shell_v2", "fixed_push_mkdir")
"""Advertised in the CNXN banner. Only what is implemented: advertising stat_v2 or
delayed_ack without implementing them breaks `adb push` [measured]."""

RESERVED_PORTS = range(5555, 5586)
"""The adb server claims these as emulator ports on its own."""

OFFLINE_MODES = ("refuse", "silent")


class EmulatedPhone:
    """One emulated phone, served on loopback. Use as a context manager or start()/stop()."""

    def __init__(self, description: PhoneDescription, sandbox_dir: str | Path,
                 host: str = "127.0.0.1", port: int = 0):
        if port in RESERVED_PORTS:
            raise SpecbenchError(f"port {port} is in 5555-5585, which the adb server claims as an emulator",
                                 hint="choose another port, or 0 for a free one")
        self.sandbox = Sandbox(sandbox_dir)
        self.faults = Faults()
        self.host = host
        self._requested_port = port
        self.port = 0
        self._description = description
        self._lock = threading.Lock()
        self._capacity_bytes = 0
        self._commands: list[str] = []
        self._sync_requests: list[tuple[str, str]] = []
        self._offline: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[Connection] = set()
        self._parked: set[asyncio.StreamWriter] = set()
        self.power: PowerSupply | None = None
        """The synthetic power supply while running, when the description has battery.power_model."""
        self.thermal: PhoneThermal | None = None
        """The synthetic thermal model while running, when the description has thermal.model."""
        self._load: LoadSampler | None = None

    # --- lifecycle ---
    def start(self) -> EmulatedPhone:
        if self._thread is not None:
            return self
        self.sandbox.materialize(self._description)
        self._capacity_bytes = self._description.free_bytes + self.sandbox.used_bytes()
        models: list[LoadModel] = []
        if self._description.battery.power_model is not None:
            self.power = PowerSupply(self._description, self.sandbox.root)
            self.power.start()
            models.append(self.power)
        if self._description.thermal_model is not None:
            self.thermal = PhoneThermal(self._description, self.sandbox)
            self.thermal.start()
            models.append(self.thermal)
        self._load = LoadSampler(self.sandbox.root)  # one count of the load feeds both models
        self._load.start(models)
        self._loop = asyncio.new_event_loop()
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run_loop, args=(ready,), name="emuphone", daemon=True)
        self._thread.start()
        ready.wait()
        try:
            self._call(self._listen(self._requested_port))
        except OSError as exc:
            self.stop()
            raise SpecbenchError(f"cannot listen on {self.host}:{self._requested_port}: {exc.strerror}",
                                 hint="choose another --port, or 0 for a free one") from exc
        except BaseException:
            self.stop()
            raise
        log.info("emulated phone %s serving %s", self.serial, self.sandbox.root)
        return self

    def stop(self) -> None:
        """Close every connection, kill running commands and stop the loop thread."""
        if self._load is not None:
            self._load.stop()
        if self._thread is None:
            return
        loop = self._event_loop()
        try:
            self._call(self._shutdown())
        finally:
            loop.call_soon_threadsafe(loop.stop)
            self._thread.join(timeout=10)
            loop.close()
            self._thread = None

    def __enter__(self) -> EmulatedPhone:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def serial(self) -> str:
        """The serial the adb server lists after `adb connect`."""
        return f"{self.host}:{self.port}"

    @property
    def description(self) -> PhoneDescription:
        return self._description

    # --- faults ---
    def set_packet_delay(self, seconds: float) -> None:
        """Sleep `seconds` before every packet the phone sends (a slow USB link)."""
        self.faults.packet_delay_s = float(seconds)

    def set_command_delay(self, seconds: float) -> None:
        """Sleep `seconds` before every opened service starts (each command, each sync session)."""
        self.faults.command_delay_s = float(seconds)

    def drop_next_transfer(self, after_bytes: int, service_prefix: str = "sync:", how: str = "connection") -> None:
        """Cut the next stream whose service starts with `service_prefix` after `after_bytes`
        bytes. how="connection" closes the TCP connection (the adb server reconnects by
        itself); how="stream" closes only that stream."""
        self.faults.add_drop(DropFault(after_bytes, service_prefix, how))

    def fail_next_commands(self, exit_code: int, count: int = 1, match: str | None = None) -> None:
        """The next `count` shell commands (containing `match`, if given) do not run: they
        print a line on stderr and exit with `exit_code`."""
        self.faults.add_exits(ExitFault(exit_code, match), count)

    def go_offline(self, mode: str = "refuse") -> None:
        """Close every connection and keep the adb server out until go_online().
        mode="refuse": the port refuses connections (an unplugged phone);
        mode="silent": connections are accepted but never answered (a hung adbd)."""
        if mode not in OFFLINE_MODES:
            raise SpecbenchError(f"unknown offline mode {mode!r}; available: {', '.join(OFFLINE_MODES)}")
        self._offline = mode
        self._call(self._set_offline(mode))

    def go_online(self) -> None:
        """Accept and answer connections again; the adb server reconnects within seconds."""
        self._offline = None
        self._call(self._set_online())

    def set_free_space(self, free_bytes: int) -> None:
        """From now on, pushes fail with "No space left on device" once `free_bytes` more are stored."""
        with self._lock:
            self._capacity_bytes = free_bytes + self.sandbox.used_bytes()

    def set_abi(self, abi: str) -> None:
        """Claim a (possibly wrong) ABI: ro.product.cpu.abi and abilist become just `abi`."""
        self.update_description(self._description.with_abi(abi))

    def set_thermal(self, status: int | None = None, temps_c: dict[str, float] | None = None) -> None:
        """Change the thermal status and/or zone temperatures (by zone type), as a warming phone."""
        temps_c = temps_c or {}
        unknown = set(temps_c) - {z.type for z in self._description.thermal_zones}
        if unknown:
            raise SpecbenchError(f"unknown thermal zone(s) {sorted(unknown)}; available: "
                                 + ", ".join(z.type for z in self._description.thermal_zones))
        zones = tuple(replace(z, temp_c=temps_c.get(z.type, z.temp_c)) for z in self._description.thermal_zones)
        self.update_description(replace(
            self._description, thermal_zones=zones,
            thermal_status=self._description.thermal_status if status is None else status))

    def set_battery(self, **changes) -> None:
        """Change battery fields (level_percent, temp_c, charging, voltage_uv, current_ua)."""
        self.update_description(replace(self._description, battery=replace(self._description.battery, **changes)))

    def update_description(self, description: PhoneDescription) -> None:
        """Answer getprop, sysfs and dumpsys from `description` from now on."""
        self._description = description
        self.sandbox.materialize(description)
        if self.power is not None:
            self.power.set_description(description)
        if self.thermal is not None:
            self.thermal.set_description(description)

    # --- what happened ---
    @property
    def commands(self) -> list[str]:
        """Every shell/exec command received so far, as sent (before path rewriting)."""
        with self._lock:
            return list(self._commands)

    @property
    def sync_requests(self) -> list[tuple[str, str]]:
        """Every sync request so far, as (STAT|LIST|SEND|RECV, device path[,mode])."""
        with self._lock:
            return list(self._sync_requests)

    # --- used by the services ---
    def banner(self) -> bytes:
        d = self._description
        return (f"device::ro.product.name={d.device};ro.product.model={d.model};"
                f"ro.product.device={d.device};features={','.join(FEATURES)}").encode()

    def free_bytes(self) -> int:
        with self._lock:
            return max(0, self._capacity_bytes - self.sandbox.used_bytes())

    def record_command(self, command: str) -> None:
        with self._lock:
            self._commands.append(command)

    def record_sync(self, request: str, path: str) -> None:
        with self._lock:
            self._sync_requests.append((request, path))

    def open_service(self, service: str) -> ServiceRunner | None:
        """The coroutine that serves `service`, or None to refuse it."""
        shell = parse_shell_service(service)
        if shell is not None:
            v2, unmap, command = shell
            return self._delayed(lambda stream: run_shell(stream, self, command, v2, unmap))
        if service == "sync:":
            return self._delayed(lambda stream: run_sync(stream, self))
        return None

    def _delayed(self, runner: ServiceRunner) -> ServiceRunner:
        async def run(stream) -> None:
            if self.faults.command_delay_s:
                await asyncio.sleep(self.faults.command_delay_s)
            await runner(stream)
        return run

    # --- loop side ---
    def _event_loop(self) -> asyncio.AbstractEventLoop:
        """The loop thread's event loop, set from start until stop."""
        if self._loop is None:
            raise RuntimeError("the emulated phone is not started (use it as a context manager)")
        return self._loop

    def _run_loop(self, ready: threading.Event) -> None:
        loop = self._event_loop()
        asyncio.set_event_loop(loop)
        loop.call_soon(ready.set)
        loop.run_forever()

    def _call(self, coro, timeout_s: float = 30):
        return asyncio.run_coroutine_threadsafe(coro, self._event_loop()).result(timeout_s)

    async def _listen(self, port: int) -> None:
        self._server = await asyncio.start_server(self._accept, self.host, port,
                                                  family=socket.AF_INET, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]
        if self.port in RESERVED_PORTS:
            self._server.close()
            raise SpecbenchError(f"port {self.port} is in 5555-5585, which the adb server claims as an emulator",
                                 hint="choose another port, or 0 for a free one")

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self._offline is not None:
            # "silent": hold the connection without a word, like a hung adbd
            self._parked.add(writer)
            try:
                await reader.read()
            except ConnectionError:
                pass
            finally:
                self._parked.discard(writer)
                writer.transport.abort()
            return
        conn = Connection(self, reader, writer, self.open_service)
        self._connections.add(conn)
        try:
            await conn.serve()
        finally:
            self._connections.discard(conn)

    async def _drop_connections(self) -> None:
        for conn in list(self._connections):
            conn.abort()
        for writer in list(self._parked):
            writer.transport.abort()
        await asyncio.sleep(0)  # let the serve() tasks see their connections end

    async def _set_offline(self, mode: str) -> None:
        if mode == "refuse" and self._server is not None:
            self._server.close()
            self._server = None
        await self._drop_connections()

    async def _set_online(self) -> None:
        for writer in list(self._parked):  # make the adb server retry at once
            writer.transport.abort()
        if self._server is None:
            await self._listen(self.port)

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        await self._drop_connections()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


__all__ = ["EmulatedPhone", "FEATURES", "OFFLINE_MODES", "RESERVED_PORTS"]
