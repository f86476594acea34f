"""Would AS2D's replay predict native better as the mean over the producer's decode-to-decode speed scatter?

Reads a finished validation directory (`specbench validate --out`, or `bench/fidelity.py --out DIR`'s
`DIR/validation`). AS2D's replay is one deterministic timeline, while a native decode's producer runs faster or
slower than the profile's price from one decode to the next (13% on this project's host, `bench/producer_windows.py`),
and where a batch lands just before or after the target's last tokens, that moves a window's time by 1.4-2x. Here
each AS2D window of each kept block is replayed again with the producer's whole timeline (its forwards, host work
and publications) scaled by `exp(sigma z)` at the 7 Gauss-Hermite nodes z of a standard normal, and priced at the
weighted mean of those decode times: the expected time under a lognormal scatter of the producer's speed. Printed
per placement and AS2D configuration, for each sigma (0: as the validation prices it): speedup bias [90%], E (point,
upper 95%) and F0 (`core/validation_stats.summarize`). The target's forwards and the ratios stay as priced.

    python bench/jitter_replay.py DIR/validation [--sigmas 0.05,0.1,0.15]
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.contention_by_width import fidelity_text, validation_inputs
from specbench.app.validate import block_profiles
from specbench.core.methods.configs import As2dConfig
from specbench.core.replay.bulk import trace_for
from specbench.core.replay.reference import priced_lane, simulate_as2d
from specbench.core.validation_stats import summarize
from specbench.schemas.profiles import DeviceProfile
from specbench.schemas.traces import WindowTrace
from specbench.schemas.validation import BlockRecord, Metric, ObservationRecord, load_records

NODES, WEIGHTS = np.polynomial.hermite_e.hermegauss(7)
WEIGHTS = WEIGHTS / WEIGHTS.sum()


def scaled_decode_s(trace: WindowTrace, cap: int, profile: DeviceProfile, config: As2dConfig, factor: float) -> float:
    """AS2D's replayed decode time of a window with the producer's priced timeline scaled by `factor`."""
    lane = priced_lane(trace, profile, config)
    timeline = dataclasses.replace(lane.timeline, cum=lane.timeline.cum * factor,
                                   publish_work=lane.timeline.publish_work * factor)
    return simulate_as2d(trace, cap, profile, config, lane=dataclasses.replace(lane, timeline=timeline))[0].decode_s


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("validation", type=Path)
    parser.add_argument("--sigmas", default="0.05,0.1,0.15", help="log-scale scatters of the producer's speed")
    args = parser.parse_args(argv)
    sigmas = [0.0, *(float(s) for s in args.sigmas.split(","))]
    inputs = validation_inputs(args.validation)
    traces, bounds = inputs.traces, inputs.bounds
    as2d = {c.label: c for c in inputs.configs if isinstance(c, As2dConfig)}
    caps = {w.window_id: w.cap for w in inputs.windows.values()}
    profiles = block_profiles(args.validation, [b for b in load_records(args.validation, BlockRecord)
                                                if not b.voided])
    observed = [o for o in load_records(args.validation, ObservationRecord)
                if o.metric == Metric.SPEEDUP and o.config in as2d]
    times: dict[tuple[str, int, str, str], np.ndarray] = {}  # per sigma, the decode time at each node
    for o in observed:
        config, profile = as2d[o.config], profiles[(o.device, o.block)]
        trace = trace_for(traces, config, o.window_id)[1]
        times[(o.device, o.block, o.config, o.window_id)] = np.array([
            [scaled_decode_s(trace, caps[o.window_id], profile, config, math.exp(s * z)) for z in NODES]
            for s in sigmas])
    print("| placement | configuration | sigma | speedup bias [90%], E (point ≤ upper 95%) | F0 |")
    print("|---|---|---|---|---|")
    for i, sigma in enumerate(sigmas):
        # replay's speedup scales inversely with AS2D's time: priced at the mean time instead of the timeline's
        moved = [dataclasses.replace(o, replay=o.replay * t[0, 3] / float(WEIGHTS @ t[i])) for o in observed
                 for t in [times[(o.device, o.block, o.config, o.window_id)]]]
        for s in sorted(summarize(moved, bounds), key=lambda s: (s.device, s.config)):
            print(f"| {s.device} | {s.config} | {sigma:g} | {fidelity_text(s)} | {s.f0_pct:.1f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
