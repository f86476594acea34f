"""Battery energy of a native run (docs/METHODS.md §10 Energy): the decode job's "energy" key, and
the runner's samples attributed to each decode record as they arrive.

The runner flushes its samples after each window; a window's records are attributed once a
sample at or after their last end has arrived (every earlier sample is then known: one
sampler thread emits them in time order), or when the job ends. The convention is named
(--energy-convention) or detected from the first samples and the battery's status, and
checked for plausibility before any row is written.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from specbench.core.energy import (
    Convention,
    Idle,
    PowerTrace,
    check_plausible,
    detect_convention,
    idle_power,
    request_energy,
)
from specbench.errors import SpecbenchError
from specbench.schemas.fileio import append_jsonl
from specbench.schemas.results import EnergyRecord

SUPPLY = "/sys/class/power_supply/battery"
DEFAULT_PATHS = (f"{SUPPLY}/current_now", f"{SUPPLY}/voltage_now", f"{SUPPLY}/status")
"""current_now, voltage_now and status of the usual battery supply."""
NO_SOURCE = "no energy source"
SAMPLES_FILE = "energy_samples.jsonl"
"""The raw batches as the runner sent them (t_us, current, voltage) and the idle period, kept so
that a run can be attributed again (another convention) or audited."""


@dataclass(frozen=True)
class EnergySettings:
    """What `run --native` asks of the runner's battery sampler."""

    interval_ms: int
    """--energy-interval: milliseconds between samples (> 0)."""
    idle_s: float
    """--energy-idle: seconds of idle draw measured before the first window."""
    convention: Convention | None = None
    """--energy-convention; None: detected from the samples."""
    paths: tuple[str, str, str] = DEFAULT_PATHS
    """--energy-paths: current, voltage and status files on the device."""

    def job(self) -> dict:
        """The decode job's "energy" object (native/README.md)."""
        current, voltage, status = self.paths
        return {"current": current, "voltage": voltage, "status": status, "interval_ms": self.interval_ms,
                "idle_ms": round(self.idle_s * 1000)}

    def record(self) -> EnergyRecord:
        """The manifest's energy entry before anything is measured (what a resume must match)."""
        return EnergyRecord(self.interval_ms, self.idle_s, None if self.convention is None else self.convention.text,
                            *self.paths)


class EnergyLog:
    """One decode job's battery samples, idle period and convention, fed the runner's lines."""

    def __init__(self, settings: EnergySettings, directory: Path):
        self.settings = settings
        self._file = Path(directory) / SAMPLES_FILE
        self.record = settings.record()
        self._samples: list[list[int]] = []
        self._status = ""
        self._idle_span: tuple[int, int] | None = None
        self._idle: Idle | None = None
        self._trace: PowerTrace | None = None
        self._convention: Convention | None = settings.convention

    def take(self, doc: dict) -> bool:
        """File an energy event or result line; False for any other line."""
        if doc.get("event") == "energy":
            if doc.get("source") is None:
                named = dict(zip(("current", "voltage", "status"), self.settings.paths, strict=True))
                missing = named.get(str(doc.get("key")), doc.get("missing"))
                if doc.get("value") is not None:  # read, but no number: a wrong path, not a missing battery
                    raise SpecbenchError(f"--energy-paths: {doc.get('key')} file {missing} holds "
                                         f"{str(doc['value'])[:40]!r}, expected an integer reading",
                                         hint="name the battery's current_now and voltage_now files")
                self.record = replace(self.record, no_source=f"{NO_SOURCE}: {missing} cannot be read")
            else:
                self._status = str(doc.get("status") or "")
            return True
        result = doc.get("result") or {}
        if result.get("kind") in ("energy", "energy_idle"):
            append_jsonl(self._file, [result])
        if result.get("kind") == "energy":
            self._samples += [list(map(int, s)) for s in result["samples"]]
            self._status = str(result.get("status") or self._status)
            self._trace = None
            return True
        if result.get("kind") == "energy_idle":
            self._idle_span = (int(result["start_us"]), int(result["end_us"]))
            return True
        return False

    @property
    def sampling(self) -> bool:
        """The runner sampled (its files could be read)."""
        return self.record.no_source is None and bool(self._samples)

    def covers(self, records: list[dict]) -> bool:
        """Every sample up to the records' last end has arrived."""
        ends = [r["end_us"] for r in records if "end_us" in r]
        return bool(self._samples) and (not ends or self._samples[-1][0] >= max(ends))

    def attach(self, records: list[dict]) -> None:
        """Give every decode record its "energy" (energy_j, energy_above_idle_j, energy_samples)."""
        if not self.sampling:
            return
        trace = self._power()
        for record in records:
            if "start_us" not in record:
                continue
            found = request_energy(trace, self._idle, record["start_us"], record["end_us"])
            if found is not None:
                record["energy"] = {"energy_j": found.energy_j, "energy_above_idle_j": found.energy_above_idle_j,
                                    "energy_samples": found.samples}

    def _power(self) -> PowerTrace:
        """The samples as power, the convention fixed and checked on first use, the idle draw measured."""
        if self._trace is not None:
            return self._trace
        currents = [s[1] for s in self._samples]
        voltages = [s[2] for s in self._samples]
        if self._convention is None:
            self._convention = detect_convention(currents, voltages, self._status)
        check_plausible(self._convention, currents, voltages)
        self._trace = PowerTrace.of(self._samples, self._convention)
        if self._idle_span is not None and self._idle is None:
            self._idle = idle_power(self._trace, *self._idle_span)
        idle = self._idle
        span = self._idle_span if idle is not None else None
        self.record = replace(self.record, convention=self._convention.text, detected=self._convention.detected,
                              status=self._status or None, samples=len(self._samples),
                              idle_w=None if idle is None else idle.watts,
                              idle_samples=None if idle is None else idle.samples,
                              idle_start_us=None if span is None else span[0],
                              idle_end_us=None if span is None else span[1])
        return self._trace

    def finish(self) -> EnergyRecord:
        """The manifest's energy entry after the job: what was found and measured (its sample count
        includes the batches flushed after the last window's records were attributed)."""
        if self.sampling:
            self._power()
        if self.record.no_source is None and not self._samples:
            self.record = replace(self.record, no_source=f"{NO_SOURCE}: the runner took no samples")
        return self.record


def row_energy(record: dict) -> dict:
    """The row fields of a decode record's energy (None each when it has none)."""
    found: dict = record.get("energy") or {}
    return {key: found.get(key) for key in ("energy_j", "energy_above_idle_j", "energy_samples")}

