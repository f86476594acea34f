"""The tables and figures of a validation directory (`specbench validate`, `specbench report DIR`)."""

from __future__ import annotations

from dataclasses import asdict, fields
from pathlib import Path

import numpy as np
import pandas as pd

from specbench.core.decomposition import PART_REPLAY, Part
from specbench.core.fidelity import block_biases, probe_spread_pct
from specbench.core.samples import spread_pct
from specbench.render.tables import Table
from specbench.schemas.validation import (
    BlockRecord,
    CrossFitRecord,
    DecompositionRecord,
    Metric,
    ObservationRecord,
    OpRecord,
    ProbeRecord,
    SummaryRecord,
    kept,
    load_records,
    read_manifest,
)

FIDELITY_ORDER = ("per device@placement × configuration × metric: log errors over (block, window, run); F0 = RMS "
                  "ln(Na/Nb), F1 = RMS ln(replay/N) over single runs, E = sqrt(max(0, F1² − F0²/2)), bias = "
                  "geometric mean replay/native; intervals: Student t over the blocks' means (blocks − 1 "
                  "degrees of freedom; 90% for F0, F1 and the bias, one-sided 95% upper bound for E); "
                  "blocks_needed: the fewest blocks that would show both bounds if the bias, E and the blocks' "
                  "spread stayed as measured (-: none would)")
CROSSFIT_ORDER = ("as the replay fidelity table, with each half of a block's windows (alternating in window order) "
                  "priced by the ratios the other half's native decodes met instead of its refreshes': each model's "
                  "decode ratio in the serial decodes and both lanes' co-scheduling ratios in the AS2D decodes, "
                  "measured as a refresh measures them. No window prices itself. What the bias and E still show "
                  "is the model's error (and the ratios' drift within one decode job); where they shrink against "
                  "the table above, the difference was drift between the refreshes and the decodes")
DECOMPOSITION_ORDER = ("per device@placement × AS2D configuration: its speedup bias (total, replay as priced over "
                       "native) = contention × publication × remains. Each window replayed again with the target's "
                       "co-scheduling ratio, and its ratio alone after the producer, as its block's native runs "
                       "realised them, pooled (from the lanes' timestamps; "
                       "rho_priced and rho_realised: the profile's and the realised ratio of the forwards that ran "
                       "wholly beside the producer, the blocks' mean weighted by forwards), then also with each "
                       "run's producer publication times; a part is the ratio of the biases before and after "
                       "its substitution, remains the bias after both; replay_bias: the bias of the replay with the "
                       "substitutions so far, and its excess error E (upper: the one-sided 95% bound; a replay "
                       "substituting a run's own publications is judged against that run, so the noise it explains "
                       "leaves F0 too). Geometric means over (block, window), 90% intervals as the bias's "
                       "(Student t over the blocks' means); left_out: observations whose native lanes could not be "
                       "read back")


def _frame(records: list, kind: type) -> pd.DataFrame:
    return pd.DataFrame([asdict(r) for r in records], columns=[f.name for f in fields(kind)])


def validation_tables(directory: Path) -> list[Table]:
    directory = Path(directory)
    repeats = read_manifest(directory).get("repeats", 1)
    runs = (f"; a run (Na, Nb) is the mean of its {repeats} passes' decodes of the window (--repeats)"
            if repeats > 1 else "")
    summary = _frame(load_records(directory, SummaryRecord), SummaryRecord)
    tables = []
    titles = {Metric.SPEEDUP: "speedup over target-only (native: against the target-only decode beside it)",
              Metric.THROUGHPUT: "throughput (tokens/s)"}
    for metric, what in titles.items():
        tables.append(_fidelity_table(f"Replay fidelity: {what}", FIDELITY_ORDER + runs, summary, metric))
    beside = _frame(load_records(directory, CrossFitRecord), CrossFitRecord)
    if len(beside):
        for metric, what in titles.items():
            tables.append(_fidelity_table(f"Replay fidelity priced beside the decodes: {what}", CROSSFIT_ORDER + runs,
                                          beside, metric))
    per_block = _block_biases(load_records(directory, ObservationRecord))
    if len(per_block):
        tables.append(Table("Speedup bias per block", "per device@placement × configuration: each kept block's "
                            "bias alone (geometric mean of replay/native over its windows and runs) and their "
                            "range (largest over smallest): an error of the model holds in every block, the host's "
                            "drift moves between blocks", per_block,
                            {c: ".3f" for c in per_block.columns if c not in ("device", "config")},
                            keys=("device",)))
    parts = _frame(load_records(directory, DecompositionRecord), DecompositionRecord)
    if len(parts):
        parts["replay"] = parts["part"].map(lambda p: PART_REPLAY[Part(p)])
        tables.append(Table("AS2D's speedup bias, decomposed", DECOMPOSITION_ORDER, parts[
            ["device", "config", "part", "replay", "factor", "factor_low", "factor_high", "replay_bias", "replay_low",
             "replay_high", "excess_pct", "excess_upper_pct", "rho_priced", "rho_realised", "blocks", "observations",
             "left_out"]],
            {c: ".4f" for c in ("factor", "factor_low", "factor_high", "replay_bias", "replay_low", "replay_high")}
            | {"rho_priced": ".3f", "rho_realised": ".3f", "excess_pct": ".2f", "excess_upper_pct": ".2f"},
            keys=("device", "config"),
            optional=(("factor_low", "factor_high"), ("replay_bias", "replay_low", "replay_high"),
                      ("excess_pct", "excess_upper_pct"), ("rho_priced", "rho_realised"))))
    blocks = load_records(directory, BlockRecord)
    frame = _frame(blocks, BlockRecord)
    if len(frame):
        frame["windows"] = frame["windows"].map(len)
        frame["methods"] = [" | ".join(f"{g}: {', '.join(m[g])}" for g in gs) for gs, m in
                            zip(frame["groups"], frame["methods"], strict=False)]
        tables.append(Table("Validation blocks (every attempt; a voided one was redone)",
                            "one row per block attempt: its windows, the decode order of Na (Nb reversed), and its "
                            "decisive window: of the windows whose two probes both moved from their model's reference "
                            "(its probes around the refreshes) the same way, the one that moved most (the smaller "
                            "move) for its allowance (the larger of --probe-threshold and --probe-spreads × the "
                            "scatter of the model's probes in the block); voided when the move exceeds it", frame[
                                ["device", "block", "attempt", "windows", "methods", "drift_pct", "allowance_pct",
                                 "drift_series", "voided", "kept_after_voids", "wall_s"]],
                            {"drift_pct": ".1f", "allowance_pct": ".1f", "wall_s": ".0f"},
                            keys=("device",)))
    probes = _probe_summary(load_records(directory, ProbeRecord), blocks)
    if len(probes):
        tables.append(Table("Reference probes per block", "per kept block: the target's probe (median of a "
                            "burst of width-1 forwards at depth 0), first and range over the block, its scatter (the "
                            "void rule's: a robust standard deviation of each probe from its own job's), the median "
                            "of its bursts' spread (standard deviation / median), and the runner threads' run-queue "
                            "wait and VM steal accumulated over the block", probes,
                            {"first_us": ".0f", "min_us": ".0f", "max_us": ".0f", "scatter_pct": ".1f",
                             "burst_spread_pct": ".1f"},
                            keys=("device",)))
    ops = _frame(load_records(directory, OpRecord), OpRecord)
    if len(ops):
        tables.append(Table("Sweep vs decode, per forward", "per device × configuration × model × width × depth bin "
                            "[from, next bin): the serial decodes' forwards against the block's refreshed profile "
                            "at the same "
                            "width and depth (mean over forwards)", ops,
                            {"decode_mean_us": ".0f", "decode_median_us": ".0f", "profile_us": ".0f",
                             "decode_over_profile": ".3f"}, keys=("device",)))
    return tables


