"""When did one window's drafts become visible to the target, natively and in replay, forward by forward?

Reads a validation directory (`specbench validate --out`, or `bench/fidelity.py --out DIR`'s `DIR/validation`). For
one window, per kept block and AS2D configuration, each native AS2D decode's target forwards (start on the decode
clock, the drafts the runner had published when it planned, the width, the drafts accepted, the forward's length)
beside replay's with the producer's timeline as the block's profile prices it (the middle node of the pace scatter,
docs/METHODS.md §5.2 The two-lane AS2D simulation) and the native producer's publication times. A batch that lands
just before a forward boundary in one and just after it in the other changes every width after it: the race that
the pace scatter's mean prices.

    python bench/as2d_race.py DIR/validation WINDOW
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.as2d_windows import target_forwards
from bench.contention_by_width import kept, validation_inputs
from specbench.app.validate import block_profiles
from specbench.core.methods.configs import As2dConfig
from specbench.core.replay.reference import LaneForward, simulate_as2d
from specbench.schemas.profiles import DeviceProfile
from specbench.schemas.traces import WindowTrace
from specbench.schemas.validation import BlockRecord, DecodeRecord, load_records


def replay_forwards(trace: WindowTrace, cap: int, profile: DeviceProfile,
                    config: As2dConfig) -> list[tuple[float, int, int, int, float]]:
    """(start ms, published, width, accepted, length ms) of each target forward of AS2D's two-lane simulation with
    the producer as priced (`reference.simulate_as2d`'s log)."""
    log: list[LaneForward] = []
    simulate_as2d(trace, cap, profile, config, log=log)
    return [(1e3 * f.start_s, f.published, f.width, f.accepted, 1e3 * f.seconds) for f in log]


def row_text(rows: list, i: int) -> str:
    """Row i of (start ms, published, width, accepted, ms) rows, or nothing past their end."""
    if i >= len(rows):
        return ""
    start, published, width, accepted, ms = rows[i]
    return f"{start:8.1f} {published:4d} w{width} a{accepted} {ms:7.1f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("validation", type=Path)
    parser.add_argument("window")
    args = parser.parse_args(argv)
    blocks = [b for b in load_records(args.validation, BlockRecord) if not b.voided]
    decodes = [d for d in kept(load_records(args.validation, DecodeRecord), blocks)
               if d.window_id == args.window and d.producer is not None and d.lossless]
    inputs = validation_inputs(args.validation)
    configs = {c.label: c for c in inputs.configs if isinstance(c, As2dConfig)}
    profiles = block_profiles(args.validation, blocks)
    for d in sorted(decodes, key=lambda d: (d.device, d.config, d.block, d.run, d.repeat)):
        config = configs[d.config]
        trace = inputs.traces[str(config.drafter)].windows[d.window_id]
        replayed = replay_forwards(trace, inputs.windows[d.window_id].cap, profiles[(d.device, d.block)], config)
        native = target_forwards([d])
        print(f"{d.device} {d.config} block {d.block} run {d.run} repeat {d.repeat}: native {1e3 * d.decode_s:.1f} ms, "
              f"replay {sum(r[4] for r in replayed):.1f} ms; native batches at "
              f"{', '.join(f'{us / 1e3:.1f}' for us in d.producer.get('publish_us', []))} ms")
        print(f"  {'native: start ms, published, width, accepted, ms':52s} | replay")
        rows = [(op["t_us"] / 1e3, int(op["published"]), int(op["width"]), int(op["accepted"]), op["us"] / 1e3)
                for op in native]
        for i in range(max(len(rows), len(replayed))):
            print(f"  {row_text(rows, i):52s} | {row_text(replayed, i)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
