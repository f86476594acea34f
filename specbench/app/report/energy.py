"""The report's energy table (docs/METHODS.md §10 Energy): joules per request and per token of each
method's best configuration (the summary's rule, on the native rows), against target-only on the
same windows, with paired bootstrap intervals over windows; "no energy source" when the native
rows carry no energy, and nothing for replay rows (a replay has no battery)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from specbench.app.report.inputs import LoadedResults
from specbench.app.report.rows import IDENTITY, MainRows, width_or_budget
from specbench.core import metrics, stats
from specbench.render.tables import Table

TITLE = "Energy per request (battery, native runs)"
NO_SOURCE = "no energy source"
ORDER = ("per device x configuration (each method's best by pooled throughput), over the windows where both it and "
         "target-only have energy: J/request = mean energy_j, mJ/token = 1000 sum(energy_j) / sum(tokens); "
         "_above_idle: less the idle draw; vs_target = sum(energy_j) / target-only's on the same windows (lossless "
         "methods commit the same tokens, so per request and per token alike); ")
COLUMNS = {"windows": None, "j_per_request": ".4g", "j_per_request_above_idle": ".4g", "mj_per_token": ".4g",
           "mj_per_token_above_idle": ".4g", "vs_target": ".3f", "vs_target_low": ".3f", "vs_target_high": ".3f",
           "samples_per_request": ".1f"}


def energy_rows(native: pd.DataFrame) -> pd.DataFrame:
    """One row per device x (target-only and each method's best configuration): the energy
    measures of COLUMNS and the configuration's fields; empty when no native row has energy."""
    from specbench.app.report.summary import best_configs

    measured = native[native["energy_j"].notna()]
    if measured.empty:
        return pd.DataFrame(columns=["device", "config", *COLUMNS])
    out = []
    pooled = metrics.pooled(measured, intervals=False)
    for device, mine in pooled.groupby("device", sort=False):
        rows = measured[measured["device"] == device]
        target = rows[rows["config"] == "target"].set_index("window_id")
        chosen = [mine[mine["method"] == "target"].iloc[0], *(r for _, r in best_configs(mine).iterrows())]
        for config in chosen:
            mine_rows = rows[rows["config"] == config["config"]].set_index("window_id")
            windows = mine_rows.index.intersection(target.index)
            out.append({"device": device, "config": config["config"]}
                       | _measures(mine_rows.loc[windows], target.loc[windows])
                       | {k: config[k] for k in ("method", "drafter", "width", "budget")})
    return pd.DataFrame(out)


def _measures(rows: pd.DataFrame, target: pd.DataFrame) -> dict:
    energy, baseline = rows["energy_j"].astype(float), target["energy_j"].astype(float)
    above = rows["energy_above_idle_j"]
    has_above = bool(above.notna().all()) and len(rows) > 0
    tokens = float(rows["tokens"].sum())
    ones = np.ones(len(rows))
    interval = stats.pooled_ratio_interval(energy.to_numpy(), ones, baseline.to_numpy(), ones)
    return {"windows": len(rows), "j_per_request": energy.mean(),
            "j_per_request_above_idle": above.astype(float).mean() if has_above else None,
            "mj_per_token": 1e3 * energy.sum() / tokens if tokens else None,
            "mj_per_token_above_idle": 1e3 * above.astype(float).sum() / tokens if has_above and tokens else None,
            "vs_target": energy.sum() / baseline.sum() if baseline.sum() > 0 else None,
            "vs_target_low": None if interval is None else interval.low,
            "vs_target_high": None if interval is None else interval.high,
            "samples_per_request": rows["energy_samples"].astype(float).mean()}


def energy_tables(loaded: LoadedResults, rows: MainRows) -> list[Table]:
    """The energy table of the native rows; a one-line "no energy source" when they have none."""
    if rows.native.empty:
        return []
    table = energy_rows(rows.native)
    if table.empty:
        return [Table("Energy", "", pd.DataFrame({"note": [no_source_line(loaded)]}))]
    frame = table[["device", "config", *COLUMNS]].copy()
    frame["method"], frame["drafter"] = table["method"], table["drafter"]
    frame["W/B"] = [width_or_budget(method, _int(width), _int(budget))
                    for method, width, budget in zip(table["method"], table["width"], table["budget"], strict=False)]
    return [Table(TITLE, ORDER + stats.describe() + "; " + convention_line(loaded), frame, {
        c: spec for c, spec in COLUMNS.items() if spec}, IDENTITY,
        (("vs_target_low", "vs_target_high"), ("samples_per_request",)), label="config")]


def _int(value: object) -> int | None:
    """A W or B of a frame column (floats where other rows have none) as the integer it is."""
    return None if value is None or pd.isna(value) else int(value)  # type: ignore[call-overload]


def no_source_line(loaded: LoadedResults) -> str:
    """Why the runs have no energy: each native manifest's reason, once."""
    reasons = [m.energy.no_source for m in loaded.manifests if m.energy is not None and m.energy.no_source]
    asked = any(m.energy is not None for m in loaded.manifests)
    why = "; ".join(dict.fromkeys(reasons)) if reasons else (
        "the runner took no battery samples" if asked else "not measured (run --native --energy-interval MS)")
    return f"{NO_SOURCE}: {why.removeprefix(NO_SOURCE + ': ')}"


def convention_line(loaded: LoadedResults) -> str:
    """How the batteries were read: convention, sampling interval and idle draw per run."""
    parts = []
    for manifest in loaded.manifests:
        energy = manifest.energy
        if energy is None or energy.convention is None:
            continue
        idle = "no idle period" if energy.idle_w is None else \
            f"idle {energy.idle_w:.3g} W over {energy.idle_samples} samples"
        how = "detected" if energy.detected else "declared"
        parts.append(f"{manifest.device}: {energy.convention} ({how}), every {energy.interval_ms} ms, {idle}")
    return "; ".join(parts)
