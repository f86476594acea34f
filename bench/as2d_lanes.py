"""Where a validation's native AS2D decodes spend the target lane's time, against the same run's target-only speed.

Reads a validation directory (`specbench validate --out`, or `bench/fidelity.py --out DIR`'s `DIR/validation`). Per
device × AS2D configuration × kept block, each decode's target forwards are classed by where they fall against the
producer's span on the decode clock (`core/decomposition.producer_span_us`: from its thread's start to its last
forward or publication): `beside` (wholly inside it), `start` (overlapping its start: the decode's first forward),
`end` (overlapping its end) and `after` (wholly after it). The baseline is each forward's solo work as the
decodes' own target-only partner met it: the block's profile price times `k`, the partner decode's time over its
price (`core/decomposition.solo_factor`). Printed per class: its share of the target's forward time,
`us/solo` (its time over that solo work: about the co-scheduling ratio beside the producer, 1 alone), and for
`start` and `end` `us/shared`: its time over what processor sharing gives it, with the block's `beside` ratio
over the part that overlaps the span and solo speed over the rest (docs/METHODS.md §5.2 The two-lane AS2D simulation).
Last, `end`'s `tail`: how long after the span's end the forward behaves as if the producer still ran (median over
forwards; 0 when replay's step change at the span's end holds).

    python bench/as2d_lanes.py DIR/validation
"""

from __future__ import annotations

import os
import statistics
import sys
from dataclasses import dataclass, field

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.contention_by_width import kept_records
from specbench.app.validate import block_profiles
from specbench.core.decomposition import producer_span_us, solo_factor
from specbench.core.pricing import CostTable
from specbench.core.validation_stats import DecodeKey, decode_index, native_lanes
from specbench.schemas.validation import DecodeRecord

CLASSES = ("start", "beside", "end", "after")


@dataclass
class ClassSums:
    forwards: int = 0
    us: float = 0.0
    solo_us: float = 0.0
    edges: list[tuple[float, float, float]] = field(default_factory=list)
    """start and end forwards: (us, solo work in us, lead: for start the time before the producer's start, for end
    the time from the forward's start to the span's end)."""


def forward_class(t0: float, us: float, start: float, end: float) -> str | None:
    """The forward's place against the producer's span [start, end) (None: wholly before it)."""
    if t0 + us <= start:
        return None
    if t0 >= end:
        return "after"
    if t0 < start:
        return "start"
    return "beside" if t0 + us <= end else "end"


def shared_us(solo_us: float, lead_us: float, rho: float, at_start: bool) -> float:
    """The forward's time under processor sharing (docs/METHODS.md §5.2 The two-lane AS2D simulation): at the
    start, solo for `lead_us` and the rest at `rho`; at the end, at `rho` for `lead_us` and the rest solo."""
    if at_start:
        return lead_us + rho * max(0.0, solo_us - lead_us)
    return rho * solo_us if solo_us * rho <= lead_us else lead_us + solo_us - lead_us / rho


def tail_us(us: float, solo_us: float, lead_us: float, rho: float) -> float:
    """How long after the span's end an end forward ran as if beside the producer: its shared part x solves
    us = x + solo - x / rho."""
    return (us - solo_us) * rho / (rho - 1.0) - lead_us


def block_sums(decodes: list[DecodeRecord], config: str, costs: CostTable,
               index: dict[DecodeKey, DecodeRecord]) -> dict[str, ClassSums]:
    """Per class, the block's lossless decodes of `config`: forwards, time and solo work."""
    sums = {c: ClassSums() for c in CLASSES}
    for d in decodes:
        if d.config != config or d.producer is None or not d.lossless:
            continue
        k = solo_factor(native_lanes(d, index).solo_ops, costs)
        start, end = producer_span_us(d.producer)
        for op in d.ops:
            if op["model"] != "target":
                continue
            t0, us = float(op["t_us"]), float(op["us"])
            cls = forward_class(t0, us, start, end)
            if cls is None:
                continue
            acc = sums[cls]
            solo = k * 1e6 * costs.cost(int(op["width"]), float(op["depth"]))
            acc.forwards += 1
            acc.us += us
            acc.solo_us += solo
            if cls in ("start", "end"):
                acc.edges.append((us, solo, start - t0 if cls == "start" else end - t0))
    return sums


def main(argv: list[str] | None = None) -> int:
    validation, blocks, decodes = kept_records(__doc__, argv)
    profiles = block_profiles(validation, blocks)
    print(f"{'device':14s} {'block':>5s} {'config':28s} {'class':6s} {'forwards':>8s} {'time %':>7s} {'us/solo':>8s} "
          f"{'us/shared':>9s} {'tail ms':>8s}")
    for b in sorted(blocks, key=lambda b: (b.device, b.block)):
        costs = profiles[(b.device, b.block)].target_costs
        mine = [d for d in decodes if (d.device, d.block) == (b.device, b.block)]
        index = decode_index(mine)
        for config in sorted({d.config for d in mine if d.producer is not None}):
            sums = block_sums(mine, config, costs, index)
            total = sum(s.us for s in sums.values())
            beside = sums["beside"]
            rho = beside.us / beside.solo_us if beside.solo_us > 0 else None
            for cls, acc in sums.items():
                if not acc.forwards:
                    continue
                shared = tail = "-"
                if acc.edges and rho is not None and rho > 1:
                    at_start = cls == "start"
                    priced = sum(shared_us(solo, lead, rho, at_start) for _, solo, lead in acc.edges)
                    shared = f"{acc.us / priced:9.3f}"
                    if not at_start:
                        tails = [tail_us(us, solo, lead, rho) for us, solo, lead in acc.edges]
                        tail = f"{statistics.median(tails) / 1e3:8.1f}"
                share = 100 * acc.us / total
                print(f"{b.device:14s} {b.block:5d} {config:28s} {cls:6s} {acc.forwards:8d} {share:7.1f} "
                      f"{acc.us / acc.solo_us:8.3f} {shared:>9s} {tail:>8s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
