"""The emulated phone's power supply: a synthetic battery current that follows its CPU load.

Synthetic: no electrical model of any phone; it is a known function of the phone's load, so
tests can integrate it exactly. The phone's load sampler (emuphone.load) ticks it with the
running threads every ``interval_s``; at tick k, at ``time.monotonic()`` t_k (the clock
the runner's decode timing uses: CLOCK_MONOTONIC, shared on one host)::

    busy_k       = min(cpu_count, threads of the sandbox's processes in state R at t_k)
    draw_ua(t)   = idle_ua + per_busy_cpu_ua * busy_k            for t_k <= t < t_{k+1}
    current_now  = -draw_ua (sign discharging_negative) or +draw_ua (discharging_positive),
                   divided by 1000 and rounded when unit is mA
    voltage_now  = battery.voltage_uv (µV; constant unless set_battery changes it)
    status       = Discharging when battery.charging is none (else Charging or Full)

current_now and voltage_now are rewritten atomically at each tick; `trace()` lists every tick
(t_k, busy_k, draw_ua), so `draw_ua_at` and `energy_j` give the exact current at any time and
the energy over any interval.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from specbench.emuphone.description import PhoneDescription, PowerModel

SUPPLY_DIR = "sys/class/power_supply/battery"
"""Where the battery's files live, relative to the sandbox root."""

@dataclass(frozen=True)
class PowerTick:
    """One tick of the power model: the draw from `time_s` until the next tick."""

    time_s: float
    """time.monotonic() when current_now took this value."""
    busy_cpus: int
    """Threads of the sandbox's processes running or runnable at this tick (at most cpu_count)."""
    draw_ua: int
    """idle_ua + per_busy_cpu_ua * busy_cpus: the draw's magnitude in µA."""
    voltage_uv: int
    """voltage_now from this tick on, in µV."""


def current_now_value(model: PowerModel, draw_ua: int) -> int:
    """What current_now shows for a draw of `draw_ua` µA under the model's sign and unit."""
    value = draw_ua if model.unit == "uA" else round(draw_ua / 1000)
    return -value if model.sign == "discharging_negative" else value


class PowerSupply:
    """Keeps a sandbox's current_now/voltage_now following its CPU load, ticked by the phone's load
    sampler (emuphone.load)."""

    def __init__(self, description: PhoneDescription, root: Path):
        model = description.battery.power_model
        if model is None:
            raise ValueError("the phone description has no battery.power_model")
        self.model = model
        self._description = description
        self._root = root
        self._trace: list[PowerTick] = []
        self._lock = threading.Lock()

    def start(self) -> None:
        """Write the idle values (the first tick)."""
        self._publish(0)

    def set_description(self, description: PhoneDescription) -> None:
        """Take a changed description (voltage, a new model) from the next tick on."""
        with self._lock:
            self._description = description
            self.model = description.battery.power_model or self.model

    # --- reading the model ---
    def trace(self) -> list[PowerTick]:
        """Every tick so far, oldest first."""
        with self._lock:
            return list(self._trace)

    def draw_ua_at(self, time_s: float) -> int:
        """The draw in µA at monotonic time `time_s` (not before the first tick)."""
        trace = self.trace()
        if not trace or time_s < trace[0].time_s:
            raise ValueError(f"no power tick at or before t={time_s}")
        return [tick for tick in trace if tick.time_s <= time_s][-1].draw_ua

    def energy_j(self, start_s: float, end_s: float) -> float:
        """Joules drawn over [start_s, end_s]: the exact integral of draw_ua × voltage_uv (µA × µV × 1e-12)."""
        trace = self.trace()
        if not trace or start_s < trace[0].time_s:
            raise ValueError(f"no power tick at or before t={start_s}")
        total = 0.0
        for tick, following in zip(trace, trace[1:] + [None], strict=False):
            begin = max(start_s, tick.time_s)
            end = min(end_s, following.time_s if following else end_s)
            if end > begin:
                total += tick.draw_ua * 1e-6 * tick.voltage_uv * 1e-6 * (end - begin)
        return total

    # --- ticked by the load sampler ---
    @property
    def interval_s(self) -> float:
        return self.model.interval_s

    def tick(self, running_threads: int) -> None:
        self._publish(min(self._description.cpu_count, running_threads))

    def _publish(self, busy_cpus: int) -> None:
        with self._lock:
            model, voltage_uv = self.model, self._description.battery.voltage_uv
            draw_ua = model.idle_ua + model.per_busy_cpu_ua * busy_cpus
            folder = self._root / SUPPLY_DIR
            _write_atomic(folder / "voltage_now", f"{voltage_uv}\n")
            _write_atomic(folder / "current_now", f"{current_now_value(model, draw_ua)}\n")
            self._trace.append(PowerTick(time.monotonic(), busy_cpus, draw_ua, voltage_uv))


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)  # a concurrent `cat` never sees half a file


__all__ = ["PowerSupply", "PowerTick", "SUPPLY_DIR", "current_now_value"]
