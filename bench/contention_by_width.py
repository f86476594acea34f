"""The target's co-scheduling ratio per width class as a validation's native AS2D decodes met it, beside what
each block's profile priced; and its ratio alone once the producer was done (width 1, and wider).

Reads a validation directory (`specbench validate --out`, or `bench/fidelity.py --out DIR`'s `DIR/validation`):
per placement × AS2D configuration × kept block, the decodes' target forwards that ran wholly beside the producer,
pooled as the profile's overheads decodes pool them (`core/decomposition.py` `decode_contention`): the ratio
single-token steps (width 1) and verifications (width 2 and more) realised, and the profile's `cosched.decode`
for the same drafter, which replay priced (docs/METHODS.md §4.3 Co-scheduling ratios, "As a decode meets it").
The baseline is the block's profile as the validation's replay prices it (`app/validate.block_profiles`: every
ratio from the block's own refreshes): `met/priced` is the validation's ratio over it. Rows
`after 1` and `after >1`: the forwards that began after the producer's span, their time with the host work after them
over their solo work (`decomposition.after_producer`), against the profile's ratio alone at the same widths weighted
by that solo work (docs/METHODS.md §4.3 Co-scheduling ratios, "After the producer"; 1 where the profile has none).

    python bench/contention_by_width.py DIR/validation
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from specbench.app.validate import block_profiles, resolve_configs
from specbench.core.decomposition import decode_contention
from specbench.core.methods.configs import MethodConfig, config_of
from specbench.core.validation_stats import Bounds, decode_index, native_lanes
from specbench.schemas.traces import TraceFile, load_trace_dir
from specbench.schemas.validation import (
    BlockRecord,
    DecodeRecord,
    Metric,
    SummaryRecord,
    kept,
    load_records,
    read_manifest,
)
from specbench.schemas.windows import Window, load_windows


def _fmt(ratio: float | None, forwards: int) -> str:
    return f"{'-':>6} ({forwards:4d})" if ratio is None else f"{ratio:6.3f} ({forwards:4d})"


def fidelity_text(s: SummaryRecord) -> str:
    """A summary's bias, its interval and E as the benches print them: '0.996 [0.967, 1.025], E 1.5% ≤ 3.7%' (≤ -
    with one block, which gives no bound)."""
    upper = "-" if s.excess_upper_pct is None else f"{s.excess_upper_pct:.1f}%"
    interval = "" if s.bias_low is None or s.bias_high is None else f" [{s.bias_low:.3f}, {s.bias_high:.3f}]"
    return f"{s.bias:.3f}{interval}, E {s.excess_pct:.1f}% ≤ {upper}"


@dataclass(frozen=True)
class ValidationInputs:
    """What a finished validation replays, as its manifest names them."""

    traces: dict[str, TraceFile]
    configs: list[MethodConfig]
    """Every configuration the validation ran, resolved against its traces."""
    windows: dict[str, Window]
    """By window_id."""
    bounds: dict[Metric, Bounds]
    lookups: set[str]
    """The drafters that are prompt lookup (their traces' drafts say so), as `specbench validate` sets them apart."""


def validation_inputs(validation: Path) -> ValidationInputs:
    """The traces, configurations, windows, bounds and lookup drafters of the validation in `validation`."""
    plan = read_manifest(validation)
    traces = load_trace_dir(Path(plan["traces"]))
    return ValidationInputs(traces, resolve_configs([config_of(m) for m in plan["methods"]], traces),
                            {w.window_id: w for w in load_windows(Path(plan["windows"]["path"]))},
                            {metric: Bounds(**plan["bounds"][metric]) for metric in Metric},
                            {name for name, trace in traces.items() if any(
                                w.drafts is not None and w.drafts.lookup is not None for w in trace.windows.values())})


def kept_records(doc: str, argv: list[str] | None) -> tuple[Path, list[BlockRecord], list[DecodeRecord]]:
    """A bench's one argument, a validation directory, and its kept blocks and their decodes."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("validation", type=Path, help="a validation directory (holds blocks.jsonl)")
    args = parser.parse_args(argv)
    blocks = [b for b in load_records(args.validation, BlockRecord) if not b.voided]
    return args.validation, blocks, list(kept(load_records(args.validation, DecodeRecord), blocks))


def main(argv: list[str] | None = None) -> int:
    validation, blocks, decodes = kept_records(__doc__, argv)
    print(f"{'device':14s} {'block':>5s} {'config':28s} {'class':8s} {'met (forwards)':>15s} "
          f"{'priced (forwards)':>18s} {'met/priced':>10s}")
    profiles = block_profiles(validation, blocks)
    for b in sorted(blocks, key=lambda b: (b.device, b.block)):
        profile = profiles[(b.device, b.block)]
        mine = [d for d in decodes if (d.device, d.block) == (b.device, b.block)]
        index = decode_index(mine)
        for config in sorted({d.config for d in mine if d.producer is not None}):
            runs = [native_lanes(d, index) for d in mine
                    if d.config == config and d.producer is not None and d.lossless]
            group = next(d.group for d in mine if d.config == config)
            cosched = profile.cosched(group)
            met = decode_contention(runs, profile.target_costs, cosched)
            priced = cosched.decode
            if met is None or priced is None:
                print(f"{b.device:14s} {b.block:5d} {config:28s} no forward wholly beside the producer, or no decode "
                      "ratio in the profile")
                continue
            for name, m, mf, p, pf in (("all", met.realised, met.forwards, priced.realised, priced.forwards),
                                       ("single", met.single, met.single_forwards, priced.single,
                                        priced.single_forwards),
                                       ("verify", met.verify, met.verify_forwards, priced.verify,
                                        priced.verify_forwards)):
                _row(b, config, name, m, mf, p, pf)
            for name, keep in (("after 1", lambda w: w == 1), ("after >1", lambda w: w > 1)):
                mine_after = None if met.after is None else met.after.ratio(keep)
                if mine_after is None:
                    continue
                # the profile's ratio alone at each width, weighted by the solo work the decodes did there
                solo = {w: v[1] for w, v in met.after.widths.items() if keep(w)}
                priced_after = sum(s * cosched.after(w) for w, s in solo.items()) / sum(solo.values())
                pf = 0 if priced.after is None else sum(v[2] for w, v in priced.after.widths.items() if keep(w))
                _row(b, config, name, mine_after[0], mine_after[1], priced_after, pf)
    return 0


def _row(b: BlockRecord, config: str, name: str, met: float | None, met_forwards: int, priced: float | None,
         priced_forwards: int) -> None:
    ratio = f"{met / priced:10.3f}" if met is not None and priced is not None else f"{'-':>10s}"
    print(f"{b.device:14s} {b.block:5d} {config:28s} {name:8s} {_fmt(met, met_forwards):>15s} "
          f"{_fmt(priced, priced_forwards):>18s} {ratio}")


if __name__ == "__main__":
    sys.exit(main())
