"""The emulated phone's CPU load: how many of its CPUs are busy, the one input of its synthetic
power supply (emuphone.power) and thermal model (emuphone.thermal).

A process belongs to the phone when its environment holds the sandbox's ``EMUPHONE_ROOT`` (so a
runner started in the background counts too). A thread of such a process in state R (running or
runnable, /proc/<pid>/task/<tid>/stat) counts as one busy CPU: unlike CPU time, this does not
depend on how busy the host is with other work.
"""

from __future__ import annotations

import os
from pathlib import Path


class SandboxLoad:
    """Counts the running threads of one sandbox's processes."""

    def __init__(self, root: Path):
        self._marker = f"EMUPHONE_ROOT={root}".encode()
        self._members: dict[tuple[int, int], bool] = {}  # (pid, start time) -> runs in this sandbox

    def busy_cpus(self, cpu_count: int) -> int:
        """Threads of the sandbox's processes in state R now, at most `cpu_count`."""
        return min(cpu_count, self._running_threads())

    def _running_threads(self) -> int:
        running = 0
        seen: dict[tuple[int, int], bool] = {}
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                key = (int(name), int(_stat_fields(f"/proc/{name}/stat")[19]))  # start time: pids are reused
                member = self._members.get(key)
                if member is None:
                    with open(f"/proc/{name}/environ", "rb") as handle:
                        member = self._marker in handle.read().split(b"\0")
                seen[key] = member
                if member:
                    running += sum(_stat_fields(f"/proc/{name}/task/{tid}/stat")[0] == b"R"
                                   for tid in os.listdir(f"/proc/{name}/task"))
            except (OSError, IndexError, ValueError):
                continue  # exited meanwhile, or not ours to read
        self._members = seen  # forget processes that exited
        return running


def _stat_fields(path: str) -> list[bytes]:
    """The fields of a /proc stat file after the command name (field 3, the state, is [0])."""
    with open(path, "rb") as handle:
        return handle.read().rsplit(b")", 1)[1].split()


__all__ = ["SandboxLoad"]
