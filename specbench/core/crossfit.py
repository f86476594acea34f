"""A validation block priced with its ratios measured beside its decodes (docs/METHODS.md §7.9 Validation: does
replay predict the device?, "Priced beside the decodes").

A block's replay prices each forward at its refreshed cells times ratios its refreshes measured minutes before and
after the decodes: each model's decode ratio in serial decodes, both lanes' co-scheduling ratios in AS2D decodes.
On a host whose ratios drift within minutes, that drift is charged to the model. Here the block's windows are
split into two folds and each fold is replayed with those ratios measured on the *other* fold's native decodes
of the same jobs, with the same estimators the refreshes use (`pricing.decode_ratio`,
`decomposition.decode_contention`): no window prices itself. The cells, the overheads and whatever a fold's
decodes cannot measure stay as the block's profile has them. What this replay still gets wrong is the model's
error, plus what the ratios drift within one decode job; what it gets right that the block's own replay did not
is drift between the refreshes and the decodes.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace

from specbench.core import decomposition
from specbench.core.methods.configs import As2dConfig, MethodConfig
from specbench.core.pricing import CostTable, SerialForward, decode_ratio
from specbench.core.validation_stats import decode_index, native_lanes, op_timings
from specbench.errors import SpecbenchError
from specbench.schemas.profiles import DeviceProfile, DrafterProfile
from specbench.schemas.validation import DecodeRecord


def folds(window_ids: Collection[str]) -> tuple[set[str], set[str]]:
    """A block's windows in two folds, alternating in window order (neighbours in a shard land apart)."""
    ordered = sorted(window_ids)
    return set(ordered[0::2]), set(ordered[1::2])


def serial_forwards(decodes: Sequence[DecodeRecord], profile: DeviceProfile, configs: Sequence[MethodConfig],
                    lookups: Collection[str]) -> dict[str, list[SerialForward]]:
    """By model ('target', or the drafter's name), the forwards of the serial decodes that `profile`'s tables price,
    as the op comparison takes them (`validation_stats.op_timings`: lossless decodes; no lookup's or SpecASR's
    drafter ops)."""
    out: dict[str, list[SerialForward]] = {}
    for t in op_timings(decodes, profile, configs, set(lookups)):
        out.setdefault(t.model, []).append((t.width, t.depth, t.us, t.host_us))
    return out


def _with_ratio(table: CostTable, forwards: Sequence[SerialForward]) -> CostTable:
    """`table` at the ratio `forwards` met; the host work after them where they timed it, else `table`'s."""
    ratio = decode_ratio(forwards, table)
    if ratio is None:
        return table
    if ratio.host is None and table.decode is not None:
        ratio = replace(ratio, host=table.decode.host)
    return replace(table, decode=ratio)


def as2d_lanes(decodes: Sequence[DecodeRecord], configs: Sequence[MethodConfig], drafter: str,
               drafter_prompts: Mapping[str, int]) -> list[decomposition.NativeLanes]:
    """The lanes of every lossless AS2D decode drafted by `drafter` whose producer record reads back, each beside
    the target-only decode paired with it, with the drafter's prompt length of its window where `drafter_prompts`
    (by window) has it (the producer's ratio is measured only from those)."""
    as2d = {c.label for c in configs if isinstance(c, As2dConfig) and c.drafter == drafter}
    index = decode_index(decodes)
    out = []
    for d in decodes:
        if d.config in as2d and d.lossless and d.producer is not None:  # a decode job records every slot
            out.append(replace(native_lanes(d, index), drafter_prompt=drafter_prompts.get(d.window_id)))
    return out


def beside_profile(profile: DeviceProfile, decodes: Sequence[DecodeRecord], configs: Sequence[MethodConfig],
                   lookups: Collection[str],
                   drafter_prompts: Mapping[str, Mapping[str, int]] | None = None) -> DeviceProfile:
    """`profile` with the ratios `decodes` (one fold's native decodes) met: the target's and each drafter's decode
    ratio, and per drafter both lanes' co-scheduling ratios in its AS2D decodes, where the decodes measure
    them; the rest as `profile` prices it (the producer's ratio needs each window's drafter prompt length,
    `drafter_prompts` by drafter and window: the trace's `n_prompt_drafter`)."""
    forwards = serial_forwards(decodes, profile, configs, lookups)
    target_costs = _with_ratio(profile.target_costs, forwards.get("target", []))
    drafters: dict[str, DrafterProfile] = {}
    for name, drafter in profile.drafters.items():
        if name in lookups:
            drafters[name] = drafter
            continue
        costs = _with_ratio(drafter.costs, forwards.get(name, []))
        all_rows = None if drafter.all_rows_costs is None else replace(drafter.all_rows_costs, decode=costs.decode)
        cosched = drafter.cosched
        if cosched is not None:
            lanes = as2d_lanes(decodes, configs, name, (drafter_prompts or {}).get(name, {}))
            try:
                met = decomposition.decode_contention(lanes, target_costs, cosched, costs)
            except SpecbenchError:  # a run without the lanes' timestamps: the block's ratios stay
                met = None
            if met is not None:
                if met.producer is None:  # not measured here: the producer keeps the block's price
                    met = decomposition.producer_as(met, cosched.decode)
                cosched = replace(cosched, decode=met)
        drafters[name] = replace(drafter, costs=costs, all_rows_costs=all_rows, cosched=cosched)
    return replace(profile, target_costs=target_costs, drafters=drafters)
