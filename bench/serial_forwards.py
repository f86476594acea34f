"""SD's forwards against their cells, as a validation's native serial decodes met them (docs/METHODS.md §5.1 Serial
pricing prices each at its cell).

Reads a validation directory (`specbench validate --out`, or `bench/fidelity.py --out DIR`'s `DIR/validation`):
per placement and kept block, each class of the SD decodes' forwards — the target's verifications, the drafter's
first forward after a verification (`after`) and its later drafting steps (`steps`) — as their time over the
block's cells, and over the same ratio of the block's target-only decodes (`/target`: what a serial decode's
forwards cost beyond a target-only one's, the device's drift between the cells and the decodes divided out).

    python bench/serial_forwards.py DIR/validation
"""

from __future__ import annotations

import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.contention_by_width import kept_records
from specbench.app.validate import block_profiles

CLASSES = ("verify", "after", "steps")


def op_class(op: dict, previous: str | None) -> str | None:
    """The class of one op of an SD decode's log (None: a single-token target step, rare)."""
    if op["model"] == "target":
        return "verify" if int(op["width"]) > 1 else None
    return "after" if previous == "target" else "steps"


def row(device: str, block: str, config: str, sums: dict[str, list[float]]) -> str:
    """One printed line: target-only's time over its cells, then each class's over its cells and over that."""
    k = sums["solo"][0] / sums["solo"][1]
    return (f"{device:14s} {block:>5s} {config:24s} {k:11.3f} "
            + " ".join(f"{sums[c][0] / sums[c][1] / k:14.3f} ({sums[c][2]:5d})" if sums[c][1] else f"{'-':>22s}"
                       for c in CLASSES))


def main(argv: list[str] | None = None) -> int:
    validation, blocks, decodes = kept_records(__doc__, argv)
    profiles = block_profiles(validation, blocks)
    print(f"{'device':14s} {'block':>5s} {'config':24s} {'target-only':>11s} "
          + " ".join(f"{c + ' /target (n)':>22s}" for c in CLASSES))
    pooled: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0.0, 0.0, 0]))
    for b in sorted(blocks, key=lambda b: (b.device, b.block)):
        profile = profiles[(b.device, b.block)]
        mine = [d for d in decodes if (d.device, d.block) == (b.device, b.block) and d.lossless]
        solo = [0.0, 0.0, 0]
        for op in (op for d in mine if d.config == "target" for op in d.ops):
            solo[0] += op["us"]
            solo[1] += 1e6 * profile.target_costs.cost(op["width"], op["depth"])
            solo[2] += 1
        for config in sorted({d.config for d in mine if d.config.startswith("sd[")}):
            group = next(d.group for d in mine if d.config == config)
            drafter = profile.drafter(group)
            sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0], solo=solo)
            for d in (d for d in mine if d.config == config):
                previous = None
                for op in d.ops:
                    name = op_class(op, previous)
                    previous = "target" if op["model"] == "target" else "drafter"
                    if name is None:
                        continue
                    table = profile.target_costs if op["model"] == "target" else drafter.costs
                    for acc in (sums[name], pooled[(b.device, config)][name]):
                        acc[0] += op["us"]
                        acc[1] += 1e6 * table.cost(op["width"], op["depth"])
                        acc[2] += 1
            pooled[(b.device, config)]["solo"] = [a + v for a, v in zip(pooled[(b.device, config)]["solo"], solo,
                                                                        strict=True)]
            print(row(b.device, str(b.block), config, sums))
    for (device, config), sums in sorted(pooled.items()):
        print(row(device, "all", config, sums))
    return 0


if __name__ == "__main__":
    sys.exit(main())
