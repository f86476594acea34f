"""Fault injection state of an emulated phone, set from the test thread, read by the phone's loop."""

from __future__ import annotations

import threading
from dataclasses import dataclass

DROP_HOWS = ("connection", "stream")


@dataclass(frozen=True)
class DropFault:
    """Cut the next stream whose service starts with `service_prefix` after `after_bytes`."""

    after_bytes: int
    """Payload bytes (either direction, sync framing included) let through before the cut."""
    service_prefix: str
    """e.g. "sync:" for push/pull, "shell" for commands."""
    how: str
    """"connection": close the whole TCP connection (a pulled cable); "stream": CLSE that stream."""


@dataclass(frozen=True)
class ExitFault:
    """Make a command exit with `exit_code` instead of running."""

    exit_code: int
    match: str | None
    """Only commands containing this text are affected (None: any command)."""


@dataclass(frozen=True)
class SlowFault:
    """Slow the CPU under the next commands whose stdin contains `stdin_match`: while such a command
    runs, one busy process per host CPU competes with it (a phone throttling mid-job)."""

    stdin_match: bytes
    """e.g. b'"mode": "decode"': the runner reads its job on stdin."""
    hogs_per_cpu: int = 1
    """Busy processes per host CPU: with n, a command pinned there gets about 1/(n + 1) of it."""


class Faults:
    """Pending and standing faults. All methods are thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.packet_delay_s = 0.0
        """Sleep before every packet the phone sends, in seconds."""
        self.command_delay_s = 0.0
        """Sleep before each opened service (a shell command, a sync session) starts, in seconds."""
        self._drops: list[DropFault] = []
        self._exits: list[ExitFault] = []
        self._slows: list[SlowFault] = []

    def add_drop(self, fault: DropFault) -> None:
        if fault.how not in DROP_HOWS:
            raise ValueError(f"unknown drop {fault.how!r}; available: {', '.join(DROP_HOWS)}")
        with self._lock:
            self._drops.append(fault)

    def add_slowdowns(self, fault: SlowFault, count: int) -> None:
        with self._lock:
            self._slows.extend([fault] * count)

    def take_slowdown(self, stdin: bytes) -> SlowFault | None:
        """The fault (consumed) if this stdin data starts a command to slow down, else None."""
        with self._lock:
            for fault in self._slows:
                if fault.stdin_match in stdin:
                    self._slows.remove(fault)
                    return fault
        return None

    def add_exits(self, fault: ExitFault, count: int) -> None:
        with self._lock:
            self._exits.extend([fault] * count)

    def drop_for(self, service: str) -> DropFault | None:
        """The first pending drop that matches a newly opened stream's `service`, for the stream
        to arm. The drop stays pending until a stream actually reaches its byte count (adbutils
        opens a short STAT session before every push and pull; that one must not use it up)."""
        with self._lock:
            return next((fault for fault in self._drops if service.startswith(fault.service_prefix)), None)

    def consume_drop(self, fault: DropFault) -> bool:
        """True (once) if `fault` is still pending: the calling stream is the one to cut."""
        with self._lock:
            for index, pending in enumerate(self._drops):
                if pending is fault:
                    del self._drops[index]
                    return True
        return False

    def take_exit(self, command: str) -> int | None:
        """The injected exit code for this command, consuming the fault, or None."""
        with self._lock:
            for fault in self._exits:
                if fault.match is None or fault.match in command:
                    self._exits.remove(fault)
                    return fault.exit_code
        return None
