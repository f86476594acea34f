"""The AS2D producer's steps as a validation's native decodes ran them, beside what each block's profile priced.

Reads a validation directory (`specbench validate --out`, or `bench/fidelity.py --out DIR`'s `DIR/validation`). Per
placement × AS2D configuration, over the kept blocks' lossless native decodes, each producer step's drafter forward
(its start and end on the decode clock) is classed by how much of it the target lane spent in forwards: `alone`
(under 5%), `beside` (over 95%) or partly. A step is priced as replay prices the producer's forwards (docs/METHODS.md
§5.2 The two-lane AS2D simulation): `CD(1)` of the block's profile (the one the validation's replay reads) at the
step's depth, times the drafter's co-scheduling ratio `ρD` at the overlapping target forward's width for the share
of the step beside it. Printed per class: steps, the sum of their durations over the sum of their prices
(`met/priced`: below 1, the producer ran faster than replay lets it and published earlier), and the medians of
duration / `CD(1)` and of the priced `ρD`; then the host work between steps (the gap from one step's end to the
next one's start) against the profile's `producer_step_s`, and the producer's start against `producer_startup_s`.
The validation's decomposition ("publication") says how much the publication times move the speedup; this says
whether the producer's forwards, its host work or its start are what moved them.

The producer's depth at step s is taken as the target's first forward's depth plus s (the drafter's own prompt
length is in the trace, not the record; a small model's `CD(1)` moves little over a window's depths).

    python bench/producer_steps.py DIR/validation
"""

from __future__ import annotations

import os
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass, field

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.contention_by_width import kept_records
from specbench.app.validate import block_profiles
from specbench.schemas.profiles import DeviceProfile
from specbench.schemas.validation import DecodeRecord

ALONE, BESIDE = 0.05, 0.95
"""A step is `alone` when the target lane was in forwards for less than this share of it, `beside` above BESIDE."""


@dataclass
class Steps:
    """What one placement × configuration's producer did, and its prices."""

    met: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    priced: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    over_cell: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    rho: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    host_us: list[float] = field(default_factory=list)
    host_priced_us: list[float] = field(default_factory=list)
    start_us: list[float] = field(default_factory=list)
    start_priced_us: list[float] = field(default_factory=list)


def classify(share: float) -> str:
    return "alone" if share < ALONE else "beside" if share > BESIDE else "partly"


def add_decode(steps: Steps, record: DecodeRecord, profile: DeviceProfile) -> None:
    """One native AS2D decode's producer steps, each with its price on `profile`."""
    producer = record.producer or {}
    costs, cosched = profile.drafter(record.group).costs, profile.cosched(record.group)
    overheads = profile.overheads_of(record.group)
    forwards = [(op["t_us"], op["t_us"] + op["us"], op["width"]) for op in record.ops if op["model"] == "target"]
    depth0 = next(op["depth"] for op in record.ops if op["model"] == "target")
    starts, ends = producer.get("step_start_us", []), producer.get("step_us", [])
    for s, (start, end) in enumerate(zip(starts, ends, strict=False), start=1):
        duration = end - start
        if duration <= 0:
            continue
        beside, width = 0.0, 1
        for begin, finish, w in forwards:
            overlap = min(finish, end) - max(begin, start)
            if overlap > 0:
                beside, width = beside + overlap, w
        share = beside / duration
        cell_us = costs.cost(1, depth0 + s) * 1e6
        rho_drafter = cosched.ratios(width, depth0 + s)[1]
        kind = classify(share)
        steps.met[kind].append(duration)
        steps.priced[kind].append(cell_us * (1.0 - share + share * rho_drafter))
        steps.over_cell[kind].append(duration / cell_us)
        steps.rho[kind].append(rho_drafter)
    steps.host_us += [b - a for a, b in zip(ends, starts[1:], strict=False)]
    steps.host_priced_us.append((overheads.producer_step_s or 0.0) * 1e6)
    if "started_us" in producer:
        steps.start_us.append(producer["started_us"])
        steps.start_priced_us.append(overheads.producer_startup_s * 1e6)


def main(argv: list[str] | None = None) -> int:
    validation, blocks, decodes = kept_records(__doc__, argv)
    profiles = block_profiles(validation, blocks)
    by_config: dict[tuple[str, str], Steps] = defaultdict(Steps)
    for record in decodes:
        if record.producer is None or not record.lossless or not record.ops:
            continue
        add_decode(by_config[(record.device, record.config)], record, profiles[(record.device, record.block)])
    print(f"{'device':14s} {'config':28s} {'steps':7s} {'n':>6s} {'met/priced':>10s} {'dur/CD(1)':>10s} "
          f"{'priced ρD':>10s}")
    for (device, config), steps in sorted(by_config.items()):
        for kind in ("alone", "partly", "beside"):
            met, priced = steps.met.get(kind, []), steps.priced.get(kind, [])
            if not met:
                continue
            print(f"{device:14s} {config:28s} {kind:7s} {len(met):6d} {sum(met) / sum(priced):10.3f} "
                  f"{statistics.median(steps.over_cell[kind]):10.3f} {statistics.median(steps.rho[kind]):10.3f}")
        if steps.host_us:
            host, priced_host = statistics.median(steps.host_us), statistics.median(steps.host_priced_us)
            print(f"{device:14s} {config:28s} host work between steps: median {host:.0f} us, mean "
                  f"{statistics.mean(steps.host_us):.0f} us; priced {priced_host:.0f} us")
        if steps.start_us:
            print(f"{device:14s} {config:28s} start: median {statistics.median(steps.start_us):.0f} us; priced "
                  f"{statistics.median(steps.start_priced_us):.0f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
