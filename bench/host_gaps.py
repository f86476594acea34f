"""How much of a native decode is host work between forwards, and where does it fall?

Reads a finished validation directory (`specbench validate --out`, or `bench/fidelity.py --out DIR`'s
`DIR/validation`). Per placement and configuration: the share of the kept decodes' time that no forward of the op
log covers (the decode's time less its forwards'). Per placement and serial decode: the host work after each
forward by model and width class, from the runner's op starts where the decodes recorded them
(`core/pricing.py` `timed_forwards`, what a profile prices: docs/METHODS.md §4.4 Overheads), else a least-squares
fit over the decodes of their time outside forwards on their counts of drafter forwards, target single-token
steps, verifications and verified rows, and a constant (records made before the runner stamped serial ops).

    python bench/host_gaps.py DIR/validation
"""

from __future__ import annotations

import os
import statistics
import sys
from collections import defaultdict

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.contention_by_width import kept_records
from specbench.core.pricing import timed_forwards


def main(argv: list[str] | None = None) -> int:
    _, _, decodes = kept_records(__doc__, argv)
    decodes = [d for d in decodes if d.lossless and d.decode_s > 0]
    share: dict[tuple[str, str], list[float]] = defaultdict(list)
    for d in decodes:
        share[(d.device, d.config)].append(1 - sum(op["us"] for op in d.ops) / (1e6 * d.decode_s))
    print("| device | configuration | decodes | time outside forwards |")
    print("|---|---|---|---|")
    for (device, config), mine in sorted(share.items()):
        print(f"| {device} | {config} | {len(mine)} | {100 * statistics.fmean(mine):.1f}% |")
    serial = [d for d in decodes if d.producer is None]
    timed: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    rows: dict[str, list[list[float]]] = defaultdict(list)
    for d in serial:
        forwards = timed_forwards(d.ops, 1e6 * d.decode_s)
        for model, (width, _, _, host) in forwards:
            if host is not None:
                timed[(d.device, model, "w=1" if width == 1 else "wider")].append(host / 1e3)
        wide = [op["width"] for op in d.ops if op["model"] == "target" and op["width"] > 1]
        rows[d.device].append([sum(op["model"] != "target" for op in d.ops),
                               sum(op["model"] == "target" and op["width"] == 1 for op in d.ops), len(wide),
                               sum(wide), 1.0, 1e3 * d.decode_s - sum(op["us"] for op in d.ops) / 1e3])
    if timed:
        print("\n| device | model | class | forwards | host work after each (mean, median ms) |")
        print("|---|---|---|---|---|")
        for (device, model, kind), mine in sorted(timed.items()):
            print(f"| {device} | {model} | {kind} | {len(mine)} | {statistics.fmean(mine):.3f}, "
                  f"{statistics.median(mine):.3f} |")
        return 0
    print("\n| device | per drafter forward | per single-token step | per verification | per verified row | "
          "constant | residual sd (ms) |")
    print("|---|---|---|---|---|---|---|")
    for device, mine in sorted(rows.items()):
        a = np.array(mine)
        coef, *_ = np.linalg.lstsq(a[:, :5], a[:, 5], rcond=None)
        residual = a[:, 5] - a[:, :5] @ coef
        print(f"| {device} | " + " | ".join(f"{c:.3f}" for c in coef) + f" | {residual.std():.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
