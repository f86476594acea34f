"""How fast does a paper-sized study replay?

Generates the synthetic study of `bench/synthetic_study.py` (688 windows, ~95k target
tokens per device, 4 devices, 2 drafters), then replays target + SD W=5..8 + SpecASR +
AS2D over the catalog 2 drafters x budgets 1..15 with `app.parallel_replay.replay_study_in_processes`, and
prints window-replays per second and the total time. The named baseline, measured in the
same run on a sample of the same study, is the scalar reference `core.replay.reference.replay_window`;
the ratio is the speed-up of the bulk path. Generation is timed separately (it stands
for tracing, not replay).

With `--pace SIGMA`, the cost of pricing AS2D at the mean over a producer's pace scatter (docs/METHODS.md §5.2
The two-lane AS2D simulation, "The pace scatter": 15 simulations a window): the same study replayed with every
drafter's AS2D decodes priced at a ratio of 1.2 and a pace scatter of SIGMA, against the same profiles without the
scatter as the named baseline, both in this run.

    python bench/replay_speed.py [--windows 688] [--devices 4] [--baseline-sample 40] [--pace 0.12]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.synthetic_study import synthetic_study
from specbench.app.parallel_replay import replay_study_in_processes
from specbench.core.methods.configs import parse_method_specs
from specbench.core.pricing import DecodeContention
from specbench.core.replay.reference import replay_window

CATALOG = ["target", "sd:W=5..8,drafter=small", "specasr:drafter=small", "as2d:B=1..15,drafter=small|large"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=688)
    parser.add_argument("--devices", type=int, default=4)
    parser.add_argument("--baseline-sample", type=int, default=40, help="windows replayed by the scalar baseline")
    parser.add_argument("--pace", type=float, default=None, help="also time AS2D priced over this pace scatter")
    args = parser.parse_args()

    started = time.perf_counter()
    study = synthetic_study(n_windows=args.windows, n_devices=args.devices)
    generated_s = time.perf_counter() - started
    tokens = sum(t.n_tokens - 1 for t in study.traces["small"].windows.values())
    configs = parse_method_specs(CATALOG)
    print(f"study: {len(study.windows)} windows, {tokens} target tokens per device, {args.devices} devices, "
          f"{len(configs)} configurations (generated in {generated_s:.1f} s)")

    started = time.perf_counter()
    rows = replay_study_in_processes(study.windows, study.traces, study.profiles, configs)
    bulk_s = time.perf_counter() - started
    bulk_rate = len(rows) / bulk_s

    sample = study.windows[: args.baseline_sample]
    started = time.perf_counter()
    count = 0
    for profile in study.profiles:
        for config in configs:
            for window in sample:
                drafter = getattr(config, "drafter", None) or "small"
                replay_window(window, study.traces[drafter].windows[window.window_id], profile, config)
                count += 1
    scalar_rate = count / (time.perf_counter() - started)

    print(f"bulk replay (app.parallel_replay.replay_study_in_processes): {len(rows)} window-replays in {bulk_s:.2f} s "
          f"= {bulk_rate:,.0f} window-replays/s")
    print(f"baseline (reference.replay_window, scalar, {count} replays): {scalar_rate:,.0f} window-replays/s")
    print(f"ratio bulk/baseline: {bulk_rate / scalar_rate:.1f}x; whole study: {bulk_s:.2f} s on {os.cpu_count()} cores (target <= 2 s on 2)")
    if args.pace is not None:
        timed = {}
        for label, sigma in (("one timeline", None), (f"pace scatter {args.pace:g}", args.pace)):
            profiles = [with_decode(p, DecodeContention(1.2, 1.2, 40, pace_sigma=sigma, pace_pairs=10))
                        for p in study.profiles]
            started = time.perf_counter()
            replay_study_in_processes(study.windows, study.traces, profiles, configs)
            timed[label] = time.perf_counter() - started
            print(f"AS2D priced as {label}: {timed[label]:.2f} s for the whole study")
        one, paced = timed.values()
        print(f"ratio pace scatter / one timeline (the baseline): {paced / one:.2f}x")


def with_decode(profile, decode):
    """`profile` with every drafter's co-scheduling priced at `decode`, as AS2D decodes realised it."""
    return dataclasses.replace(profile, drafters={name: dataclasses.replace(d, cosched=dataclasses.replace(
        d.cosched, decode=decode)) for name, d in profile.drafters.items()})


if __name__ == "__main__":
    main()
