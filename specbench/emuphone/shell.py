"""The `shell:`, `shell,v2,...:` and `exec:` services: real /bin/sh processes in the sandbox.

* `shell:<cmd>` (v1): stdout and stderr merged, no exit status; an empty command is an
  interactive sh fed from the stream (no PTY).
* `shell,v2[,raw|,pty][,TERM=..]:<cmd>`: packets `[id u8][len u32le][data]`, stdout (1) and
  stderr (2) apart, then the exit code (3). `pty` is served like `raw` (no terminal).
* `exec:<cmd>`: like v1, but the output is not path-unmapped (it is usually binary).

A peer that closes the stream early gets the process group killed, as adbd does.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess

from specbench.emuphone import wire
from specbench.emuphone.transport import Phone, Stream

log = logging.getLogger(__name__)

READ_CHUNK_BYTES = 64 * 1024


def parse_shell_service(service: str) -> tuple[bool, bool, str] | None:
    """(v2, unmap_output, command) for a shell-like service name, or None if it is not one."""
    if service.startswith("exec:"):
        return False, False, service[len("exec:"):]
    if service.startswith("shell:"):
        return False, True, service[len("shell:"):]
    if service.startswith("shell,") and ":" in service:
        options, command = service[len("shell,"):].split(":", 1)
        return "v2" in options.split(","), True, command
    return None


async def run_shell(stream: Stream, phone: Phone, command: str, v2: bool, unmap: bool) -> None:
    """Run one command (or an interactive sh) and relay its streams until it exits."""
    phone.record_command(command)
    injected = phone.faults.take_exit(command) if command else None
    if injected is not None:
        log.info("fault: %r exits %d without running", command, injected)
        command = f"echo 'emuphone: injected failure (exit {injected})' >&2; exit {injected}"
    argv = ["/bin/sh", "-c", phone.sandbox.rewrite_command(command)] if command else ["/bin/sh"]
    proc = await asyncio.create_subprocess_exec(
        *argv, cwd=phone.sandbox.root, env=phone.sandbox.command_env(), start_new_session=True,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE if v2 else asyncio.subprocess.STDOUT)
    hogs = CpuHogs()
    stdin_task = asyncio.create_task(_pump_stdin(stream, proc, v2, lambda data: _maybe_slow(phone, data, hogs)))
    try:
        pumps = [_pump_output(stream, _piped(proc.stdout), wire.SHELL_STDOUT if v2 else None,
                              phone.sandbox.output_unmapper() if unmap else None)]
        if v2:
            pumps.append(_pump_output(stream, _piped(proc.stderr), wire.SHELL_STDERR,
                                      phone.sandbox.output_unmapper() if unmap else None))
        await asyncio.gather(*pumps)
        returncode = await proc.wait()
        if v2:
            exit_code = returncode if returncode >= 0 else 128 - returncode
            await stream.write(wire.shell_packet(wire.SHELL_EXIT, bytes([exit_code & 0xFF])))
    finally:
        stdin_task.cancel()
        hogs.stop()
        if proc.returncode is None:
            _kill_group(proc.pid)
            await proc.wait()


def _piped(reader: asyncio.StreamReader | None) -> asyncio.StreamReader:
    """A stream the command was started with as a pipe (run_shell asks for them)."""
    if reader is None:
        raise RuntimeError("the shell command's output was not piped")
    return reader


async def _pump_output(stream: Stream, pipe: asyncio.StreamReader, packet_id: int | None, unmapper) -> None:
    def frame(data: bytes) -> bytes:
        return data if packet_id is None else wire.shell_packet(packet_id, data)

    while True:
        data = await pipe.read(READ_CHUNK_BYTES)
        if not data:
            break
        if unmapper is not None:
            data = unmapper.feed(data)
        if data:
            await stream.write(frame(data))
    tail = unmapper.flush() if unmapper is not None else b""
    if tail:
        await stream.write(frame(tail))


class CpuHogs:
    """One busy process per host CPU, started by a SlowFault and stopped when its command exits."""

    def __init__(self) -> None:
        self._procs: list[subprocess.Popen] = []

    def start(self, per_cpu: int) -> None:
        for _ in range(per_cpu * len(os.sched_getaffinity(0))):
            self._procs.append(subprocess.Popen(["/bin/sh", "-c", "while :; do :; done"], start_new_session=True))

    def stop(self) -> None:
        for proc in self._procs:
            _kill_group(proc.pid)
            proc.wait()
        self._procs.clear()


def _maybe_slow(phone: Phone, data: bytes, hogs: CpuHogs) -> None:
    fault = phone.faults.take_slowdown(data)
    if fault is not None:
        log.info("fault: CPU slowed down while this command runs")
        hogs.start(fault.hogs_per_cpu)


async def _pump_stdin(stream: Stream, proc: asyncio.subprocess.Process, v2: bool,
                      on_stdin=lambda data: None) -> None:
    """Stream -> process stdin; the peer closing the stream kills the process. `on_stdin` sees the input."""
    buffer = b""
    stdin = proc.stdin
    while True:
        data = await stream.read()
        if data is None:
            if proc.returncode is None:
                log.debug("peer closed %r early: killing pid %d", stream.service, proc.pid)
                _kill_group(proc.pid)
            return
        if not v2:
            on_stdin(data)
            await _feed(stdin, data)
            continue
        buffer += data
        while len(buffer) >= wire.SHELL_PACKET.size:
            packet_id, length = wire.SHELL_PACKET.unpack_from(buffer)
            if len(buffer) < wire.SHELL_PACKET.size + length:
                break
            payload = buffer[wire.SHELL_PACKET.size:wire.SHELL_PACKET.size + length]
            buffer = buffer[wire.SHELL_PACKET.size + length:]
            if packet_id == wire.SHELL_STDIN:
                on_stdin(payload)
                await _feed(stdin, payload)
            elif packet_id == wire.SHELL_CLOSE_STDIN and stdin is not None:
                stdin.close()
                stdin = None


async def _feed(stdin: asyncio.StreamWriter | None, data: bytes) -> None:
    if stdin is None or stdin.is_closing():
        return
    try:
        stdin.write(data)
        await stdin.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass  # the process stopped reading; like a pipe on the phone, drop the input


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


__all__ = ["parse_shell_service", "run_shell"]
