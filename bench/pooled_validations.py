"""Two or more finished validations of the same configurations as one: their kept blocks pooled.

A validation's bounds narrow with its blocks; a second run on the same windows, trace and command, with its own full
profile, adds blocks from another stretch of the host's time (a replication, where `--resume` would add them to the
same profile). Reads each validation directory (`specbench validate --out`, or `bench/fidelity.py --out DIR`'s
`DIR/validation`), replays its kept blocks with their own profiles (`app/validate.block_observations`, as `specbench
validate` does), numbers the blocks of the k-th directory from 100·k, and prints, per device, configuration and
metric, the statistics `specbench validate` prints for one (`core/validation_stats.summarize`: bias [90%], `E` ≤ its
upper 95% bound, F0, the verdict), then AS2D's decomposed speedup bias over all of them. Given one directory, it
prints that validation's own tables again.

    python bench/pooled_validations.py DIR1/validation DIR2/validation
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.contention_by_width import fidelity_text, validation_inputs
from specbench.app.validate import block_observations, block_profiles
from specbench.core.validation_stats import Decomposing, decomposition_records, summarize
from specbench.schemas.validation import BlockRecord, DecodeRecord, ObservationRecord, kept, load_records

RENUMBER = 100
"""The k-th directory's blocks are numbered from RENUMBER·k (a validation runs fewer blocks than this)."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("validations", type=Path, nargs="+", help="validation directories (each holds blocks.jsonl)")
    args = parser.parse_args(argv)
    obs: list[ObservationRecord] = []
    parts: dict[tuple[str, str], Decomposing] = {}
    past_allowance: set[tuple[str, int]] = set()
    labels = None
    for k, validation in enumerate(args.validations):
        inputs = validation_inputs(validation)
        mine_labels = sorted(c.label for c in inputs.configs)
        if labels is not None and mine_labels != labels:
            raise SystemExit(f"{validation}: configurations {mine_labels}, expected the first directory's {labels}")
        labels = mine_labels
        blocks = [b for b in load_records(validation, BlockRecord) if not b.voided]
        if any(b.block >= RENUMBER for b in blocks):
            raise SystemExit(f"{validation}: a block numbered {RENUMBER} or more; expected fewer blocks")
        decodes = list(kept(load_records(validation, DecodeRecord), blocks))
        profiles = block_profiles(validation, blocks)
        for b in blocks:
            mine = [replace(d, block=d.block + RENUMBER * k) for d in decodes
                    if (d.device, d.block) == (b.device, b.block)]
            obs += block_observations(b, mine, inputs.windows, inputs.traces, profiles[(b.device, b.block)],
                                      inputs.configs, inputs.lookups, parts)
            if b.kept_after_voids:
                past_allowance.add((b.device, b.block + RENUMBER * k))
    for s in sorted(summarize(obs, inputs.bounds, past_allowance), key=lambda s: (s.device, s.metric, s.config)):
        print(f"{s.device} {s.config} {s.metric}: {s.blocks} blocks, {s.observations} observations: "
              f"{fidelity_text(s)}, F0 {s.f0_pct:.1f}%: {s.verdict}")
    for r in decomposition_records(parts):
        interval = "" if r.factor_low is None else f" [{r.factor_low:.3f}, {r.factor_high:.3f}]"
        rho = ("" if r.rho_priced is None
               else f" (target's ratio priced {r.rho_priced:.3f}, realised {r.rho_realised:.3f})")
        print(f"{r.device} {r.config} decomposed: {r.part} {r.factor:.3f}{interval}{rho}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
