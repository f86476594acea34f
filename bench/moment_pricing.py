"""Would replay's per-window error fall if each window were priced at the speed its probes show for that moment?

Reads a finished validation directory (`specbench validate --out`, or `bench/fidelity.py --out DIR`'s
`DIR/validation`). A block's replay prices every window at its refreshes' speed; `bench/window_moves.py` shows a
window's speedup error following how far the probes around it moved. Here each run (Na, Nb) of a window is replayed
again with every cell of a model scaled by that model's level around the window in that run's decode jobs (the
geometric mean of the probes before and after it over the block's reference, `window_moves.job_levels`; with
repeats, the mean over the run's passes): `both` models, the `target` alone, the `drafter` alone. A run's native
value is set beside its own replay (native × replay as priced / replay at the run's moment), so that the statistics
(`core/validation_stats.summarize`) judge each run against the replay of its moment, and `F0` loses whatever the
moments explain of the two runs' difference. Printed per placement, configuration and metric (speedup, and
target-only's tokens/s): bias [90%], E (point, upper 95%) and F0, as priced and at each moment. Where E falls, the
probes price the host's moments; where it rises, a probe's burst is a noisier measure of a window's speed than the
window's own forwards are.

    python bench/moment_pricing.py DIR/validation
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable, Mapping

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.contention_by_width import fidelity_text, kept_records, validation_inputs
from bench.window_moves import job_levels
from specbench.app.validate import block_profiles, replayed
from specbench.core.pricing import CostTable
from specbench.core.validation_stats import TARGET, observations, summarize
from specbench.schemas.profiles import DeviceProfile
from specbench.schemas.validation import (
    Metric,
    ObservationRecord,
    PairedRun,
    ProbeRecord,
    kept,
    load_records,
    series_pass,
)

SOURCES = ("both", "target", "drafter")
"""Which models' cells follow the probes."""


def scaled(profile: DeviceProfile, target: float, drafter: float) -> DeviceProfile:
    """`profile` with the target's cells times `target` and every drafter's times `drafter` (the ratios on top of
    the cells stay: a lane slower by a factor prices every forward slower by it)."""
    def times(factor: float) -> Callable[[CostTable], CostTable]:
        return lambda t: dataclasses.replace(t, seconds={w: s * factor for w, s in t.seconds.items()})

    return profile.with_tables(times(target), times(drafter))


def run_levels(levels: Mapping[tuple[str, int, str, str], dict[str, float]], device: str,
               block: int) -> dict[tuple[str, str], dict[str, float]]:
    """(window, run 'a' or 'b') -> per model, the mean of its levels over the run's decode jobs (`series_pass`; a
    job that ran both runs counts for both)."""
    acc: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for (d, b, series, window_id), mine in levels.items():
        if (d, b) != (device, block):
            continue
        named = series_pass(series)
        for run in (list(PairedRun) if named is None else [named[0]]):
            for model, level in mine.items():
                acc[(window_id, run.value)][model].append(level)
    return {key: {m: statistics.fmean(v) for m, v in by_model.items()} for key, by_model in acc.items()}


def value(replay: Mapping[tuple[str, str, str], tuple[int, float]], o: ObservationRecord) -> float:
    """Replay's value of `o`'s metric from one replay of its window."""
    tokens, seconds = replay[(o.device, o.config, o.window_id)]
    if o.metric == Metric.THROUGHPUT:
        return tokens / seconds
    target_tokens, target_seconds = replay[(o.device, TARGET, o.window_id)]
    return (tokens / seconds) / (target_tokens / target_seconds)


def main(argv: list[str] | None = None) -> int:
    validation, blocks, decodes = kept_records(__doc__, argv)
    inputs = validation_inputs(validation)
    traces, configs, by_id, bounds = inputs.traces, inputs.configs, inputs.windows, inputs.bounds
    levels = job_levels(list(kept(load_records(validation, ProbeRecord), blocks)))
    profiles = block_profiles(validation, blocks)
    priced: list[ObservationRecord] = []
    moments: dict[str, list[ObservationRecord]] = defaultdict(list)
    for b in sorted(blocks, key=lambda b: (b.device, b.block)):
        profile = profiles[(b.device, b.block)]
        mine = [d for d in decodes if (d.device, d.block) == (b.device, b.block)]
        block_obs = observations(mine, replayed(b.device, [by_id[w] for w in b.windows], traces, profile, configs))
        priced += block_obs
        at_run = run_levels(levels, b.device, b.block)
        for source in SOURCES:
            replays = {}
            for (window_id, run), level in at_run.items():
                target = level.get("target", 1.0) if source != "drafter" else 1.0
                drafter = level.get("drafter", 1.0) if source != "target" else 1.0
                replays[(window_id, run)] = replayed(b.device, [by_id[window_id]], traces,
                                                     scaled(profile, target, drafter), configs)
            for o in block_obs:
                a, b_ = replays.get((o.window_id, "a")), replays.get((o.window_id, "b"))
                if a is not None and b_ is not None:
                    moments[source].append(dataclasses.replace(o, native_a=o.native_a * o.replay / value(a, o),
                                                               native_b=o.native_b * o.replay / value(b_, o)))
    rows: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for obs in [priced] + [moments[s] for s in SOURCES]:
        for s in summarize(obs, bounds):
            if s.metric == Metric.SPEEDUP or s.config == TARGET:
                rows[(s.device, s.config, s.metric)].append(f"{fidelity_text(s)}, F0 {s.f0_pct:.1f}%")
    print("| device | config | metric | as priced | at the moment: both | target | drafter |")
    print("|---|---|---|---|---|---|---|")
    for (device, config, metric), cells in sorted(rows.items()):
        print(f"| {device} | {config} | {metric} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
