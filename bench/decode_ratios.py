"""Would SD be priced true with each model's decode-over-cell ratio measured beside its decodes?

Reads a finished validation directory (`bench/fidelity.py --out DIR`'s `DIR/validation`). Per kept block it takes
the serial decodes' forwards against the block's refreshed cells (`core/validation_stats.op_timings`: op time /
the cell's price at its width and depth, the refreshes' decode ratios left out) and averages them per model
(target, drafter) and width class (1, wider). Then it replays each block's windows for target-only and every SD
configuration with the block profile's cells alone (`cells`: what a profile without decode ratios prices) and
with the cells scaled by those ratios, measured on other windows so that no window prices itself:

* `half`: the same block's other half of the windows (even windows price the odd ones and back): a ratio
  measured beside the decodes, as a block's own refresh could measure it (an upper bound: the folds share the
  decode job with the windows they price);
* `others`: the other blocks' windows: a ratio fixed once, as a profile would hold it.

Printed per SD configuration: the speedup bias (geometric mean of replay / native over blocks, windows and the two
runs), the RMS of ln(replay / native) and each block's bias, as priced (the validation's own replay: the cells
times the refreshes' decode ratios where its profiles hold them), with the cells alone and with each source of
ratios; then the ratios per block. Compare the RMS with the validation's F0 (the native runs' own scatter).

    python bench/decode_ratios.py DIR/validation
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import statistics
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.contention_by_width import kept_records
from specbench.app.parallel_replay import replay_study_in_processes
from specbench.app.validate import block_profiles
from specbench.core.methods.configs import SdConfig, TargetConfig, parse_method_specs
from specbench.core.pricing import CostTable
from specbench.core.validation_stats import op_timings
from specbench.schemas.profiles import DeviceProfile
from specbench.schemas.traces import load_trace_dir
from specbench.schemas.validation import DecodeRecord, ObservationRecord, load_records
from specbench.schemas.windows import load_windows

Ratios = dict[tuple[str, int], float]
"""(model, width class: 1 or 2 for wider) -> mean op time / cell price."""


def ratios(decodes: Sequence[DecodeRecord], profiles: dict, configs) -> Ratios:
    acc: dict[tuple[str, int], list[float]] = defaultdict(list)
    for d in decodes:
        for t in op_timings([d], profiles[(d.device, d.block)], configs, set()):
            acc[(t.model, min(t.width, 2))].append(t.us / t.priced_us)
    return {k: statistics.fmean(v) for k, v in acc.items()}


def scaled(profile: DeviceProfile, r: Ratios) -> DeviceProfile:
    """`profile`'s cells times `r` (an empty `r`: the cells alone), the profile's own decode ratios left out."""
    def table(t: CostTable, model: str) -> CostTable:
        return dataclasses.replace(t, seconds={w: s * r.get((model, min(w, 2)), 1.0) for w, s in t.seconds.items()},
                                   decode=None)

    return dataclasses.replace(profile, target_costs=table(profile.target_costs, "target"),
                               drafters={n: dataclasses.replace(d, costs=table(d.costs, n))
                                         for n, d in profile.drafters.items()})


def main(argv: list[str] | None = None) -> int:
    validation, blocks, decodes = kept_records(__doc__, argv)
    plan = json.loads((validation / "validation.json").read_text())
    # the plan records each configuration's row fields; target-only and SD (width, drafter, p_min) are rebuilt
    specs = ["target"] + [f"sd:W={m['width']},drafter={m['drafter']},p_min={m['p_min']}" for m in plan["methods"]
                          if m["method"] == "sd"]
    configs = [c for c in parse_method_specs(specs) if isinstance(c, (TargetConfig, SdConfig))]
    sds = [c.label for c in configs if isinstance(c, SdConfig)]
    if not sds:
        print("no SD configuration in this validation")
        return 0
    traces = load_trace_dir(Path(plan["traces"]))
    by_id = {w.window_id: w for w in load_windows(Path(plan["windows"]["path"]))}
    profiles = {key: scaled(p, {}) for key, p in block_profiles(validation, blocks).items()}  # the cells alone
    observed = [o for o in load_records(validation, ObservationRecord) if o.metric == "speedup" and o.config in sds]
    logs: dict[tuple[str, str, int], list[float]] = defaultdict(list)  # (source, config, block) -> ln(replay/native)
    shown: list[str] = []
    for b in sorted(blocks, key=lambda b: (b.device, b.block)):
        mine = [d for d in decodes if (d.device, d.block) == (b.device, b.block)]
        ids = sorted({o.window_id for o in observed if (o.device, o.block) == (b.device, b.block)})
        folds = [set(ids[0::2]), set(ids[1::2])]
        others = ratios([d for d in decodes if d.device == b.device and d.block != b.block], profiles, configs)
        for k, fold in enumerate(folds):
            half = ratios([d for d in mine if d.window_id in folds[1 - k]], profiles, configs)
            shown.append(f"{b.device} block {b.block} fold {k}: " + ", ".join(
                f"{m} w{'1' if c == 1 else '>1'} {v:.3f}" for (m, c), v in sorted(half.items())))
            priced = [o for o in observed if (o.device, o.block) == (b.device, b.block) and o.window_id in fold]
            for o in priced:  # as priced: the validation's own replay, kept in the observation
                logs[("as priced", o.config, b.block)] += [math.log(o.replay / n) for n in (o.native_a, o.native_b)]
            for source, r in (("cells", {}), ("half", half), ("others", others)):
                profile = scaled(profiles[(b.device, b.block)], r)
                frame = replay_study_in_processes([by_id[w] for w in sorted(fold)], traces, [profile], configs,
                                                  workers=1)
                rate = {(c, w): t / s for c, w, t, s in
                        zip(frame["config"], frame["window_id"], frame["tokens"], frame["decode_s"], strict=True)}
                for o in priced:
                    speedup = rate[(o.config, o.window_id)] / rate[("target", o.window_id)]
                    logs[(source, o.config, b.block)] += [math.log(speedup / n) for n in (o.native_a, o.native_b)]
    for config in sds:
        print(config)
        for source in ("as priced", "cells", "half", "others"):
            per = [logs[(source, config, b.block)] for b in blocks]
            every = [v for p in per for v in p]
            rms = 100 * math.sqrt(np.mean(np.square(every)))
            print(f"  {source:10s} bias {math.exp(np.mean(every)):.3f}  RMS {rms:.1f}%  blocks "
                  + " / ".join(f"{math.exp(np.mean(p)):.3f}" for p in per))
    print("ratios (half), mean op time / cell:")
    print("\n".join(f"  {line}" for line in shown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
