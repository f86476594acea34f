"""The Device protocol: where the native runner runs (this host, later a phone over adb).

Callers give host paths of model files; a device turns them into paths it can open
(`model_path`: the host path itself locally; pushed files on a phone), runs jobs with its
own runner and describes its state before and after measuring (`snapshot`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

from specbench.world.runner import LineHandler, RunnerInfo, RunOutput


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

    def runner(self) -> RunnerInfo:
        """The runner binary this device runs (version, protocol, sha256)."""

    def supports(self, mode: str) -> bool:
        """Whether the device's runner knows a job mode (e.g. 'cosched')."""

    def supports_method(self, name: str) -> bool:
        """Whether the device's runner decodes method `name` natively (e.g. 'as2d')."""

    def model_path(self, path: Path) -> str:
        """The path under which the device's runner opens the host model file `path`."""

    def run_job(self, job: dict, on_line: LineHandler | None = None) -> RunOutput:
        """Run one runner job; SpecbenchError on the runner's error line or a crash."""
