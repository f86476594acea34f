"""The emulated phone's thermal model: zone temperatures that rise with its CPU load, a thermal
status that steps up at thresholds, and CPU frequency caps while it is hot.

Synthetic: no thermal model of any phone (no heat capacity per zone, no skin or battery lag, no
governor); it is a known function of the phone's load, so tests of sustained runs can say when a
phone throttles. The phone's load sampler (emuphone.load) ticks it with the running threads every
``interval_s``; at tick k, dt_k seconds after tick k-1, every zone's temperature T follows::

    busy_k   = min(cpu_count, threads of the sandbox's processes in state R at the tick)
    T_k      = T_{k-1} + (heat_per_busy_cpu_c_per_s * busy_k - cool_rate_per_s * (T_{k-1} - ambient_c)) * dt_k
    status_k = how many of throttle_at_c the hottest zone has reached (0 .. 6)
    cap_k    = throttled_max_freq_khz when status_k > 0 (else each policy's max_freq_khz)

The zones' sysfs temp files, `dumpsys thermalservice` (status and HAL temperatures) and every
policy's scaling_max_freq and scaling_cur_freq (min of its own and cap_k) are rewritten at each
tick; `trace()` lists every tick. Zones start at the description's temperatures.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace

from specbench.emuphone.description import PhoneDescription, ThermalModel
from specbench.emuphone.sandbox import Sandbox

WRITTEN = ("sys/class/thermal/", "system/emuphone/dumpsys/thermalservice", "sys/devices/system/cpu/cpufreq/")
"""The generated files a tick rewrites (relative to the sandbox root)."""


@dataclass(frozen=True)
class ThermalTick:
    """One tick of the thermal model."""

    time_s: float
    """time.monotonic() when the files took these values."""
    busy_cpus: int
    """Busy CPUs counted at this tick."""
    dt_s: float
    """Seconds this tick's step covered: since the previous tick (0 for the first)."""
    temps_c: tuple[float, ...]
    """Every zone's temperature from this tick on, °C, in the description's zone order."""
    status: int
    """The thermal status from this tick on."""


def status_at(model: ThermalModel, hottest_c: float) -> int:
    """The thermal status of a phone whose hottest zone is at `hottest_c` (pure)."""
    return min(6, sum(hottest_c >= t for t in model.throttle_at_c))


def step(model: ThermalModel, temps_c: tuple[float, ...], busy_cpus: int, dt_s: float) -> tuple[float, ...]:
    """Every zone's temperature after `dt_s` seconds with `busy_cpus` busy (pure)."""
    return tuple(t + (model.heat_per_busy_cpu_c_per_s * busy_cpus - model.cool_rate_per_s * (t - model.ambient_c))
                 * dt_s for t in temps_c)


def throttled(description: PhoneDescription, temps_c: tuple[float, ...], status: int) -> PhoneDescription:
    """The description as the phone reports itself at these temperatures and this status (pure)."""
    model = description.thermal_model
    assert model is not None
    zones = tuple(replace(z, temp_c=round(t, 3)) for z, t in zip(description.thermal_zones, temps_c, strict=True))
    clusters = description.clusters
    if status > 0:
        clusters = tuple(replace(c, scaling_max_freq_khz=min(c.max_freq_khz, model.throttled_max_freq_khz),
                                 cur_freq_khz=min(c.cur_freq_khz, model.throttled_max_freq_khz)) for c in clusters)
    return replace(description, thermal_zones=zones, thermal_status=status, clusters=clusters)


class PhoneThermal:
    """Heats and cools a sandbox's thermal zones with its CPU load, ticked by the phone's load
    sampler (emuphone.load)."""

    def __init__(self, description: PhoneDescription, sandbox: Sandbox):
        if description.thermal_model is None:
            raise ValueError("the phone description has no thermal.model")
        self._description = description
        self._sandbox = sandbox
        self._temps = tuple(z.temp_c for z in description.thermal_zones)
        self._trace: list[ThermalTick] = []
        self._lock = threading.Lock()
        self._last_s = time.monotonic()

    @property
    def model(self) -> ThermalModel:
        model = self._description.thermal_model
        assert model is not None
        return model

    def start(self) -> None:
        """Write the starting temperatures (the first tick)."""
        self._publish(0, 0.0)
        self._last_s = time.monotonic()

    def set_description(self, description: PhoneDescription) -> None:
        """Take a changed description (frequencies, a new model) from the next tick on; the
        temperatures go on from where the model has them."""
        with self._lock:
            if description.thermal_model is not None:
                self._description = description

    def trace(self) -> list[ThermalTick]:
        """Every tick so far, oldest first."""
        with self._lock:
            return list(self._trace)

    # --- ticked by the load sampler ---
    @property
    def interval_s(self) -> float:
        return self.model.interval_s

    def tick(self, running_threads: int) -> None:
        now = time.monotonic()
        self._publish(min(self._description.cpu_count, running_threads), now - self._last_s)
        self._last_s = now

    def _publish(self, busy_cpus: int, dt_s: float) -> None:
        with self._lock:
            self._temps = step(self.model, self._temps, busy_cpus, dt_s)
            status = status_at(self.model, max(self._temps, default=self.model.ambient_c))
            self._sandbox.materialize(throttled(self._description, self._temps, status), only=WRITTEN)
            self._trace.append(ThermalTick(time.monotonic(), busy_cpus, dt_s, self._temps, status))


__all__ = ["PhoneThermal", "ThermalTick", "status_at", "step", "throttled"]
