"""The `sync:` service, protocol v1: STAT, LIST, SEND, RECV, QUIT.

Requests are `id[4] + u32le length` (+ path), and may arrive split across WRTE packets
or several in one, so they are read through a buffer. Failures answer `FAIL len message`
with adbd's wording; a failed SEND keeps reading (and discarding) DATA until DONE before
answering, as adbd does, so the client is not writing into a closed socket.
"""

from __future__ import annotations

import errno
import logging
import os
import stat

from specbench.emuphone import wire
from specbench.emuphone.transport import Phone, Stream

log = logging.getLogger(__name__)

MAX_PATH_BYTES = 1024


class _Buffered:
    """Exact-length reads over a stream's WRTE payloads."""

    def __init__(self, stream: Stream):
        self.stream = stream
        self._buffer = bytearray()

    async def read_exact(self, n: int) -> bytes | None:
        while len(self._buffer) < n:
            data = await self.stream.read()
            if data is None:
                return None
            self._buffer += data
        out = bytes(self._buffer[:n])
        del self._buffer[:n]
        return out


async def run_sync(stream: Stream, phone: Phone) -> None:
    """Serve sync requests until QUIT, the peer closing, or a protocol error."""
    reader = _Buffered(stream)
    while True:
        header = await reader.read_exact(wire.SYNC_HEADER.size)
        if header is None:
            return
        request, length = wire.SYNC_HEADER.unpack(header)
        if request == b"QUIT":
            return
        if request not in (b"STAT", b"LIST", b"SEND", b"RECV"):
            await stream.write(wire.sync_fail(f"unknown sync request {request!r}"))
            return
        if length > MAX_PATH_BYTES:
            await stream.write(wire.sync_fail(f"path too long: {length} bytes"))
            return
        raw_path = await reader.read_exact(length)
        if raw_path is None:
            return
        path = raw_path.decode("utf-8", "surrogateescape")
        phone.record_sync(request.decode(), path)
        if request == b"STAT":
            await _stat(stream, phone, path)
        elif request == b"LIST":
            await _list(stream, phone, path)
        elif request == b"RECV":
            await _recv(stream, phone, path)
        elif not await _send(stream, reader, phone, path):
            return  # adbd closes the sync session after a failed SEND


def _host(phone: Phone, path: str) -> str | None:
    return str(phone.sandbox.host_path(path)) if path.startswith("/") else None


async def _stat(stream: Stream, phone: Phone, path: str) -> None:
    host = _host(phone, path)
    try:
        st = os.lstat(host) if host else None
    except OSError:
        st = None
    if st is None:
        await stream.write(wire.sync_stat(0, 0, 0))  # v1 reports a missing file as all zeros
    else:
        await stream.write(wire.sync_stat(st.st_mode, st.st_size, int(st.st_mtime)))


async def _list(stream: Stream, phone: Phone, path: str) -> None:
    host = _host(phone, path)
    entries = []
    try:
        if host:
            names = [".", ".."] + sorted(os.listdir(host))
            for name in names:
                try:
                    st = os.lstat(os.path.join(host, name))
                except OSError:
                    continue
                entries.append(wire.sync_dent(st.st_mode, st.st_size, int(st.st_mtime),
                                              name.encode("utf-8", "surrogateescape")))
    except OSError:
        pass  # adbd lists an unreadable or missing directory as empty
    await stream.write(b"".join(entries) + wire.SYNC_LIST_DONE)


async def _recv(stream: Stream, phone: Phone, path: str) -> None:
    host = _host(phone, path)
    try:
        if host is None:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT))
        handle = open(host, "rb")
    except OSError as exc:
        await stream.write(wire.sync_fail(f"open failed: {exc.strerror}"))
        return
    with handle:
        while True:
            try:
                chunk = handle.read(wire.SYNC_MAX_DATA_BYTES)
            except OSError as exc:  # e.g. a directory
                await stream.write(wire.sync_fail(f"read failed: {exc.strerror}"))
                return
            if not chunk:
                break
            await stream.write(wire.SYNC_HEADER.pack(b"DATA", len(chunk)) + chunk)
    await stream.write(wire.SYNC_DATA_DONE)


async def _send(stream: Stream, reader: _Buffered, phone: Phone, spec: str) -> bool:
    """Receive one file; True when it was stored and OKAY was sent."""
    path, _, mode_text = spec.rpartition(",")
    if not path or not mode_text.isdigit():
        path, mode_text = spec, str(stat.S_IFREG | 0o644)
    mode = int(mode_text)
    host = _host(phone, path)
    failure: str | None = None
    handle = None
    tmp = f"{host}.emuphone-partial" if host else None
    if host is None or tmp is None:  # tmp is None only with host
        failure = f"not an absolute path: {path}"
    elif os.path.isdir(host):
        failure = f"{path}: Is a directory"
    else:
        try:
            os.makedirs(os.path.dirname(host), exist_ok=True)  # feature fixed_push_mkdir
            handle = open(tmp, "wb")
        except OSError as exc:
            failure = f"couldn't create file: {exc.strerror}"
    free_bytes = phone.free_bytes()
    written = 0
    mtime_s = 0
    try:
        while True:
            header = await reader.read_exact(wire.SYNC_HEADER.size)
            if header is None:
                return False  # peer gone mid-transfer: the partial file is removed below
            request, length = wire.SYNC_HEADER.unpack(header)
            if request == b"DONE":
                mtime_s = length
                break
            if request != b"DATA" or length > wire.SYNC_MAX_DATA_BYTES:
                failure = failure or f"invalid data message {request!r} of {length} bytes"
                await stream.write(wire.sync_fail(failure))
                return False
            data = await reader.read_exact(length)
            if data is None:
                return False
            if failure or handle is None:  # no handle only with a failure (it could not be opened)
                continue  # drain until DONE, then report
            if written + len(data) > free_bytes:
                # fill the disk up to the limit first, as a real write would
                handle.write(data[:max(0, free_bytes - written)])
                failure = f"write failed: {os.strerror(errno.ENOSPC)}"
                log.info("push of %s fails: no space after %d bytes", path, free_bytes)
                continue
            handle.write(data)
            written += len(data)
        if failure:
            await stream.write(wire.sync_fail(failure))
            return False
        if handle is None or tmp is None or host is None:
            raise RuntimeError(f"push of {path}: no file open and no failure")  # opening either works or fails
        handle.close()
        os.chmod(tmp, stat.S_IMODE(mode))
        os.utime(tmp, (mtime_s, mtime_s))
        os.replace(tmp, host)
        await stream.write(wire.SYNC_OKAY)
        return True
    finally:
        if handle is not None and not handle.closed:
            handle.close()
        if tmp and os.path.exists(tmp):
            os.unlink(tmp)


__all__ = ["run_sync"]
