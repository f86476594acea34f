"""How a validation's decode jobs drift from the block profile that prices them, and whether their probes see it.

Reads a validation directory (`specbench validate --out`, or `bench/fidelity.py --out DIR`'s `DIR/validation`). Per
kept block and decode job (a group's pass: Na or Nb, each repeat), per model: the job's **decode drift**, the ratio
its serial forwards (target-only and SD decodes, as the "Sweep vs decode" comparison takes them) met over the block
profile's price for them (its cells times its decode ratio, the mean of the block's two refreshes), and its **probe
drift**, the median of the job's probes over the median of the block's probes around the refreshes (the void rule's
reference). `rel` is the drafter's over the target's: what moves an SD speedup.

Printed per placement, over jobs (logs, in %): how far the probes track the decode drift (correlation, and the
spread of the decode drift before and after dividing it by the probe drift); the decode drift's variance
components (the spread of jobs within a block, of the block means, and what is left of the latter beyond the
jobs' own spread: the error every job of a block shares, that of its refreshes' price); and the block's serial
forwards priced by its first refresh alone over its second alone (a single refresh's noise, with the drift between
them; each refresh's cells times its own decode ratio, which the cells' noise largely cancels in). The bias interval
of a validation counts blocks, so the shared part is what a block's bias scatters by (docs/METHODS.md §7.9 Validation:
does replay predict the device?, "Blocks needed").

    python bench/drift_structure.py DIR/validation
"""

from __future__ import annotations

import math
import os
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.contention_by_width import kept_records, validation_inputs
from specbench.app.validate import block_dir, block_profiles, refresh_path
from specbench.core import crossfit
from specbench.core.pricing import CostTable, decode_ratio
from specbench.core.refresh_mean import merged_profile
from specbench.schemas.fileio import load_yaml
from specbench.schemas.profiles import DeviceProfile, profile_from_dict
from specbench.schemas.validation import (
    BlockRecord,
    DecodeRecord,
    PairedRun,
    ProbeRecord,
    decode_series,
    kept,
    load_records,
)

PARTS = ("target", "drafter", "rel")


def drift(forwards: list, table: CostTable) -> float | None:
    """The time `forwards` took over `table`'s price for them (its cells times its decode ratio); None where the
    table has no decode ratio or no forward is priced."""
    met = decode_ratio(forwards, table)
    return None if met is None or table.decode is None else met.realised / table.decode.realised


def _tables(profile: DeviceProfile, group: str) -> dict[str, CostTable]:
    return {"target": profile.target_costs, "drafter": profile.drafter(group).costs}


def _with_rel(by_model: dict[str, float]) -> dict[str, float]:
    return by_model | {"rel": by_model["drafter"] / by_model["target"]}


Job = tuple[str, int, str, dict[str, float], dict[str, float]]
"""(device, block, the job's probe series, decode drift by part, probe drift by part)."""


