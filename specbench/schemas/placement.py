"""Placement (docs/METHODS.md §4.1 Placement): where each lane's model runs — processor, CPU set, threads.

A cost is only true in the placement it was measured in, so a profile records one, native
runs use the profile's, and the report never pairs or mixes rows of different placements.

Named placements over the CPUs a device lets the runner use (`cpus`, in order):

    split   target on the first half of the CPUs, drafter on the rest, one thread per CPU
            (on a 2-core host: target CPU 0 / 1 thread, drafter CPU 1 / 1 thread)
    shared  both models on all the CPUs, one thread per CPU each (one at a time for
            serial methods; AS2D's two lanes then contend for the same cores)

or an explicit one, `target=PROC@CPUS[/THREADS],drafter=PROC@CPUS[/THREADS]`, e.g.
`target=GPUOpenCL@4-7/1,drafter=cpu@0-3` (PROC: `cpu` or a ggml device name; CPUS: a
list such as 0-3 or 4+6; THREADS defaults to the number of CPUs).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from specbench.errors import SpecbenchError
from specbench.schemas.fileio import Invalid, Where, from_dict, rule, to_dict

NAMED = ("split", "shared")
UNRECORDED = "unrecorded"
"""The placement of a synthetic profile built in memory (tests, benches): no lanes measured."""


@dataclass(frozen=True)
class Lane:
    processor: str = field(metadata=rule(check=bool, expected="`cpu` or a ggml device name"))
    """`cpu` or a ggml device name (e.g. GPUOpenCL)."""
    cpus: tuple[int, ...] = field(metadata=rule(low=0, check=bool, expected="a non-empty list of CPU numbers"))
    """CPU numbers the lane's threads are pinned to."""
    threads: int = field(metadata=rule(low=1))

    def __post_init__(self) -> None:
        if not self.cpus or min(self.cpus) < 0:
            raise SpecbenchError(f"placement lane CPUs {list(self.cpus)}: expected CPU numbers >= 0")
        if self.threads < 1:
            raise SpecbenchError(f"placement lane threads {self.threads}: expected >= 1")

    @property
    def label(self) -> str:
        return f"{self.processor}@{_cpu_list(self.cpus)}/{self.threads}"


@dataclass(frozen=True)
class Placement:
    name: str
    """split, shared, custom or unrecorded."""
    target: Lane | None = field(default=None, metadata=rule(omit=True))
    """None only in the unrecorded placement (and then both are)."""
    drafter: Lane | None = field(default=None, metadata=rule(omit=True))

    def __post_init__(self) -> None:
        for role in ("target", "drafter"):
            if (getattr(self, role) is None) != (self.name == UNRECORDED):
                raise Invalid(role, "a lane {processor, cpus, threads}" if self.name != UNRECORDED
                              else f"no lane in the {UNRECORDED} placement")

    @property
    def key(self) -> str:
        """What must be equal for two measurements to be comparable."""
        if self.target is None or self.drafter is None:
            return self.name
        return f"{self.name}[target={self.target.label},drafter={self.drafter.label}]"

    def as_dict(self) -> dict:
        return to_dict(self)

    @property
    def recorded(self) -> bool:
        return self.target is not None and self.drafter is not None

    def lanes(self) -> tuple[Lane, Lane]:
        """(target, drafter) of a recorded placement; an unrecorded one names no lanes to run in."""
        if self.target is None or self.drafter is None:
            raise SpecbenchError(f"placement '{self.name}' records no lanes (processors and CPUs)")
        return self.target, self.drafter

    @property
    def label(self) -> str:
        """Short name for tables: split, shared, or the whole key of a custom placement."""
        return self.name if self.name in NAMED or not self.recorded else self.key


UNRECORDED_PLACEMENT = Placement(UNRECORDED, None, None)


def device_label(device: str, placement: Placement) -> str:
    """The `device` of result rows: one device in one placement (`local@split`), so every
    per-device aggregate stays within one placement."""
    return f"{device}@{placement.label}" if placement.recorded else device


def device_of(label: str) -> str:
    """The device a `device_label` names (placements of one device share their baselines)."""
    return label.split("@", 1)[0]


def resolve_on(device, spec: str) -> Placement:
    """The placement `spec` names on `device` (its usable CPUs and its lanes' processors)."""
    return resolve(spec, device.cpus(), device.processors())


