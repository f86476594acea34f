"""How does tracing scale past one process?

Traces the demo's bundled windows with the demo target and its self drafter (smollm2-135m)
three ways in one run, each into a fresh directory with no cache: a local single-process
trace (the baseline), then `trace --ray` on a Ray cluster of this host with 1 and with 2
workers (`--threads` split between them). Prints windows/s of each and the speed-up over
the baseline, and checks that every Ray trace equals the baseline line for line (after the
header's environment block). Needs the demo models (`make demo` fetches them) and the
'ray' extra.

    python bench/trace_scale.py [--windows N] [--threads T] [--k-max 16]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from specbench.app.demo import DEMO_TARGET, SELF_DRAFTER, bundled_windows_path
from specbench.schemas.windows import load_windows
from specbench.world.demo_models import demo_model
from specbench.world.devices.local import LocalDevice
from specbench.world.model_files import ModelFile
from specbench.world.tracing import trace_windows


def decisions(path: Path) -> list:
    """A trace file without its header's environment block."""
    header, *lines = path.read_text().splitlines()
    return [{k: v for k, v in json.loads(header).items() if k != "environment"}, *lines]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=None, help="the first N bundled windows (default: all)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="threads in all, per layout")
    parser.add_argument("--k-max", type=int, default=16)
    args = parser.parse_args()
    try:
        import ray
    except ImportError:
        sys.exit("bench/trace_scale.py needs the 'ray' extra: pip install 'specbench[ray]'")
    from specbench.app.trace_ray import trace_on_ray

    windows = load_windows(bundled_windows_path())[: args.windows]
    target = ModelFile("target", demo_model(DEMO_TARGET))
    name, model = SELF_DRAFTER
    drafter = ModelFile(name, demo_model(model))
    root = Path(tempfile.mkdtemp(prefix="trace-scale-"))
    print(f"{len(windows)} windows, {DEMO_TARGET} + {model}, k_max {args.k_max}, {args.threads} threads in all")

    started = time.perf_counter()
    single, _ = trace_windows(LocalDevice(), windows, target, drafter, root / "single", args.k_max,
                              threads=args.threads)
    single_s = time.perf_counter() - started
    print(f"single process : {len(windows) / single_s:7.2f} windows/s ({single_s:.1f} s)")

    ray.init(num_cpus=args.threads, include_dashboard=False, log_to_driver=False)
    try:
        for workers in (1, 2):
            threads = max(1, args.threads // workers)
            started = time.perf_counter()
            [merged] = trace_on_ray(None, windows, target, [drafter], root / f"ray-{workers}", args.k_max, threads,
                                    [], workers, lambda line: None)
            took = time.perf_counter() - started
            same = "same trace" if decisions(merged) == decisions(single) else "DIFFERENT TRACE"
            print(f"ray, {workers} worker{'s' if workers > 1 else ' '}: {len(windows) / took:7.2f} windows/s "
                  f"({took:.1f} s, x{single_s / took:.2f} the single process; {same})")
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