def job_drifts(validation: Path, blocks: list[BlockRecord],
               decodes: list[DecodeRecord]) -> tuple[list[Job], dict[str, dict[str, list[float]]]]:
    """Each decode job of a kept block (`Job`; `blocks`, `decodes`: the validation's kept blocks and their decodes),
    and per placement and part, 100 × ln of the block's serial forwards priced by its refresh 1 over priced by its
    refresh 2 (each refresh's cells times its own decode ratio), one per kept block and group."""
    configs = validation_inputs(validation).configs
    probes = list(kept(load_records(validation, ProbeRecord), blocks))
    profiles = block_profiles(validation, blocks)
    jobs = []
    refreshes: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for b in sorted(blocks, key=lambda b: (b.device, b.block)):
        profile = profiles[(b.device, b.block)]
        placement = b.device.rsplit("@", 1)[-1]
        full = load_yaml(validation / "profiles" / f"full-{placement}.yaml")
        alone = [profile_from_dict(merged_profile(full, [load_yaml(path)]), path) for path in
                 (refresh_path(block_dir(validation, placement, b.block), k, b.attempt) for k in (1, 2))]
        mine = [d for d in decodes if (d.device, d.block) == (b.device, b.block)]
        block_probes = [p for p in probes if (p.device, p.block, p.attempt) == (b.device, b.block, b.attempt)]
        for group in sorted({d.group for d in mine}):
            forwards = crossfit.serial_forwards([d for d in mine if d.group == group], profile, configs, set())
            by_refresh = [{m: drift(forwards.get(m if m == "target" else group, []), t)
                           for m, t in _tables(r, group).items()} for r in alone]
            if all(v is not None for r in by_refresh for v in r.values()):
                first, second = (_with_rel(r) for r in by_refresh)  # type: ignore[arg-type]
                for part in PARTS:
                    refreshes[b.device][part].append(100 * math.log(first[part] / second[part]))
            around = [p for p in block_probes if p.series == f"refresh:{group}"]
            reference = {"target": statistics.median(p.target_us for p in around),
                         "drafter": statistics.median(float(p.drafter_us or 0) for p in around)}
            for run in PairedRun:
                for repeat in sorted({d.repeat for d in mine if d.run == run}):
                    job = [d for d in mine if (d.group, d.run, d.repeat) == (group, run, repeat)]
                    in_job = [p for p in block_probes if p.series == decode_series(group, run, repeat)]
                    forwards = crossfit.serial_forwards(job, profile, configs, set())
                    decode = {m: drift(forwards.get(m if m == "target" else group, []), t)
                              for m, t in _tables(profile, group).items()}
                    if not in_job or None in decode.values():
                        continue
                    probe = {"target": statistics.median(p.target_us for p in in_job) / reference["target"],
                             "drafter": statistics.median(float(p.drafter_us or 0) for p in in_job)
                             / reference["drafter"]}
                    jobs.append((b.device, b.block, decode_series(group, run, repeat),
                                 _with_rel(decode), _with_rel(probe)))  # type: ignore[arg-type]
    return jobs, refreshes


def _sd(values: list[float]) -> float:
    return statistics.stdev(values) if len(values) > 1 else float("nan")


def main(argv: list[str] | None = None) -> int:
    jobs, pairs = job_drifts(*kept_records(__doc__, argv))
    print(f"{'device':14s} {'block':>5s} {'job':24s} " + " ".join(f"{p + ' decode':>14s} {'probe':>6s}" for p in PARTS))
    for device, block, series, decode, probe in jobs:
        print(f"{device:14s} {block:5d} {series:24s} "
              + " ".join(f"{decode[p]:14.3f} {probe[p]:6.3f}" for p in PARTS))
    for device in sorted({j[0] for j in jobs}):
        mine = [j for j in jobs if j[0] == device]
        print(f"\n{device}: {len(mine)} jobs in {len({j[1] for j in mine})} blocks (logs, %)")
        for part in PARTS:
            dec = np.array([100 * math.log(j[3][part]) for j in mine])
            pro = np.array([100 * math.log(j[4][part]) for j in mine])
            by_block: dict[int, list[float]] = defaultdict(list)
            for j, x in zip(mine, dec, strict=True):
                by_block[j[1]].append(float(x))
            within = statistics.fmean(statistics.variance(v) for v in by_block.values() if len(v) > 1)
            means = [statistics.fmean(v) for v in by_block.values()]
            per_block = statistics.fmean(len(v) for v in by_block.values())
            beyond = statistics.variance(means) - within / per_block if len(means) > 1 else math.nan
            shared = math.sqrt(max(beyond, 0.0))
            corr = float(np.corrcoef(dec, pro)[0, 1]) if len(dec) > 2 else math.nan
            print(f"  {part:7s} decode drift mean {dec.mean():+5.1f} (block means' se "
                  f"{_sd(means) / math.sqrt(len(means)):.1f}), sd over jobs {dec.std(ddof=1):4.1f}, less the probe "
                  f"drift {(dec - pro).std(ddof=1):4.1f} (correlation {corr:+.2f}); jobs within a block sd "
                  f"{math.sqrt(within):4.1f}, block means sd {_sd(means):4.1f}, shared by a block's jobs "
                  f"{shared:4.1f}; "
                  f"refresh 1 over 2 sd {_sd(pairs[device][part]):4.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
