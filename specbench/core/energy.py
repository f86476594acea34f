"""Energy of requests from battery samples on the decode clock (docs/METHODS.md §10 Energy).

The runner samples current_now and voltage_now every interval, timestamped on the clock its
decodes are timed on, so a decode's [start_us, end_us] selects its samples. Pure: samples in,
joules out.

* Convention: the units (µA or mA, µV or mV) and the sign of a discharging current, named
  (`parse_convention`, --energy-convention) or detected from magnitudes and the battery's
  status (`detect_convention`); `check_plausible` refuses a median power outside what a phone
  draws, which is what a wrong unit gives.
* Power: P = sign × I × V in watts, positive while the battery discharges.
* Integral: sample-and-hold. A fuel gauge's reading is a step function that changes when the
  gauge updates; holding each sample until the next one is off only between a step and the
  next sample, so the error is at most |step| × the sampling interval per step. A trapezoid
  would smear every step over a whole interval on both sides, with no smaller bound.
* Idle: the mean power over the idle period (its integral over its duration);
  energy above idle = energy − idle power × duration.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from specbench.errors import SpecbenchError

CURRENT_UNITS = {"uA": 1e-6, "mA": 1e-3}
VOLTAGE_UNITS = {"uV": 1e-6, "mV": 1e-3}
SIGNS = ("discharging_negative", "discharging_positive")
PLAUSIBLE_W = (0.02, 40.0)
"""Median battery power a phone can draw, in watts: above an idle phone with its screen off
(tens of mW) and below the peak of a phone's charger-rated draw."""
UA_FROM = 20_000
"""A median |current| at or above this is read as µA (20 mA); below, as mA (20 A would be no phone)."""
UV_FROM = 100_000
"""A median voltage at or above this is read as µV (0.1 V); below, as mV (a cell is 3-5 V)."""
FLAG = "--energy-convention"


@dataclass(frozen=True)
class Convention:
    """How a phone's current_now and voltage_now are to be read."""

    current_unit: str
    """uA or mA."""
    voltage_unit: str
    """uV or mV."""
    sign: str
    """discharging_negative (Pixels, most phones) or discharging_positive."""
    detected: bool = False
    """True: detected from the values and status; False: named with --energy-convention."""

    @property
    def text(self) -> str:
        """The --energy-convention spelling, e.g. uA,uV,discharging_negative."""
        return f"{self.current_unit},{self.voltage_unit},{self.sign}"

    def watts(self, current: np.ndarray, voltage: np.ndarray) -> np.ndarray:
        """Power drawn from the battery (positive while discharging) for raw readings."""
        sign = -1.0 if self.sign == "discharging_negative" else 1.0
        return sign * np.asarray(current, dtype=np.float64) * CURRENT_UNITS[self.current_unit] * \
            np.asarray(voltage, dtype=np.float64) * VOLTAGE_UNITS[self.voltage_unit]


def parse_convention(text: str) -> Convention:
    """'uA,uV,discharging_negative' -> a Convention, or an error naming the flag."""
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != 3 or parts[0] not in CURRENT_UNITS or parts[1] not in VOLTAGE_UNITS or parts[2] not in SIGNS:
        raise SpecbenchError(f"{FLAG} {text!r}: expected CURRENT,VOLTAGE,SIGN with CURRENT uA|mA, VOLTAGE uV|mV, "
                             f"SIGN {'|'.join(SIGNS)} (e.g. uA,uV,discharging_negative)")
    return Convention(parts[0], parts[1], parts[2])


def detect_convention(current: Sequence[int], voltage: Sequence[int], status: str) -> Convention:
    """The convention the readings show: units from their magnitudes (UA_FROM, UV_FROM), the
    sign from the current's sign against the battery's status (Discharging or Charging); a
    status that says neither cannot tell, nor can a current of mixed sign: an error naming the flag."""
    if not len(current):
        raise SpecbenchError("energy: no battery samples to detect the convention from",
                             hint=f"name it with {FLAG}")
    current_unit, voltage_unit = _units(current, voltage)
    negative = float(np.mean(np.asarray(current) < 0))
    if status not in ("Discharging", "Charging") or 0.0 < negative < 1.0:
        raise SpecbenchError(f"energy: cannot detect the current's sign (battery status {status!r}, "
                             f"{negative:.0%} of {len(current)} current samples negative)",
                             hint=f"run on battery (status Discharging) or name the convention with {FLAG}, "
                                  "e.g. uA,uV,discharging_negative")
    discharging_negative = (negative == 1.0) == (status == "Discharging")
    return Convention(current_unit, voltage_unit, SIGNS[0] if discharging_negative else SIGNS[1], detected=True)


