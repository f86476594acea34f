"""Each timing of a block's serial decodes (its refreshes, and the interims between its passes), decode by decode,
against the block's passes: did those decodes run as the passes did, and is a decode ratio moved by a few slow decodes?

Reads a validation directory (`specbench validate --out`, or `bench/fidelity.py --out DIR`'s `DIR/validation`) whose
refreshes kept their decodes (the profile's samples file, `decode` records). Per placement, kept block, sample (`r1`
and `r2` its refreshes; `i0`, `i1`, ... the interims after each pass, which hold the first refresh's cells) and model
(the target; each drafter), over the sample's serial decodes (target-only and SD): each decode's forwards over the
sample's own cells (its decode ratio left out), then

* `ratio`: pooled over the decodes, as the profile prices it (`core/pricing.decode_ratio`; its `realised`);
* `median`: the median of the decodes' own ratios, and `sd`, their scatter (of logs, in %);
* `passes`: the block's passes' serial decodes (every pass, kept windows that matched their trace) over the same
  cells, pooled;
* `passes/ratio`: what the passes met over what the sample priced (`drift`): below 1, the passes ran faster.

The last lines pool each model's `passes/ratio` over the blocks and their refreshes (and over refreshes and interims,
where the run has interims) as a geometric mean, for the pooled ratio and for the median, and the SD speedup each
would price off by (the drafter's over the target's).

    python bench/refresh_decodes.py DIR/validation
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.contention_by_width import kept_records
from specbench.app.validate import block_dir, interim_path, refresh_path
from specbench.core.pricing import CostTable, decode_ratio
from specbench.schemas.profiles import load_profile
from specbench.world.overheads import serial_forwards
from specbench.world.profiling import samples_path


def serial_ratios(decodes: list[dict], model: str, cells: CostTable) -> tuple[float, list[float]] | None:
    """`model`'s ('target' or 'drafter') decode ratio against `cells` over every serial decode of `decodes` pooled,
    as the profile measures it (`core/pricing.decode_ratio`), and each decode's own; None without a forward."""
    forwards = [serial_forwards([d])[model] for d in decodes]  # each decode's once, pooled below
    pooled = decode_ratio([f for own in forwards for f in own], cells)
    if pooled is None:
        return None
    each = [decode_ratio(own, cells) for own in forwards]
    return pooled.realised, [r.realised for r in each if r is not None]


def block_samples(where: Path, attempt: int, groups: list[str]) -> Iterator[tuple[str, Path, list[str]]]:
    """A block attempt's timings of its decodes as (label, profile path, groups whose decodes it holds): the first
    refresh ('r1', every group), then each group's interims between its passes in pass order ('i0', 'i1', ... after
    pass 0, 1, ...: that group alone; the groups in `groups`' order, not necessarily the order they ran), then the
    second refresh ('r2')."""
    yield "r1", refresh_path(where, 1, attempt), groups
    for group in groups:
        after = 0
        while (path := interim_path(where, group, after, attempt)).is_file():
            yield f"i{after}", path, [group]
            after += 1
    yield "r2", refresh_path(where, 2, attempt), groups


def main(argv: list[str] | None = None) -> int:
    validation, blocks, decodes = kept_records(__doc__, argv)
    # (device, model, estimate, kind: 'r' refresh or 'i' interim) -> ln(passes / it)
    drift: dict[tuple[str, str, str, str], list[float]] = defaultdict(list)
    print(f"{'device':14s} {'block':>5s} {'sample':>6s} {'model':10s} {'decodes':>7s} {'ratio':>6s} {'median':>6s} "
          f"{'sd %':>5s} {'passes':>6s} {'passes/ratio':>12s} {'passes/median':>13s}")
    for b in sorted(blocks, key=lambda b: (b.device, b.block)):
        where = block_dir(validation, b.device.rsplit("@", 1)[-1], b.block)
        passes = [d for d in decodes if (d.device, d.block) == (b.device, b.block) and d.lossless]
        for sample, path, groups in block_samples(where, b.attempt, sorted({d.group for d in passes})):
            samples = samples_path(path)
            if not samples.is_file():
                continue
            profile = load_profile(path)
            records = [json.loads(line) for line in samples.read_text().splitlines()]
            for group in groups:
                mine = [r for r in records if r.get("kind") == "decode" and r.get("model_name") == group]
                ran = [{"kind": "decode", "method": {"name": d.config.split("[", 1)[0]}, "ops": d.ops,
                        "decode_s": d.decode_s} for d in passes if d.group == group]
                for model, label in (("target", "target"), ("drafter", group)):
                    table = profile.target_costs if model == "target" else profile.drafter(group).costs
                    cells = replace(table, decode=None)
                    priced, met = serial_ratios(mine, model, cells), serial_ratios(ran, model, cells)
                    if priced is None or met is None:
                        continue
                    (pooled, each), passed = priced, met[0]
                    median = statistics.median(each)
                    scatter = statistics.stdev(math.log(r) for r in each) if len(each) > 1 else 0.0
                    drift[(b.device, model, "ratio", sample[0])].append(math.log(passed / pooled))
                    drift[(b.device, model, "median", sample[0])].append(math.log(passed / median))
                    print(f"{b.device:14s} {b.block:5d} {sample:>6s} {label:10s} {len(each):7d} {pooled:6.3f} "
                          f"{median:6.3f} {100 * scatter:5.1f} {passed:6.3f} {passed / pooled:12.3f} "
                          f"{passed / median:13.3f}")
    for device in sorted({k[0] for k in drift}):
        for estimate in ("ratio", "median"):
            for kinds, over in (("r", "refreshes'"), ("ri", "refreshes' and interims'")):
                logs = {m: [v for k in kinds for v in drift[(device, m, estimate, k)]] for m in ("target", "drafter")}
                if kinds == "ri" and not any(drift[(device, m, estimate, "i")] for m in logs):
                    continue
                means = {m: statistics.mean(v) for m, v in logs.items() if v}
                line = " ".join(f"{m} {math.exp(v):.3f}" for m, v in means.items())
                rel = (f"; drafter over target {math.exp(means['drafter'] - means['target']):.3f}"
                       if len(means) == 2 else "")
                print(f"{device}: passes over the {over} {estimate}, geometric mean: {line}{rel}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
