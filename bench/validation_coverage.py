"""How often does `specbench validate`'s 90% bias interval hold the true bias, with few blocks?

Simulated validations whose replay is right on average (true bias 1): each block shares a host offset
(`--block-sd`), each native run has its own noise (`--run-sd`), `--windows` windows a block. For 2, 3, 4 and 8
blocks, the share of `--trials` validations whose interval holds 1: the validation's Student t interval over the
blocks' means (`core/fidelity.fidelity_stats`) against the baseline, a percentile bootstrap that draws whole blocks
(2000 resamples), measured on the same validations.

    python bench/validation_coverage.py [--trials 1000 --block-sd 0.04 --run-sd 0.08 --windows 12]
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from specbench.core.fidelity import BIAS_LEVEL, block_biases, fidelity_stats
from specbench.schemas.validation import Metric, ObservationRecord


def simulated_validation(rng: np.random.Generator, blocks: int, windows: int, block_sd: float,
                         run_sd: float) -> list[ObservationRecord]:
    """Speedup observations of a validation whose replay is right on average (1): each block's native runs share
    a host offset (log sd `block_sd`), each run has its own noise (log sd `run_sd`)."""
    obs = []
    for b in range(blocks):
        offset = rng.normal(0, block_sd)
        obs += [ObservationRecord("local@split", "sd[W=5]", Metric.SPEEDUP, b, f"w{i}", 1.0,
                                  *np.exp(offset + rng.normal(0, run_sd, 2))) for i in range(windows)]
    return obs


def percentile_bootstrap_holds(block_logs: np.ndarray, rng: np.random.Generator, resamples: int = 2000) -> bool:
    """Whether the percentile bootstrap over whole blocks (equal blocks: the mean of the drawn blocks' biases)
    holds a log bias of 0 at BIAS_LEVEL."""
    draws = rng.integers(0, len(block_logs), size=(resamples, len(block_logs)))
    tail = (1 - BIAS_LEVEL) / 2
    low, high = np.quantile(block_logs[draws].mean(axis=1), [tail, 1 - tail])
    return bool(low <= 0.0 <= high)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--block-sd", type=float, default=0.04)
    parser.add_argument("--run-sd", type=float, default=0.08)
    parser.add_argument("--windows", type=int, default=12)
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args(argv)
    print(f"{args.trials} simulated validations per row: block offset sd {args.block_sd}, run noise sd "
          f"{args.run_sd}, {args.windows} windows a block; share holding the true bias at {BIAS_LEVEL:.0%}")
    print("blocks  t over blocks  percentile block bootstrap (baseline)  ratio")
    for blocks in (2, 3, 4, 8):
        rng = np.random.default_rng(args.seed)
        held_t = held_boot = 0
        for _ in range(args.trials):
            obs = simulated_validation(rng, blocks, args.windows, args.block_sd, args.run_sd)
            s = fidelity_stats(obs, 3, 5)
            held_t += s.bias_low <= 1.0 <= s.bias_high
            held_boot += percentile_bootstrap_holds(np.log(list(block_biases(obs).values())), rng)
        t_share, boot_share = held_t / args.trials, held_boot / args.trials
        print(f"{blocks:6d}  {t_share:13.3f}  {boot_share:38.3f}  {t_share / boot_share:5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