def resolve(spec: str, cpus: Sequence[int], processors: Mapping[str, str] | None = None) -> Placement:
    """The placement `spec` names on a device whose runner may use `cpus` (see the module doc)."""
    processors = processors or {}
    cpus = sorted(set(int(c) for c in cpus))
    if not cpus:
        raise SpecbenchError("--placement: the device reports no usable CPUs")
    target_proc, drafter_proc = processors.get("target", "cpu"), processors.get("drafter", "cpu")
    if spec == "shared":
        return Placement("shared", Lane(target_proc, tuple(cpus), len(cpus)),
                         Lane(drafter_proc, tuple(cpus), len(cpus)))
    if spec == "split":
        if len(cpus) < 2:
            raise SpecbenchError(f"--placement split: needs at least 2 CPUs, the device lets the runner use {cpus}",
                                 hint="use --placement shared")
        half = len(cpus) - len(cpus) // 2
        first, rest = tuple(cpus[:half]), tuple(cpus[half:])
        return Placement("split", Lane(target_proc, first, len(first)), Lane(drafter_proc, rest, len(rest)))
    lanes = _parse_custom(spec)
    for role, lane in lanes.items():
        outside = sorted(set(lane.cpus) - set(cpus))
        if outside:
            raise SpecbenchError(f"--placement '{spec}': the {role} lane names CPU {outside[0]}, which the device "
                                 f"does not let the runner use (usable: {_cpu_list(tuple(cpus))})")
    return Placement("custom", lanes["target"], lanes["drafter"])


_LANE = re.compile(r"^(target|drafter)=([A-Za-z0-9_.-]+)@([0-9+\-]+)(?:/([0-9]+))?$")


def _parse_custom(spec: str) -> dict[str, Lane]:
    expected = ("split, shared, or target=PROC@CPUS[/THREADS],drafter=PROC@CPUS[/THREADS] "
                "(e.g. target=cpu@0-3,drafter=cpu@4-7)")
    lanes: dict[str, Lane] = {}
    for part in spec.split(","):
        match = _LANE.match(part.strip())
        if not match:
            raise SpecbenchError(f"--placement '{spec}': cannot read '{part}'; expected {expected}")
        role, processor, cpu_text, threads = match.groups()
        if role in lanes:
            raise SpecbenchError(f"--placement '{spec}': the {role} lane is given twice")
        cpus = parse_cpus(cpu_text, f"--placement '{spec}'")
        lanes[role] = Lane(processor, cpus, int(threads) if threads else len(cpus))
    missing = [r for r in ("target", "drafter") if r not in lanes]
    if missing:
        raise SpecbenchError(f"--placement '{spec}': no {missing[0]} lane; expected {expected}")
    return lanes


def parse_cpus(text: str, where: str) -> tuple[int, ...]:
    """'0-3' -> (0, 1, 2, 3); '0-1+6' -> (0, 1, 6)."""
    out: list[int] = []
    for piece in text.replace("+", ",").split(","):
        bounds = piece.split("-")
        try:
            lo, hi = (int(bounds[0]), int(bounds[-1])) if len(bounds) <= 2 else (None, None)
        except ValueError:
            lo = hi = None
        if lo is None or hi is None or lo < 0 or hi < lo:
            raise SpecbenchError(f"{where}: CPU list '{text}': expected numbers or ranges such as 0-3")
        out += range(lo, hi + 1)
    return tuple(sorted(set(out)))


def _cpu_list(cpus: tuple[int, ...]) -> str:
    """(0, 1, 2, 5) -> '0-2,5'."""
    parts, start = [], None
    for i, c in enumerate(cpus):
        if start is None:
            start = c
        if i + 1 == len(cpus) or cpus[i + 1] != c + 1:
            parts.append(str(start) if start == c else f"{start}-{c}")
            start = None
    return ",".join(parts)


def placement_from_dict(doc: object, where: Where) -> Placement:
    """A profile's or manifest's `placement` section (`where` names it in errors)."""
    return from_dict(Placement, doc, where)


def lane_job(lane: Lane | None) -> dict:
    """The runner's model-object keys for a lane: threads, CPU set, processor."""
    if lane is None:
        return {}
    return {"threads": lane.threads, "cpus": list(lane.cpus), "device": lane.processor}


def pinning_problems(placement: Placement, report: dict) -> list[str]:
    """Where the runner's `pinning` event (CPU sets read back per lane) disagrees with the placement."""
    problems: list[str] = []
    if not placement.recorded:
        return problems
    lanes = {"target": placement.target, "drafter": placement.drafter}
    for entry in report.get("lanes", []):
        lane = lanes.get(entry.get("lane"))
        if lane is not None and tuple(entry.get("read_back", [])) != lane.cpus:
            problems.append(f"the {entry['lane']} lane asked for CPUs {_cpu_list(lane.cpus)} and runs on "
                            f"{entry.get('read_back')}")
    return problems
