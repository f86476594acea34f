"""Does the profile's CT(1, depth) time what target-only decoding does?

Interleaves, R times, on one lane of the split placement (target CPU, 1 thread): a `sweep`
job timing width-1 forwards at fixed depths (what `profile` measures: each forward rolled
back to the same depth, `--warmup` untimed forwards first) and a `decode` job of target-only
on real prompts (consecutive forwards, KV growing, a host argmax between). It prints, per
round, the decode's median forward time and its mean time per token (decode clock / tokens:
forwards plus the loop around them) against the sweep's CT(1) interpolated at the same depths,
and the ratios measured in the same round: what part of a replay/native gap is the forward
itself and what part is the loop.

    python bench/sweep_vs_decode.py [--rounds 5] [--model smollm2-135m-f16] [--warmup 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np

from bench.hostload import idle_check
from specbench.schemas.placement import lane_job, resolve
from specbench.world.demo_models import demo_model
from specbench.world.devices.local import LocalDevice
from specbench.world.runner import find_runner

DEPTHS = [0, 32, 64, 96, 128]
PROMPTS = [list(range(200 + 7 * i, 232 + 7 * i)) for i in range(4)]  # 32 tokens each: what is said does not matter
CAP = 96


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--model", default="smollm2-135m-f16")
    parser.add_argument("--warmup", type=int, default=1)
    args = parser.parse_args(argv)
    print(f"other processes kept {idle_check():.2f} cores busy before the run", file=sys.stderr)
    device = LocalDevice(runner=find_runner(build=True))
    lane = resolve("split", device.cpus(), device.processors()).target
    model = {"path": str(demo_model(args.model))} | lane_job(lane)
    rows = []
    for r in range(args.rounds):
        sweep = device.run_job({"mode": "sweep", "target": model, "widths": [1], "depths": DEPTHS,
                                "warmup": args.warmup, "repetitions": 20})
        ct = np.array([next(x["median_us"] for x in sweep.results if x["depth"] == d) for d in DEPTHS])
        decode = device.run_job({"mode": "decode", "target": model, "methods": [{"name": "target"}], "warmup": True,
                                 "windows": [{"id": f"p{i}", "prompt": p, "cap": CAP} for i, p in enumerate(PROMPTS)]})
        forwards, priced, clock, tokens = [], 0.0, 0.0, 0
        for res in decode.results:
            if res.get("kind") != "decode":
                continue
            ops = [op for op in res["ops"] if op["model"] == "target"]
            forwards += [op["us"] for op in ops]
            priced += float(np.interp([op["depth"] for op in ops], DEPTHS, ct).sum())
            clock += res["decode_s"] * 1e6
            tokens += len(ops)
        rows.append({"sweep_ct1_us": float(np.interp(np.mean(DEPTHS), DEPTHS, ct)),
                     "decode_forward_median_us": statistics.median(forwards),
                     "priced_per_token_us": priced / tokens, "decode_per_token_us": clock / tokens,
                     "forwards_per_token_us": sum(forwards) / tokens})
        row = rows[-1]
        print(f"round {r + 1}: replay-priced {row['priced_per_token_us']:.0f} us/token, decode clock "
              f"{row['decode_per_token_us']:.0f} us/token (forwards alone {row['forwards_per_token_us']:.0f}); "
              f"priced / decode = {row['priced_per_token_us'] / row['decode_per_token_us']:.3f}, "
              f"priced / forwards = {row['priced_per_token_us'] / row['forwards_per_token_us']:.3f}")
    ratio = statistics.median(r["priced_per_token_us"] / r["decode_per_token_us"] for r in rows)
    loop = statistics.median(r["decode_per_token_us"] / r["forwards_per_token_us"] for r in rows)
    print(f"median over {len(rows)} rounds: replay-priced / native decode = {ratio:.3f}; "
          f"native decode clock / its forwards = {loop:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