def _fidelity_table(title: str, order: str, summary: pd.DataFrame, metric: Metric) -> Table:
    rows = summary[summary["metric"] == metric].drop(columns=["metric"])
    columns = ["device", "config", "blocks", "observations", "f0_pct", "f1_pct", "excess_pct", "excess_upper_pct",
               "bias", "bias_low", "bias_high", "blocks_needed", "verdict"]
    return Table(title, order, rows[columns].reset_index(drop=True),
                 {c: ".2f" for c in ("f0_pct", "f1_pct", "excess_pct", "excess_upper_pct")}
                 | {c: ".4f" for c in ("bias", "bias_low", "bias_high")} | {"blocks_needed": ".0f"},
                 keys=("device",), optional=(("bias_low", "bias_high"), ("blocks_needed",)))


def _block_biases(observations: list[ObservationRecord]) -> pd.DataFrame:
    groups: dict[tuple[str, str], list[ObservationRecord]] = {}
    for o in observations:
        if o.metric == Metric.SPEEDUP:
            groups.setdefault((o.device, o.config), []).append(o)
    rows = []
    for (device, config), mine in sorted(groups.items()):
        biases = block_biases(mine)
        rows.append({"device": device, "config": config} | {f"block {b}": v for b, v in biases.items()}
                    | {"range": max(biases.values()) / min(biases.values())})
    return pd.DataFrame(rows)


def _probe_summary(probes: list[ProbeRecord], blocks: list[BlockRecord]) -> pd.DataFrame:
    rows = []
    by_block: dict[tuple[str, int], list[ProbeRecord]] = {}
    for p in kept(probes, [b for b in blocks if not b.voided]):
        by_block.setdefault((p.device, p.block), []).append(p)
    for (device, block), mine in sorted(by_block.items()):
        values = [p.target_us for p in mine]
        decode = [p for p in mine if p.series.startswith("decode:")]
        waits = [p.run_queue_wait_us for p in decode if p.run_queue_wait_us >= 0]
        steals = [p.steal_ticks for p in mine if p.steal_ticks >= 0]
        bursts = [spread_pct(p.target_samples_us) for p in mine if p.target_samples_us]
        groups: dict[str, list[float]] = {}
        for p in mine:  # the void rule's groups: the probes around the refreshes, each decode job's
            groups.setdefault(p.series if p.series.startswith("decode:") else "refresh", []).append(p.target_us)
        rows.append({"device": device, "block": block, "probes": len(mine), "first_us": values[0],
                     "min_us": min(values), "max_us": max(values),
                     "scatter_pct": probe_spread_pct(list(groups.values())),
                     "burst_spread_pct": float(np.median(bursts)) if bursts else None,
                     "run_queue_wait_ms": (max(waits) - min(waits)) / 1000 if waits else None,
                     "steal_ticks": max(steals) - min(steals) if steals else None})
    return pd.DataFrame(rows)


def validation_figures(directory: Path, out: Path) -> list[Path]:
    from specbench.render import plots

    obs = _frame(load_records(directory, ObservationRecord), ObservationRecord)
    summary = _frame(load_records(directory, SummaryRecord), SummaryRecord)
    paths = []
    for metric in Metric:
        if (obs["metric"] == metric).any():
            fig, _ = plots.replay_vs_native(obs, summary, metric)
            paths += plots.save(fig, Path(out) / f"validation-{metric}")
    return paths