def _units(current: Sequence[int], voltage: Sequence[int]) -> tuple[str, str]:
    """The units the readings' magnitudes suggest (UA_FROM, UV_FROM)."""
    return ("uA" if abs(np.median(current)) >= UA_FROM else "mA", "uV" if abs(np.median(voltage)) >= UV_FROM else "mV")


def check_plausible(convention: Convention, current: Sequence[int], voltage: Sequence[int]) -> float:
    """The median power (W) of the samples read with `convention`, or a one-line error naming
    the flag, the values and the range a phone draws (PLAUSIBLE_W): a wrong unit or sign."""
    low, high = PLAUSIBLE_W
    power = _median_w(convention, current, voltage)
    if not low <= power <= high:
        how = "detected" if convention.detected else "declared"
        # the units the magnitudes suggest, the sign that makes the draw positive
        units = _units(current, voltage)
        fits = [c for c in (Convention(*units, sign) for sign in SIGNS)
                if low <= _median_w(c, current, voltage) <= high]
        guess = f"; {fits[0].text} gives {_median_w(fits[0], current, voltage):.3g} W" if fits else ""
        raise SpecbenchError(f"{FLAG} {convention.text} ({how}): median battery power {power:.4g} W "
                             f"(current_now {int(np.median(current))}, voltage_now {int(np.median(voltage))} as read) "
                             f"is not what a phone draws ({low}..{high} W): the unit or sign is wrong{guess}")
    return power


def _median_w(convention: Convention, current: Sequence[int], voltage: Sequence[int]) -> float:
    return float(np.median(convention.watts(np.asarray(current), np.asarray(voltage))))


@dataclass(frozen=True)
class PowerTrace:
    """Battery power samples on the decode clock, oldest first."""

    t_us: np.ndarray
    """Sample times, microseconds (the runner's now_us)."""
    watts: np.ndarray
    """Power drawn at each sample, held until the next."""

    @staticmethod
    def of(samples: Sequence[Sequence[int]], convention: Convention) -> PowerTrace:
        """From raw [t_us, current, voltage] samples."""
        array = np.asarray(samples, dtype=np.float64).reshape(-1, 3)
        order = np.argsort(array[:, 0], kind="stable")
        array = array[order]
        return PowerTrace(array[:, 0], convention.watts(array[:, 1], array[:, 2]))

    def energy_j(self, start_us: float, end_us: float) -> float | None:
        """Joules over [start_us, end_us], sample-and-hold; None when no sample is at or before start."""
        if end_us < start_us or not len(self.t_us) or self.t_us[0] > start_us:
            return None
        edges = np.concatenate(([start_us], self.t_us[(self.t_us > start_us) & (self.t_us < end_us)], [end_us]))
        held = self.watts[np.searchsorted(self.t_us, edges[:-1], side="right") - 1]
        return float(np.sum(held * np.diff(edges)) * 1e-6)

    def count(self, start_us: float, end_us: float) -> int:
        """Samples taken within [start_us, end_us]."""
        return int(np.sum((self.t_us >= start_us) & (self.t_us <= end_us)))


@dataclass(frozen=True)
class Idle:
    """The idle draw measured before the first window."""

    watts: float
    """Mean power over the idle period."""
    samples: int
    """Samples taken within it."""
    seconds: float
    """Its duration."""


def idle_power(trace: PowerTrace, start_us: float, end_us: float) -> Idle | None:
    """The idle period's mean power (its energy over its duration); None when it was not covered."""
    energy = trace.energy_j(start_us, end_us)
    seconds = (end_us - start_us) * 1e-6
    if energy is None or seconds <= 0:
        return None
    return Idle(energy / seconds, trace.count(start_us, end_us), seconds)


@dataclass(frozen=True)
class RequestEnergy:
    """What one decode (a request: its prefill and decode) drew."""

    energy_j: float
    """Joules over the request's [start, end]."""
    energy_above_idle_j: float | None
    """energy_j less the idle power over the same time (None: no idle period measured)."""
    samples: int
    """Samples taken within the request."""


def request_energy(trace: PowerTrace, idle: Idle | None, start_us: float, end_us: float) -> RequestEnergy | None:
    """The energy of one request on the decode clock; None when the samples do not cover its start."""
    energy = trace.energy_j(start_us, end_us)
    if energy is None:
        return None
    above = None if idle is None else energy - idle.watts * (end_us - start_us) * 1e-6
    return RequestEnergy(energy, above, trace.count(start_us, end_us))


__all__ = ["Convention", "Idle", "PowerTrace", "RequestEnergy", "check_plausible", "detect_convention",
           "idle_power", "parse_convention", "request_energy"]
