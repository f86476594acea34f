"""Does the host's moment explain replay's per-window error? A validation's speedup errors beside its probes.

Reads a validation directory (`specbench validate --out`, or `bench/fidelity.py --out DIR`'s `DIR/validation`). Per
placement × configuration, each speedup observation's log error (100 × (ln replay − the mean of ln Na and ln Nb)) is
set beside how far each model's probes around that window moved from the block's reference (the median of its
probes around the refreshes; a window's move: the geometric mean of the probes before and after it, in every decode
job that ran it, 100 × ln of that over the reference). Printed: the correlation of the error with the drafter's move
less the target's (a lane that slows for a window while the other does not moves a speedup; a slowdown of both
cancels in it), over all windows and within blocks (both less their block's mean: not the drift between blocks,
which the bias's interval sees), with each model's move alone, and the spread of the moves over windows. A
correlation far from 0 says that what E counts as the model's error is in part the lanes' speeds at the window's
moment, which a profile measured minutes away cannot price (docs/METHODS.md §7.9 Validation: does replay predict the
device?, "Why passes").

    python bench/window_moves.py DIR/validation
"""

from __future__ import annotations

import math
import os
import statistics
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.contention_by_width import kept_records
from specbench.schemas.validation import Metric, ObservationRecord, ProbeRecord, kept, load_records

MODELS = ("target", "drafter")


def job_levels(probes: list[ProbeRecord]) -> dict[tuple[str, int, str, str], dict[str, float]]:
    """(device, block, decode job's series, window) -> per model ('target', 'drafter': the job's), the geometric mean
    of the job's probes before and after the window over the block's reference for that model (the median of its
    probes around the refreshes)."""
    by_block: dict[tuple[str, int], list[ProbeRecord]] = defaultdict(list)
    for p in probes:
        by_block[(p.device, p.block)].append(p)
    out: dict[tuple[str, int, str, str], dict[str, float]] = {}
    for (device, block), mine in by_block.items():
        around = [p for p in mine if not p.series.startswith("decode:")]
        target_reference = statistics.median(p.target_us for p in around)
        drafter_us: dict[str | None, list[float]] = defaultdict(list)
        for p in around:
            if p.drafter_us is not None:
                drafter_us[p.drafter].append(p.drafter_us)
        drafter_reference = {name: statistics.median(v) for name, v in drafter_us.items()}
        jobs: dict[str, list[ProbeRecord]] = defaultdict(list)
        for p in mine:
            if p.series.startswith("decode:"):
                jobs[p.series].append(p)
        for series, job in jobs.items():
            job.sort(key=lambda p: p.t_us)
            for before, after in zip(job, job[1:], strict=False):
                if after.window_id is None:
                    continue
                levels = {"target": math.sqrt(before.target_us * after.target_us) / target_reference}
                reference = drafter_reference.get(after.drafter)
                if before.drafter_us is not None and after.drafter_us is not None and reference is not None:
                    levels["drafter"] = math.sqrt(before.drafter_us * after.drafter_us) / reference
                out[(device, block, series, after.window_id)] = levels
    return out


def window_moves(probes: list[ProbeRecord]) -> dict[tuple[str, int, str], dict[str, float]]:
    """(device, block, window) -> per model, its move around the window (percent, log), over the decode jobs."""
    out: dict[tuple[str, int, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for (device, block, _, window_id), levels in job_levels(probes).items():
        for model, level in levels.items():
            out[(device, block, window_id)][model].append(100 * math.log(level))
    return {key: {m: statistics.fmean(v) for m, v in moves.items()} for key, moves in out.items()}


def centred(values: list[float], blocks: list[int]) -> list[float]:
    """Each value less its block's mean: what varies between a block's windows, not between blocks."""
    means = {b: statistics.fmean(v for v, c in zip(values, blocks, strict=True) if c == b) for b in set(blocks)}
    return [v - means[b] for v, b in zip(values, blocks, strict=True)]


def correlation(xs: list[float], ys: list[float]) -> float:
    return statistics.correlation(xs, ys) if len(xs) > 2 and len(set(xs)) > 1 and len(set(ys)) > 1 else math.nan


def main(argv: list[str] | None = None) -> int:
    directory, blocks, _ = kept_records(__doc__, argv)
    moves = window_moves(list(kept(load_records(directory, ProbeRecord), blocks)))
    errors: dict[tuple[str, str], list[tuple[float, dict[str, float], int]]] = defaultdict(list)
    for o in load_records(directory, ObservationRecord):
        moved = moves.get((o.device, o.block, o.window_id))
        if o.metric != Metric.SPEEDUP or moved is None or set(moved) != set(MODELS):
            continue
        error = 100 * (math.log(o.replay) - (math.log(o.native_a) + math.log(o.native_b)) / 2)
        errors[(o.device, o.config)].append((error, moved, o.block))
    print("| device | config | windows | corr(error, drafter − target move) | within blocks | corr(error, target) | "
          "corr(error, drafter) | spread of moves: target, drafter |")
    print("|---|---|---|---|---|---|---|---|")
    for (device, config), rows in sorted(errors.items()):
        error = [e for e, _, _ in rows]
        target = [m["target"] for _, m, _ in rows]
        drafter = [m["drafter"] for _, m, _ in rows]
        blocks = [b for _, _, b in rows]
        apart = [d - t for d, t in zip(drafter, target, strict=True)]
        print(f"| {device} | {config} | {len(rows)} | {correlation(apart, error):.2f} | "
              f"{correlation(centred(apart, blocks), centred(error, blocks)):.2f} | "
              f"{correlation(target, error):.2f} | {correlation(drafter, error):.2f} | "
              f"{statistics.pstdev(target):.1f}%, {statistics.pstdev(drafter):.1f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
