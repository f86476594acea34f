"""The Device protocol: where the native runner runs (this host, or a phone over adb), and
`open_device`, which finds one by name.

Callers give host paths of model files; a device turns them into paths it can open
(`model_path`: the host path itself locally; pushed files on a phone), runs jobs with its
own runner and describes its state before and after measuring (`snapshot`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from specbench.world.runner import LineHandler, RunnerInfo, RunOutput

if TYPE_CHECKING:
    from specbench.world.devices.adb import AdbSettings


@runtime_checkable
class Device(Protocol):
    name: str
    """Short name used in profiles and result rows, e.g. 'local' or 'pixel8'."""

    def describe(self) -> dict:
        """Static facts for a profile's `device` section: name, model, soc, abi, cores..."""

    def cpus(self) -> list[int]:
        """CPU numbers the runner may use (a placement's lanes are drawn from them)."""

    def processors(self) -> dict[str, str]:
        """The processor of each lane ({"target": "cpu", "drafter": "cpu"} on a CPU-only device)."""

    def snapshot(self) -> dict:
        """Current state (load, frequency governor, temperatures...) where readable."""

    def state_now(self) -> dict:
        """The state as `snapshot` reads it, with nothing else attached or reset: safe while a job runs."""

    def runner(self) -> RunnerInfo:
        """The runner binary this device runs (version, protocol, sha256, modes and methods)."""

    def model_path(self, path: Path) -> str:
        """The path under which the device's runner opens the host model file `path`."""

    def run_job(self, job: dict, on_line: LineHandler | None = None) -> RunOutput:
        """Run one runner job; SpecbenchError on the runner's error line or a crash."""

    def loaded(self) -> dict[str, dict]:
        """The runner's latest `loaded` event of each model its jobs loaded, by `model_path`:
        llama.cpp's description, parameter count and size of the model as loaded."""

    def cancel(self, reason: str = "was cancelled") -> None:
        """Stop the job `run_job` is running, from another thread; its `run_job` then fails with `reason`."""


def open_device(name: str, phone: AdbSettings | None = None, warn: Callable[[str], None] | None = None) -> Device:
    """'local' (this host) or a phone by its adb serial (see `specbench devices`); `phone`:
    how jobs run on a phone (this host has no such settings), `warn`: where a phone's
    warnings go (a pinning that did not hold, a cool-down that timed out)."""
    if name == "local":
        from specbench.world.devices.local import LocalDevice

        return LocalDevice()
    from specbench.world.devices.adb import open_adb_device

    return open_adb_device(name, phone, warn)
