"""What pricing the host work after each forward changes, on the same native decodes.

Reads a finished validation directory (`specbench validate --out`, or `bench/fidelity.py --out DIR`'s
`DIR/validation`) whose profiles measured the host work after each forward (profile schema 7, docs/METHODS.md §4.4
Overheads, "Host work after a forward"). Every kept block is replayed as the validation prices it, and again with
every model's host work removed; the same two ways priced beside the decodes (`core/crossfit.py`: each half of a
block's windows at the ratios the other half's decodes met). Printed per placement, configuration and metric
(speedup, and target-only's tokens/s): bias [90%], E (point, upper 95%) and F0 (`core/validation_stats.summarize`).

    python bench/host_priced.py DIR/validation
"""

from __future__ import annotations

import dataclasses
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.contention_by_width import fidelity_text, kept_records, validation_inputs
from specbench.app.validate import block_profiles, replayed
from specbench.core import crossfit
from specbench.core.pricing import CostTable
from specbench.core.validation_stats import TARGET, observations, summarize
from specbench.schemas.profiles import DeviceProfile
from specbench.schemas.validation import Metric, ObservationRecord


def without_host(profile: DeviceProfile) -> DeviceProfile:
    """`profile` with no model's host work after a forward: its forwards alone, as profiles before schema 7."""
    def table(t: CostTable) -> CostTable:
        return t if t.decode is None else dataclasses.replace(t, decode=dataclasses.replace(t.decode, host=None))

    return profile.with_tables(table)


def main(argv: list[str] | None = None) -> int:
    validation, blocks, decodes = kept_records(__doc__, argv)
    inputs = validation_inputs(validation)
    traces, configs, by_id, bounds = inputs.traces, inputs.configs, inputs.windows, inputs.bounds
    prompts = {name: {w: t.n_prompt_drafter for w, t in trace.windows.items()} for name, trace in traces.items()}
    profiles = block_profiles(validation, blocks)
    variants = {"with host work": lambda p: p, "no host work": without_host}
    priced: dict[str, list[ObservationRecord]] = {name: [] for name in variants}
    beside: dict[str, list[ObservationRecord]] = {name: [] for name in variants}
    for b in sorted(blocks, key=lambda b: (b.device, b.block)):
        mine = [d for d in decodes if (d.device, d.block) == (b.device, b.block)]
        halves = crossfit.folds({d.window_id for d in mine})
        for name, variant in variants.items():
            profile = variant(profiles[(b.device, b.block)])
            priced[name] += observations(mine, replayed(b.device, [by_id[w] for w in b.windows], traces, profile,
                                                        configs))
            for fold, other in zip(halves, reversed(halves), strict=True):
                fitted = variant(crossfit.beside_profile(profiles[(b.device, b.block)],
                                                         [d for d in mine if d.window_id in other], configs, set(),
                                                         prompts))
                beside[name] += observations([d for d in mine if d.window_id in fold],
                                             replayed(b.device, [by_id[w] for w in sorted(fold)], traces, fitted,
                                                      configs))
    print("| placement | configuration | metric | pricing | as priced: bias [90%], E (point ≤ upper 95%) | "
          "beside the decodes |")
    print("|---|---|---|---|---|---|")
    for name in variants:
        rows = {(s.device, s.config, s.metric): s for s in summarize(priced[name], bounds)}
        fitted_rows = {(s.device, s.config, s.metric): s for s in summarize(beside[name], bounds)}
        for key, s in sorted(rows.items()):
            if s.metric == Metric.THROUGHPUT and s.config != TARGET:
                continue
            print(f"| {s.device} | {s.config} | {s.metric} | {name} | {fidelity_text(s)} | "
                  f"{fidelity_text(fitted_rows[key])} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
