"""The emulated phone's CPU load: how many of its threads run, the one input of its synthetic
power supply (emuphone.power) and thermal model (emuphone.thermal); one sampler thread counts
them and feeds every model that is due, each every `interval_s` of its own.

A process belongs to the phone when its environment holds the sandbox's ``EMUPHONE_ROOT`` (so a
runner started in the background counts too). A thread of such a process in state R (running or
runnable, /proc/<pid>/task/<tid>/stat) counts as one busy CPU: unlike CPU time, this does not
depend on how busy the host is with other work.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol


class SandboxLoad:
    """Counts the running threads of one sandbox's processes."""

    def __init__(self, root: Path):
        self._marker = f"EMUPHONE_ROOT={root}".encode()
        self._members: dict[tuple[int, int, bytes], bool] = {}  # (pid, start time, command) -> in this sandbox

    def running_threads(self) -> int:
        """Threads of the sandbox's processes in state R now."""
        running = 0
        seen: dict[tuple[int, int, bytes], bool] = {}
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                command, fields = _stat(f"/proc/{name}/stat")
                # start time: pids are reused; the command name, which an exec changes while pid and start time
                # stay: a child seen between fork and exec still has its parent's environment, not the sandbox's
                key = (int(name), int(fields[19]), command)
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


def _stat(path: str) -> tuple[bytes, list[bytes]]:
    """A /proc stat file's command name and its fields after it (field 3, the state, is [0])."""
    with open(path, "rb") as handle:
        head, tail = handle.read().rsplit(b")", 1)
    return head.split(b"(", 1)[1], tail.split()


def _stat_fields(path: str) -> list[bytes]:
    """The fields of a /proc stat file after the command name (field 3, the state, is [0])."""
    return _stat(path)[1]


class LoadModel(Protocol):
    """A model that follows the load: ticked with the running threads every `interval_s`."""

    @property
    def interval_s(self) -> float: ...

    def tick(self, running_threads: int) -> None: ...


class LoadSampler:
    """The one thread that counts a sandbox's running threads and ticks the models due: each
    `interval_s` after its previous tick, one count shared by the models due together."""

    def __init__(self, root: Path):
        self._load = SandboxLoad(root)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, models: Sequence[LoadModel]) -> None:
        """Tick `models` from now on (none: no thread)."""
        if models:
            self._thread = threading.Thread(target=self._run, args=(tuple(models),), name="emuphone-load",
                                            daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def _run(self, models: tuple[LoadModel, ...]) -> None:
        due = [time.monotonic() + model.interval_s for model in models]
        while not self._stop.wait(max(0.0, min(due) - time.monotonic())):
            now = time.monotonic()
            ticking = [i for i, when in enumerate(due) if when <= now]
            if not ticking:
                continue
            running = self._load.running_threads()
            for i in ticking:
                models[i].tick(running)
                due[i] = time.monotonic() + models[i].interval_s


__all__ = ["LoadModel", "LoadSampler", "SandboxLoad"]
