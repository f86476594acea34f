"""One adb transport connection (device side): the CNXN handshake and multiplexed streams.

Flow control follows adbd without `delayed_ack`: each stream has at most one WRTE in flight
and waits for the peer's OKAY before sending the next; an incoming WRTE is answered with
OKAY only once the service has consumed it, so a slow service slows the sender down.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from specbench.emuphone import wire
from specbench.emuphone.faults import DropFault, Faults
from specbench.emuphone.sandbox import Sandbox

log = logging.getLogger(__name__)


class Phone(Protocol):
    """What a connection and its services (shell, sync) use of the phone serving them
    (emuphone.server's EmulatedPhone)."""

    faults: Faults
    sandbox: Sandbox

    def banner(self) -> bytes: ...

    def free_bytes(self) -> int: ...

    def record_command(self, command: str) -> None: ...

    def record_sync(self, request: str, path: str) -> None: ...


ServiceRunner = Callable[["Stream"], Awaitable[None]]


class StreamClosed(Exception):
    """The stream was closed (by the peer, a fault, or the connection going away)."""


class Stream:
    """One adb stream: a service on this side, a socket of the adb server on the other."""

    def __init__(self, conn: Connection, local_id: int, remote_id: int, service: str):
        self.conn = conn
        self.local_id = local_id
        self.remote_id = remote_id
        self.service = service
        self.closed = False
        self._incoming: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._acked = asyncio.Event()
        self._acked.set()
        self._write_lock = asyncio.Lock()
        self._drop: DropFault | None = None
        self._transferred_bytes = 0

    def arm_drop(self, fault: DropFault) -> None:
        """Cut this stream once `fault.after_bytes` payload bytes went through it (either way),
        unless another stream uses the fault up first."""
        self._drop = fault

    # --- used by services ---
    async def read(self) -> bytes | None:
        """The next WRTE payload from the peer, or None once the stream is closed."""
        data = await self._incoming.get()
        if data is None:
            self._incoming.put_nowait(None)  # later reads see the end too
            return None
        fault = self._drop_due(len(data))
        if fault is not None:
            keep = fault.after_bytes - self._transferred_bytes
            await self._cut(fault)
            return data[:keep] if keep > 0 else None
        self._transferred_bytes += len(data)
        if not self.closed:
            await self.conn.send(wire.A_OKAY, self.local_id, self.remote_id)
        return data

    async def write(self, data: bytes) -> None:
        """Send `data` as WRTE packets, one in flight at a time. Raises StreamClosed."""
        async with self._write_lock:
            view = memoryview(data)
            step = self.conn.max_payload_bytes
            for start in range(0, len(view), step):
                chunk = bytes(view[start:start + step])
                await self._acked.wait()
                if self.closed:
                    raise StreamClosed(self.service)
                fault = self._drop_due(len(chunk))
                if fault is not None:
                    keep = fault.after_bytes - self._transferred_bytes
                    if keep > 0:
                        await self._send_wrte(chunk[:keep])
                        await self._acked.wait()
                    await self._cut(fault)
                    raise StreamClosed(f"{self.service}: dropped by fault injection")
                self._transferred_bytes += len(chunk)
                await self._send_wrte(chunk)

    async def close(self) -> None:
        """Close from this side once the last WRTE is acknowledged."""
        async with self._write_lock:
            await self._acked.wait()
        if not self.closed:
            self._mark_closed()
            await self.conn.send(wire.A_CLSE, self.local_id, self.remote_id)
        self.conn.forget(self)

    # --- used by the connection ---
    def on_okay(self) -> None:
        self._acked.set()

    def on_write(self, data: bytes) -> None:
        self._incoming.put_nowait(data)

    def on_close(self) -> None:
        self._mark_closed()

    def _mark_closed(self) -> None:
        self.closed = True
        self._incoming.put_nowait(None)
        self._acked.set()

    async def _send_wrte(self, chunk: bytes) -> None:
        self._acked.clear()
        await self.conn.send(wire.A_WRTE, self.local_id, self.remote_id, chunk)

    def _drop_due(self, length: int) -> DropFault | None:
        """The armed fault, when `length` more bytes cross it and this stream took it; else None."""
        fault = self._drop
        if fault is None or self._transferred_bytes + length <= fault.after_bytes:
            return None
        if not self.conn.phone.faults.consume_drop(fault):
            self._drop = None  # another stream was cut first
            return None
        return fault

    async def _cut(self, fault: DropFault) -> None:
        self._drop = None
        log.info("fault: dropping %s (%s) after %d bytes", self.service, fault.how, fault.after_bytes)
        if fault.how == "connection":
            self.conn.abort()
        elif not self.closed:
            self._mark_closed()
            await self.conn.send(wire.A_CLSE, self.local_id, self.remote_id)


class Connection:
    """The device end of one TCP connection from an adb server."""

    def __init__(self, phone: Phone, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 open_service: Callable[[str], ServiceRunner | None]):
        self.phone = phone
        self.reader = reader
        self.writer = writer
        self.max_payload_bytes = wire.MAX_PAYLOAD_BYTES
        self._open_service = open_service
        self._streams: dict[int, Stream] = {}
        self._tasks: dict[int, asyncio.Task] = {}
        self._ids = itertools.count(1)
        self._send_lock = asyncio.Lock()
        self._online = False

    async def serve(self) -> None:
        """Handle messages until the peer goes away or the phone drops the connection."""
        try:
            while True:
                header = await self.reader.readexactly(wire.HEADER_BYTES)
                command, arg0, arg1, length = wire.unpack_header(header)
                data = await self.reader.readexactly(length) if length else b""
                await self._dispatch(wire.Message(command, arg0, arg1, data))
        except (asyncio.IncompleteReadError, ConnectionError, wire.ProtocolError, StreamClosed) as exc:
            log.debug("connection ends: %r", exc)
        finally:
            self._close_all()
            self.abort()

    async def send(self, command: int, arg0: int, arg1: int, data: bytes = b"") -> None:
        delay_s = self.phone.faults.packet_delay_s
        if delay_s:
            await asyncio.sleep(delay_s)
        async with self._send_lock:
            if self.writer.is_closing():
                raise StreamClosed("connection closed")
            self.writer.write(wire.pack(command, arg0, arg1, data))
            try:
                await self.writer.drain()
            except ConnectionError as exc:
                raise StreamClosed("connection closed") from exc

    def abort(self) -> None:
        """Close the TCP connection at once, as an unplugged cable would."""
        transport = self.writer.transport
        if not transport.is_closing():
            transport.abort()

    def forget(self, stream: Stream) -> None:
        self._streams.pop(stream.local_id, None)
        self._tasks.pop(stream.local_id, None)

    async def _dispatch(self, msg: wire.Message) -> None:
        if msg.command == wire.A_CNXN:
            self._close_all()  # a new CNXN resets the transport, as in adbd
            self.max_payload_bytes = min(msg.arg1 or wire.MAX_PAYLOAD_BYTES, wire.MAX_PAYLOAD_BYTES)
            await self.send(wire.A_CNXN, wire.A_VERSION, wire.MAX_PAYLOAD_BYTES, self.phone.banner())
            self._online = True
        elif not self._online:
            log.debug("ignoring %s before CNXN", msg.name)
        elif msg.command == wire.A_OPEN:
            await self._open(msg.arg0, msg.data.rstrip(b"\0").decode("utf-8", "replace"))
        elif msg.command in (wire.A_OKAY, wire.A_WRTE, wire.A_CLSE):
            stream = self._streams.get(msg.arg1)
            if stream is None:
                if msg.command == wire.A_WRTE:  # tell the peer that stream is gone
                    await self.send(wire.A_CLSE, 0, msg.arg0)
                return
            if msg.command == wire.A_OKAY:
                stream.remote_id = msg.arg0
                stream.on_okay()
            elif msg.command == wire.A_WRTE:
                stream.on_write(msg.data)
            else:
                stream.on_close()
                self.forget(stream)
        else:
            log.debug("ignoring %s", msg.name)

    async def _open(self, remote_id: int, service: str) -> None:
        runner = self._open_service(service)
        if runner is None:
            log.info("refusing unsupported service %r", service)
            await self.send(wire.A_CLSE, 0, remote_id)
            return
        stream = Stream(self, next(self._ids), remote_id, service)
        drop = self.phone.faults.drop_for(service)
        if drop is not None:
            stream.arm_drop(drop)
        self._streams[stream.local_id] = stream
        await self.send(wire.A_OKAY, stream.local_id, remote_id)
        self._tasks[stream.local_id] = asyncio.create_task(self._run(stream, runner))

    async def _run(self, stream: Stream, runner: ServiceRunner) -> None:
        try:
            await runner(stream)
        except StreamClosed:
            pass
        except Exception:  # a bug in a service must not take the whole phone down
            log.exception("service %r failed", stream.service)
        try:
            await stream.close()
        except StreamClosed:
            pass

    def _close_all(self) -> None:
        for stream in list(self._streams.values()):
            stream.on_close()
        for task in list(self._tasks.values()):
            task.cancel()
        self._streams.clear()
        self._tasks.clear()
