"""How long does `specbench --help` take to start?

Runs `python -m specbench --help`, `python -m specbench <cmd> --help` for every command,
and the named baseline `python -c pass` (the interpreter's own start-up), interleaved,
and prints the median wall time of each and its excess over the baseline. Aim: help
within 0.3 s of wall time on this project's 2-core machine.

    python bench/startup.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _seconds(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    from specbench.cli import COMMANDS  # (the command names, without importing any command)

    runs = {"python -c pass": [sys.executable, "-c", "pass"],
            "specbench --help": [sys.executable, "-m", "specbench", "--help"]}
    runs |= {f"specbench {name} --help": [sys.executable, "-m", "specbench", name, "--help"]
             for name in sorted(COMMANDS)}
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.rounds):
        for name, argv in runs.items():
            samples[name].append(_seconds(argv))
    base = statistics.median(samples["python -c pass"])
    for name, values in samples.items():
        median = statistics.median(values)
        print(f"{name:34s} {median:6.3f} s  {median / base:5.1f}x baseline  (+{median - base:.3f} s)")


if __name__ == "__main__":
    main()
