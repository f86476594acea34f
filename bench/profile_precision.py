"""What does `profile --precision P` cost and buy against the fixed 5 repetitions, on the demo's profile?

Profiles this host with the demo's models and exactly the demo's cells (`app.cost_cells.sweep_plan`, one
placement), alternating in ONE run between the named baseline "fixed-5" (5 repetitions per cell)
and "precision" (each cell until its median's ~95% interval is within P, docs/METHODS.md §4.2 Forward
costs: CT, CD and the all-rows table), the order flipped every round so drift reaches both alike.
Per profile it prints the wall time and the share of forward-cost cells within P (a fixed-5 cell's
precision recomputed from its 5 samples by the same rule), then the medians over rounds and the
ratio precision / fixed-5 of wall time.

    python bench/profile_precision.py [--rounds 3] [--precision 0.02] [--max-repetitions 15]
        [--placement shared] [--depths 0,128] [--method SPEC ...] [--no-cosched]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import replace

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.hostload import idle_check
from specbench.app.cost_cells import sweep_plan
from specbench.app.demo import DEMO_METHODS, DEPTHS, MAX_REPETITIONS, PRECISION, demo_models
from specbench.core.methods.configs import parse_method_specs
from specbench.core.repetitions import achieved_precision
from specbench.schemas.placement import resolve_on
from specbench.world.devices.local import LocalDevice
from specbench.world.profiling import parse_depths, profile_device
from specbench.world.runner import find_runner

BASELINE = "fixed-5"


def within_share(samples: list[dict], precision: float) -> tuple[int, int]:
    """(cells within `precision`, forward-cost cells) of a profile's raw records."""
    cells = [r for r in samples if r.get("kind") == "forward"]
    return sum(achieved_precision(r["samples_us"]) <= precision for r in cells), len(cells)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--precision", type=float, default=PRECISION)
    parser.add_argument("--max-repetitions", type=int, default=MAX_REPETITIONS)
    parser.add_argument("--placement", default="shared")
    parser.add_argument("--depths", default=",".join(str(d) for d in DEPTHS))
    parser.add_argument("--method", action="append", default=None,
                        help="method specs whose cells are profiled (default: the demo's)")
    parser.add_argument("--no-cosched", action="store_true", help="time the cost tables only (no co-scheduling, "
                                                                  "no overheads): both variants measure these alike")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds {args.rounds}: expected >= 1")
    print(f"other processes kept {idle_check():.2f} cores busy before the run", file=sys.stderr)
    device = LocalDevice(runner=find_runner(build=True))
    target, drafters = demo_models()
    configs = parse_method_specs(args.method or list(DEMO_METHODS))
    used = {getattr(c, "drafter", None) for c in configs}
    drafters = [d for d in drafters if d.name in used]
    base = sweep_plan(configs, resolve_on(device, args.placement), parse_depths(args.depths))
    variants = {BASELINE: base,
                "precision": sweep_plan(configs, base.placement, base.depths, args.precision, args.max_repetitions)}
    if args.no_cosched:
        variants = {name: replace(plan, cosched=False, overheads=False) for name, plan in variants.items()}
    walls: dict[str, list[float]] = {name: [] for name in variants}
    shares: dict[str, list[float]] = {name: [] for name in variants}
    for r in range(args.rounds):
        order = list(variants) if r % 2 == 0 else list(reversed(variants))
        for name in order:
            start = time.perf_counter()
            run = profile_device(device, target, drafters, variants[name])
            walls[name].append(time.perf_counter() - start)
            within, cells = within_share(run.samples, args.precision)
            shares[name].append(within / cells)
            forwards = sum(len(s["samples_us"]) for s in run.samples if s.get("kind") == "forward")
            print(f"round {r + 1} {name}: {walls[name][-1]:.1f} s, {within}/{cells} cells within "
                  f"±{100 * args.precision:g}%, {forwards} timed forwards")
    for name in variants:
        print(f"median over {args.rounds} rounds, {name}: {statistics.median(walls[name]):.1f} s, "
              f"{100 * statistics.median(shares[name]):.0f}% of cells within ±{100 * args.precision:g}%")
    ratio = statistics.median(p / b for p, b in zip(walls["precision"], walls[BASELINE], strict=True))
    print(f"precision ±{100 * args.precision:g}% (5..{args.max_repetitions}) / {BASELINE}: wall time x{ratio:.2f} "
          f"(median of the rounds' ratios); cells within: {100 * statistics.median(shares['precision']):.0f}% vs "
          f"{100 * statistics.median(shares[BASELINE]):.0f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
