"""Is AS2D's per-window error the producer's speed in that decode, or the window's own?

Reads a validation directory (`specbench validate --out`, or `bench/fidelity.py --out DIR`'s `DIR/validation`). Per
placement × AS2D configuration, each speedup observation's two runs (Na, Nb) are set beside their AS2D decodes' mean
producer step (a drafter forward's start to end on the decode clock; with repeats, the mean over the run's decodes).
Printed, within blocks (each value less its block's mean, so drift between blocks stays out): the correlation of a
run's log error (ln replay − ln native) with its own log mean step, of Na's step with Nb's, and of Na's error with
Nb's; the spread of the steps; and over the windows seen in two or more blocks, the correlation of a window's error
(the mean of its runs') between its first two blocks. A run's error that follows its own step while the two runs'
steps are unrelated is the producer's speed scattering from decode to decode: noise, which the floor F0 counts. Errors
shared by a window's runs and repeated across blocks are the window's own: what E counts as the model's
(docs/METHODS.md §7.9 Validation: does replay predict the device?).

    python bench/producer_windows.py DIR/validation
"""

from __future__ import annotations

import math
import os
import statistics
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.contention_by_width import kept_records
from bench.window_moves import centred, correlation
from specbench.schemas.validation import Metric, ObservationRecord, load_records


def main(argv: list[str] | None = None) -> int:
    validation, _, decodes = kept_records(__doc__, argv)
    steps: dict[tuple[str, str, int, str, str], list[float]] = defaultdict(list)
    for d in decodes:
        if d.producer is None or not d.lossless or not d.producer.get("step_us"):
            continue
        spans = [end - start for start, end in zip(d.producer["step_start_us"], d.producer["step_us"], strict=False)]
        steps[(d.device, d.config, d.block, d.window_id, d.run)].append(statistics.fmean(spans))
    rows: dict[tuple[str, str], list[tuple[int, str, float, float, float, float]]] = defaultdict(list)
    for o in load_records(validation, ObservationRecord):
        a, b = (steps.get((o.device, o.config, o.block, o.window_id, run)) for run in ("a", "b"))
        if o.metric != Metric.SPEEDUP or a is None or b is None:
            continue
        rows[(o.device, o.config)].append((o.block, o.window_id, math.log(statistics.fmean(a)),
                                           math.log(statistics.fmean(b)), math.log(o.replay / o.native_a),
                                           math.log(o.replay / o.native_b)))
    print("| device | config | windows | corr(error, own step): Na, Nb | corr(step Na, step Nb) | "
          "corr(error Na, error Nb) | spread of steps | corr(window's error, first two blocks) |")
    print("|---|---|---|---|---|---|---|---|")
    for (device, config), mine in sorted(rows.items()):
        blocks = [r[0] for r in mine]
        step_a, step_b, error_a, error_b = (centred([r[i] for r in mine], blocks) for i in range(2, 6))
        by_window: dict[str, list[float]] = defaultdict(list)
        for _, window_id, _, _, ea, eb in sorted(mine):  # in block order
            by_window[window_id].append((ea + eb) / 2)
        repeated = [v for v in by_window.values() if len(v) >= 2]
        print(f"| {device} | {config} | {len(mine)} | {correlation(error_a, step_a):.2f}, "
              f"{correlation(error_b, step_b):.2f} | {correlation(step_a, step_b):.2f} | "
              f"{correlation(error_a, error_b):.2f} | {100 * statistics.pstdev(step_a + step_b):.1f}% | "
              f"{correlation([v[0] for v in repeated], [v[1] for v in repeated]):.2f} over {len(repeated)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
