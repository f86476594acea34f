"""LocalDevice: this host as a device; the runner runs as a subprocess.

The snapshot reads what Linux exposes without privileges (CPU model, cores, load,
cpufreq governor and frequency, thermal zones, free memory) and leaves out what it cannot
read: containers often hide cpufreq and thermal.
"""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path

from specbench.errors import SpecbenchError
from specbench.world.runner import (
    LineHandler,
    RunnerInfo,
    RunOutput,
    find_runner,
    host_abi,
    loaded_events,
    run_job,
    runner_info,
)


class LocalDevice:
    """The host; `runner` defaults to $SPECBENCH_RUNNER, else the first <abi>/specbench-runner in
    $SPECBENCH_RUNNERS, the user data dir or a checkout's runners/ (world/runner.py's runner_path)."""

    def __init__(self, name: str = "local", runner: Path | None = None, sys_root: Path = Path("/")):
        self.name = name
        self._runner_path = runner
        self._info: RunnerInfo | None = None
        self._loaded: dict[str, dict] = {}
        self._root = sys_root
        """Where /proc and /sys are read from (tests point it at a fake tree)."""

    def runner(self) -> RunnerInfo:
        if self._info is None:
            self._info = runner_info(self._runner_path or find_runner())
        return self._info

    def cpus(self) -> list[int]:
        return sorted(os.sched_getaffinity(0))

    def processors(self) -> dict[str, str]:
        return {"target": "cpu", "drafter": "cpu"}

    def model_path(self, path: Path) -> str:
        path = Path(path)
        if not path.is_file():
            raise SpecbenchError(f"model file not found: {path}", hint="pass the path of a .gguf file")
        return str(path.resolve())

    def run_job(self, job: dict, on_line: LineHandler | None = None) -> RunOutput:
        out = run_job(self.runner().path, job, on_line)
        self._loaded.update(loaded_events(out))
        return out

    def loaded(self) -> dict[str, dict]:
        return dict(self._loaded)

    def cancel(self, reason: str = "was cancelled") -> None:
        """Nothing to do: the runner is a child in this process's group, so the Ctrl-C that
        cancels a run reaches it directly."""

    def describe(self) -> dict:
        cpu = self._cpu_model()
        return {"name": self.name, "kind": "local", "model": cpu or platform.node() or "host", "soc": cpu or "",
                "abi": host_abi(), "serial": platform.node(), "cores": os.cpu_count() or 0,
                "os": f"{platform.system()} {platform.release()}"}

    def snapshot(self) -> dict:
        snap: dict = {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "cpu_model": self._cpu_model(),
                      "cores": os.cpu_count() or 0}
        try:
            snap["cores_usable"] = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            pass
        load = self._read("proc/loadavg")
        if load:
            snap["load"] = [float(v) for v in load.split()[:3]]
        mem = self._meminfo("MemAvailable")
        if mem is not None:
            snap["mem_available_mb"] = round(mem / 1024)
        cpufreq = self._root / "sys/devices/system/cpu/cpu0/cpufreq"
        governor = self._read(cpufreq / "scaling_governor")
        if governor:
            snap["governor"] = governor
        freq = self._read(cpufreq / "scaling_cur_freq")
        if freq and freq.isdigit():
            snap["cpu0_freq_mhz"] = int(freq) // 1000
        thermal = self._thermal()
        if thermal:
            snap["thermal_c"] = thermal
        return snap

    def state_now(self) -> dict:
        return self.snapshot()

    def _read(self, path: Path | str) -> str | None:
        try:
            return (self._root / path).read_text().strip()
        except (OSError, UnicodeDecodeError):
            return None

    def _cpu_model(self) -> str:
        text = self._read("proc/cpuinfo") or ""
        for line in text.splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Hardware", "Processor") and value.strip():
                return value.strip()
        return platform.processor() or ""

    def _meminfo(self, key: str) -> int | None:
        for line in (self._read("proc/meminfo") or "").splitlines():
            name, _, value = line.partition(":")
            if name == key and value.split() and value.split()[0].isdigit():
                return int(value.split()[0])
        return None

    def _thermal(self) -> dict[str, float]:
        zones = {}
        base = self._root / "sys/class/thermal"
        for zone in sorted(base.glob("thermal_zone*")) if base.is_dir() else []:
            temp = self._read(zone / "temp")
            kind = self._read(zone / "type") or zone.name
            if temp and temp.lstrip("-").isdigit():
                zones[f"{zone.name}:{kind}"] = int(temp) / 1000.0
        return zones
