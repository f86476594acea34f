"""How AS2D's replay predicts native as the mean over the producer's decode-to-decode pace scatter, at each sigma.

Reads a finished validation directory (`specbench validate --out`, or `bench/fidelity.py --out DIR`'s
`DIR/validation`). A native decode's producer runs faster or slower against the target from one decode to the next,
and where a batch lands just before or after one of the target's forward boundaries, that moves a window's time by
whole forwards. Here each AS2D window of each kept block is replayed again with the producer's whole timeline (its
forwards, host work and publications) scaled by `exp(sigma z)` at the pace nodes z (`core.pricing.PACE_NODES`: 15
equally likely slices of a standard normal) and priced at the mean of those decode times, as replay prices it with
the pace scatter a profile measured (docs/METHODS.md §5.2 The two-lane AS2D simulation, "The pace scatter"), here
at each sigma given whatever the block's profile holds. Printed per placement and AS2D configuration,
first as the validation priced it (its profiles' own pace scatter, if any), then for each sigma (0: one timeline):
speedup bias [90%], E (point, upper 95%) and F0 (`core/validation_stats.summarize`). The target's forwards and the
ratios stay as priced. With `--own-pace`, also at the scatter the validation's own kept decodes measured per placement
and configuration (`own_pace`: a profile measuring it in the same decodes would price that): how a validation run
before profiles measured the scatter would have read.

`--nodes` prices the mean by another rule than replay's (how much the rule matters).

    python bench/jitter_replay.py DIR/validation [--sigmas 0.05,0.1,0.15] [--own-pace] [--nodes slices:31]
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

from bench.contention_by_width import fidelity_text, kept_records, validation_inputs
from specbench.app.validate import block_profiles
from specbench.core.decomposition import NativeLanes, pace_scatter
from specbench.core.methods.configs import As2dConfig
from specbench.core.pricing import PACE_NODES, PACE_WEIGHTS, pace_slices
from specbench.core.replay.bulk import trace_for
from specbench.core.replay.reference import expected_as2d, priced_lane, scaled_timeline, simulate_as2d
from specbench.core.stats import pooled_sd
from specbench.core.validation_stats import summarize
from specbench.schemas.profiles import DeviceProfile
from specbench.schemas.traces import WindowTrace
from specbench.schemas.validation import BlockRecord, Metric, ObservationRecord, load_records


def scaled_decode_s(trace: WindowTrace, cap: int, profile: DeviceProfile, config: As2dConfig, factor: float) -> float:
    """AS2D's replayed decode time of a window with the producer's priced timeline scaled by `factor`."""
    lane = priced_lane(trace, profile, config)
    timeline = scaled_timeline(lane.timeline, factor)
    return simulate_as2d(trace, cap, profile, config, lane=dataclasses.replace(lane, timeline=timeline))[0].decode_s


def rule(spec: str) -> tuple[np.ndarray, np.ndarray]:
    """(nodes, weights) of `--nodes`: 'slices:N' or 'hermite:N'."""
    kind, _, count = spec.partition(":")
    n = int(count)
    if kind == "slices":
        return pace_slices(n)
    if kind == "hermite":
        z, w = np.polynomial.hermite_e.hermegauss(n)
        return z, w / w.sum()
    raise SystemExit(f"--nodes: expected slices:N or hermite:N, got {spec!r}")


def key(o: ObservationRecord) -> tuple[str, int, str, str]:
    return (o.device, o.block, o.config, o.window_id)


def own_pace(validation: Path, inputs, profiles: dict, as2d: dict[str, As2dConfig]) -> dict[tuple[str, str], float]:
    """Per (placement, AS2D configuration), the producer's pace scatter of the validation's own kept native AS2D
    decodes (`decomposition.pace_scatter` per block, each decode's window within its block, pooled over the blocks
    as variances): what a profile measuring it in the same decodes would have priced."""
    _, _, decodes = kept_records(__doc__, [str(validation)])
    measured: dict[tuple[str, str], list[tuple[float, int]]] = {}
    for (device, config, block) in sorted({(d.device, d.config, d.block) for d in decodes if d.config in as2d}):
        drafter = str(as2d[config].drafter)
        runs = [NativeLanes(d.ops, d.producer, [], trace_for(inputs.traces, as2d[config], d.window_id)[1]
                            .n_prompt_drafter, d.window_id)
                for d in decodes if (d.device, d.config, d.block) == (device, config, block)
                and d.lossless and d.producer is not None]
        profile = profiles[(device, block)]
        scatter = pace_scatter(runs, profile.target_costs, profile.drafter(drafter).costs)
        if scatter is not None:
            measured.setdefault((device, config), []).append(scatter)
    return {key: pooled_sd(parts)[0] for key, parts in measured.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("validation", type=Path)
    parser.add_argument("--sigmas", default="0.05,0.1,0.15", help="log-scale scatters of the producer's speed")
    parser.add_argument("--nodes", default=None, help="the mean's rule instead of replay's: slices:N (N equally "
                        "likely slices of a standard normal) or hermite:N (an N-node Gauss-Hermite rule)")
    parser.add_argument("--own-pace", action="store_true",
                        help="also the scatter the validation's own decodes measured (`own_pace`), printed with it")
    args = parser.parse_args(argv)
    nodes = (PACE_NODES, PACE_WEIGHTS) if args.nodes is None else rule(args.nodes)
    sigmas = list(dict.fromkeys([0.0, *(float(s) for s in args.sigmas.split(","))]))
    inputs = validation_inputs(args.validation)
    traces, bounds = inputs.traces, inputs.bounds
    as2d = {c.label: c for c in inputs.configs if isinstance(c, As2dConfig)}
    caps = {w.window_id: w.cap for w in inputs.windows.values()}
    profiles = block_profiles(args.validation, [b for b in load_records(args.validation, BlockRecord)
                                                if not b.voided])
    observed = [o for o in load_records(args.validation, ObservationRecord)
                if o.metric == Metric.SPEEDUP and o.config in as2d]
    priced: dict[tuple[str, int, str, str], float] = {}  # the decode time the validation priced
    for o in observed:
        trace = trace_for(traces, as2d[o.config], o.window_id)[1]
        priced[key(o)] = expected_as2d(trace, caps[o.window_id], profiles[(o.device, o.block)],
                                       as2d[o.config])[0].decode_s

    def at(sigma_of) -> list[ObservationRecord]:
        """The observations with replay priced at the mean over `sigma_of(observation)` instead of as priced
        (replay's speedup scales inversely with AS2D's time)."""
        out = []
        for o in observed:
            config, profile = as2d[o.config], profiles[(o.device, o.block)]
            trace = trace_for(traces, config, o.window_id)[1]
            mean = sum(float(w) * scaled_decode_s(trace, caps[o.window_id], profile, config, math.exp(sigma_of(o) * z))
                       for z, w in zip(*nodes, strict=True))
            out.append(dataclasses.replace(o, replay=o.replay * priced[key(o)] / mean))
        return out

    rows: list[tuple[str, list[ObservationRecord]]] = [("as priced", observed)]
    rows += [(f"{sigma:g}", at(lambda o, sigma=sigma: sigma)) for sigma in sigmas]
    if args.own_pace:
        own = own_pace(args.validation, inputs, profiles, as2d)
        rows.append(("own: " + ", ".join(f"{own[k]:.3f}" for k in sorted(own)),
                     at(lambda o: own.get((o.device, o.config), 0.0))))
    print("| placement | configuration | sigma | speedup bias [90%], E (point ≤ upper 95%) | F0 |")
    print("|---|---|---|---|---|")
    for label, moved in rows:
        for s in sorted(summarize(moved, bounds), key=lambda s: (s.device, s.config)):
            print(f"| {s.device} | {s.config} | {label} | {fidelity_text(s)} | {s.f0_pct:.1f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
