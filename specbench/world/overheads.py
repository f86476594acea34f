"""AS2D's non-model costs on a device, measured for the profile's `overheads` section.

A short native AS2D decode (the same window a few times) gives what the cost model
charges besides forwards: the producer thread's start-up after the decode clock starts,
the producer-lane time to publish one batch, and the target-lane time of one verifier
planning step with a realignment search. Each is the median over the runs (publishing:
the mean per batch, since the runner sums it). A profile without a drafter leaves them
at 0 and says so in its notes.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from specbench.errors import SpecbenchError
from specbench.world.devices.base import Device

PROMPT = list(range(100, 132))
"""32 token ids valid in any real vocabulary: what the models say does not matter here."""
CAP = 48
RUNS = 3
ZERO = {"producer_startup_s": 0.0, "publish_s": 0.0, "align_s": 0.0}


def overheads_job(target: dict, drafter: dict) -> dict:
    """`target`/`drafter`: the runner's model objects, with their lanes (the profile's placement)."""
    window = {"prompt": PROMPT, "drafter_prompt": PROMPT, "cap": CAP}
    return {"mode": "decode", "target": target, "drafter": drafter,
            "methods": [{"name": "as2d", "budget": 7, "batch": 8}],
            "windows": [window | {"id": f"overheads-{i}"} for i in range(RUNS)]}


def overheads_from_results(results: Sequence[dict]) -> dict:
    """The profile's `overheads` from the runner's AS2D decode results (pure)."""
    runs = [r for r in results if r.get("kind") == "decode" and "producer" in r]
    if not runs:
        raise SpecbenchError("the runner's AS2D decode returned no producer record")
    startup = statistics.median(r["producer"]["started_us"] for r in runs)
    batches = sum(len(r["producer"]["publish_us"]) for r in runs)
    publish = sum(r["producer"]["publish_cost_us"] for r in runs) / max(batches, 1)
    plans = [op for r in runs for op in r["ops"] if op.get("model") == "target" and "plan_us" in op]
    searched = [op["plan_us"] for op in plans if op.get("searched")] or [op["plan_us"] for op in plans] or [0]
    return {"producer_startup_s": startup / 1e6, "publish_s": publish / 1e6,
            "align_s": statistics.median(searched) / 1e6}


def measure_overheads(device: Device, target: dict, drafter: dict) -> tuple[dict, str]:
    """(overheads, note for the profile). `target`/`drafter`: the runner's model specs."""
    out = device.run_job(overheads_job(target, drafter))
    return (overheads_from_results(out.results),
            f"overheads: native as2d[B=7], {RUNS} runs of a {CAP}-token window, medians")
