"""Aggregates over per-window results (docs/METHODS.md §7 Metrics). Pure: DataFrames in, DataFrames out.

Every function states its aggregation order in `ORDER`, which the report prints with
each table. Rows are grouped by their configuration label (one per configuration); the
per-configuration tables carry the configuration's fields (`CONFIG_COLUMNS`) beside it:

* pooled throughput per (device, configuration) = sum of tokens / sum of decode time;
  speedup = pooled / pooled target-only on the same device;
* SD is reported per W and as "sd[W=5..8 mean]": the mean over W of the pooled
  throughputs (tables), and per window the mean over W of the per-window throughputs
  (window counts and CDFs) — two different orders, as in the AS2D paper; a mean row is an
  SD row whose `width` is None;
* window counts compare each window with target-only on the same device and window;
  loss = 1 - throughput / target-only throughput, over the slower windows;
* degenerate windows (no token after the prefill) are counted and excluded from
  per-window ratios;
* a divergent window (some row with lossless = false: a native output that differed from
  the reference) leaves every aggregate on its device: all rows of that (device, window),
  every configuration, replay and native alike, so that all methods are compared on the
  same windows (`split_divergent`, applied by every function here).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import fields, replace
from typing import Any

import numpy as np
import pandas as pd

from specbench.core import stats
from specbench.core.methods.configs import CONFIG_COLUMNS, REPORTED_WIDTHS, As2dConfig, SdConfig, sd_mean_label
from specbench.core.positions import summed
from specbench.core.pricing import RATIO_FITS, CostFit
from specbench.errors import SpecbenchError
from specbench.schemas.placement import device_of
from specbench.schemas.results import Source

SD_MEAN = sd_mean_label()
ORDER = {
    "pooled": "per device x configuration: sum(tokens) / sum(decode_s) over windows; speedup = that / target-only's; "
              f"{SD_MEAN} = mean over W of pooled throughputs; speedup_low..speedup_high: "
              f"{stats.describe()}, each window paired with target-only's on the same device "
              f"({SD_MEAN}: the mean over W itself resampled); mean_window_speedup = mean over windows of "
              "tokens/decode_s / target-only's on the same window (Spec-Bench's order; degenerate windows left out)",
    "placements": "a device@placement is one device in one placement; speedup_vs_best_target = pooled / the "
                  "fastest target-only of the device in any placement, its interval pairing each window with that "
                  "target-only's",
    "windows": "per device x configuration: each window's tokens/decode_s vs target-only's on the same window; "
               f"{SD_MEAN} uses the per-window mean over W; loss = 1 - ratio over slower windows",
    "oracle": "per device x dataset: per window the fastest catalog configuration (zero selection cost), "
              "oracle = sum(tokens) / sum(best decode_s); gap = 1 - deployed / oracle; gap_pct_low..gap_pct_high: "
              f"{stats.describe()}, the deployed configuration held fixed",
    "decomposition": "per device x configuration: sums over windows of D, V, O, H (seconds); T = D + V - O + H",
    "counts": "per device x configuration: ratios of sums over windows (tau = tokens / target forwards, "
              "acceptance = accepted / proposed, coverage = accepted / tokens)",
    "decisions": "native rows whose decisions differ from replay's on their drafter's trace (SD, SpecASR: accepted "
                 "and proposed counts per verification; AS2D: the producer's stream; "
                 "docs/METHODS.md §6.4 Drafters and decisions checked against the trace): not decoded as their "
                 "configuration says, so their "
                 "(device, window) is left out of every other table like a divergent one; details in the run's "
                 "decisions.jsonl",
    "divergent": "a (device, window) where a configuration did not commit the reference output (its native "
                 "row has no tokens and no time): every row of it, all configurations, replay and native, is "
                 "left out of every other table; explanation: near-tie (the target's forward of the verification "
                 "width ranked the committed token first where width 1 ranked it within twice the two rows' largest "
                 "logit difference) or unexplained (the run failed); positions, tokens and margins in the run's "
                 "divergences.jsonl",
    "positions": "per device x configuration: at draft position k, sum over windows of verifications that "
                 "accepted the candidate at k / sum of those that reached k (all of 1..k-1 accepted and a "
                 "candidate at k)",
    "silent": "per dataset x device x configuration with a drafter: sums over windows of candidates proposed "
              "and accepted; flagged when either is 0",
    "categories": "per device x configuration x category (the windows' `category`): pooled speedup = sum(tokens) "
                  "/ sum(decode_s) over the category's windows / target-only's on the same windows, "
                  f"{SD_MEAN} the mean over W of pooled throughputs; CATEGORY_low..CATEGORY_high: "
                  f"{stats.describe()}, each window paired with target-only's; overall = every window "
                  "(Spec-Bench's per-category table)",
}
KEYS = ["device", "method", "config"]
DIVERGENT_COLUMNS = ["device", "window_id", "dataset", "config", "source"]


def split_divergent(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the rows aggregates use, the divergent rows as DIVERGENT_COLUMNS).

    A 0-token 0-second divergence row would otherwise count as a window, win the oracle and
    leave the other methods measured on windows it lacks, so the whole (device, window) goes."""
    bad = ~df["lossless"].astype(bool)
    mismatched = decisions_differ(df)
    if not bad.any() and not mismatched.any():
        return df, pd.DataFrame(columns=DIVERGENT_COLUMNS)
    diverged = df.loc[bad, DIVERGENT_COLUMNS].drop_duplicates().reset_index(drop=True)
    # a row decided otherwise than its trace was not decoded as its configuration says: its window goes too
    pairs = pd.MultiIndex.from_frame(df.loc[bad | mismatched, ["device", "window_id"]])
    keep = ~pd.MultiIndex.from_frame(df[["device", "window_id"]]).isin(pairs)
    return df[keep], diverged


def decisions_differ(df: pd.DataFrame) -> pd.Series:
    """Rows whose native decisions differ from their trace's (`decisions_match` False; None: not checked)."""
    if "decisions_match" not in df:
        return pd.Series(False, index=df.index)
    return df["decisions_match"].map(lambda v: isinstance(v, bool | np.bool_) and not v).astype(bool)


def _comparable(df: pd.DataFrame) -> pd.DataFrame:
    return split_divergent(df)[0]


def _require_target(df: pd.DataFrame) -> None:
    if not (df["method"] == "target").any():
        raise SpecbenchError("these results have no target-only rows; speedups and window counts compare against "
                             "target-only", hint="run with --methods including target")


SD_FAMILY = [f.name for f in fields(SdConfig) if f.name != "width"]
"""What SD configurations averaged over W share (the label's other fields)."""


def _with_fields(sums: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """`sums` (keyed by configuration label) with each configuration's fields from `rows`."""
    fields_by_label = rows.drop_duplicates("config").set_index("config")[list(CONFIG_COLUMNS)]
    return sums.join(fields_by_label, on="config")


def _with_sd_means(frame: pd.DataFrame, group: list[str], value: str, first: list[str]) -> pd.DataFrame:
    """`frame` (with the configuration fields) plus, per SD family measured at every reported
    width, the mean of `value` over W: a row with the family's fields and width None."""
    in_mean = ((frame["method"] == "sd") & frame["width"].isin(REPORTED_WIDTHS)).astype(bool)
    if not in_mean.any():
        return frame
    # the family as one tuple: grouping by its columns would turn a None drafter into NaN
    sd = frame[in_mean].assign(_family=list(frame.loc[in_mean, SD_FAMILY].itertuples(index=False, name=None)))
    agg = {value: (value, "mean"), "_widths": ("config", "nunique")}
    agg.update({c: (c, "first") for c in first})
    mean = sd.groupby(group + ["_family"], sort=False).agg(**agg).reset_index()
    mean = mean[mean["_widths"] == len(REPORTED_WIDTHS)].reset_index(drop=True)
    if mean.empty:
        return frame
    families = [dict(zip(SD_FAMILY, family, strict=False)) for family in mean["_family"]]
    mean["method"] = "sd"
    mean["config"] = [sd_mean_label(**family) for family in families]
    for column in CONFIG_COLUMNS:
        mean[column] = pd.Series([family.get(column) for family in families], dtype=object)
    return pd.concat([frame, mean.reindex(columns=frame.columns)], ignore_index=True)


def pooled(df: pd.DataFrame, intervals: bool = True, best_target: bool = True) -> pd.DataFrame:
    """Pooled throughput and speedup per device x configuration (plus the SD mean rows); with
    `intervals`, the speedup's paired bootstrap interval (speedup_low, speedup_high) and the
    mean of per-window speedups (mean_window_speedup); with `best_target` and device@placement
    names, the speedup against the device's fastest target-only (and its interval)."""
    df = _comparable(df)
    _require_target(df)
    sums = df.groupby(KEYS, sort=False).agg(windows=("window_id", "size"), tokens=("tokens", "sum"),
                                            decode_s=("decode_s", "sum"),
                                            degenerate=("tokens", lambda s: int((s == 0).sum()))).reset_index()
    sums["tokens_per_s"] = sums["tokens"] / sums["decode_s"]
    # A mean of throughputs has no single decode time: decode_s stays empty on SD mean rows.
    sums = _with_sd_means(_with_fields(sums, df), ["device"], "tokens_per_s", ["windows", "tokens", "degenerate"])
    target = sums[sums["config"] == "target"].set_index("device")["tokens_per_s"]
    sums["speedup"] = sums["tokens_per_s"] / sums["device"].map(target)
    if intervals:
        _add_intervals(sums, "speedup", [_speedup_interval(df, r, r["device"]) for r in sums.to_dict("records")])
        ratios = window_ratios(df).groupby(["device", "config"], sort=False)["ratio"].mean()
        sums["mean_window_speedup"] = ratios.reindex(pd.MultiIndex.from_frame(sums[["device", "config"]])).values
    if best_target and sums["device"].str.contains("@", regex=False).any():
        # The honest baseline (docs/METHODS.md §7.1 Pooled throughput and speedups): the fastest target-only of the
        # device in any placement, so a method cannot look good by crippling its own placement's baseline.
        phone = sums["device"].map(device_of)
        fastest = target.groupby(target.index.map(device_of)).idxmax()  # phone -> its fastest device@placement
        sums["speedup_vs_best_target"] = sums["tokens_per_s"] / phone.map(fastest).map(target)
        if intervals:
            _add_intervals(sums, "speedup_vs_best_target",
                           [_speedup_interval(df, r, fastest[device_of(r["device"])]) for r in sums.to_dict("records")])
    return sums


def _add_intervals(sums: pd.DataFrame, name: str, found: list[stats.Interval | None]) -> None:
    sums[f"{name}_low"] = [np.nan if i is None else i.low for i in found]
    sums[f"{name}_high"] = [np.nan if i is None else i.high for i in found]


def _none(value: Any) -> Any:
    return None if isinstance(value, float) and np.isnan(value) else value


def _speedup_interval(df: pd.DataFrame, record: dict, baseline: str) -> stats.Interval | None:
    """The interval of one pooled-table row's speedup over target-only on device `baseline`
    (its own device, or the fastest placement of the same phone): its windows paired by
    window_id with the baseline's; an SD mean row resamples its W configurations together."""
    if record["config"] == "target" and baseline == record["device"]:
        return None  # 1 by definition
    on_device = df[df["device"] == record["device"]]
    if record["method"] == "sd" and _none(record["width"]) is None:
        p_min, drafter = _none(record["p_min"]), _none(record["drafter"])
        members = [SdConfig(w, p_min or 0.0, drafter).label for w in REPORTED_WIDTHS]
    else:
        members = [record["config"]]
    series = [on_device[on_device["config"] == c].set_index("window_id")[["tokens", "decode_s"]] for c in members]
    series.append(df[(df["device"] == baseline) & (df["config"] == "target")].set_index("window_id")[
        ["tokens", "decode_s"]])
    common = series[-1].index
    for part in series:
        common = common.intersection(part.index, sort=False)
    data = [part.loc[common, column].to_numpy() for part in series for column in ("tokens", "decode_s")]
    if len(members) == 1:
        return stats.pooled_ratio_interval(*data)
    return stats.paired_interval(stats.mean_pooled_ratio, data)


def per_window(df: pd.DataFrame) -> pd.DataFrame:
    """Per-window throughput with the SD per-window mean over W added (for counts and CDFs)."""
    df = _comparable(df)
    live = df[df["tokens"] > 0]
    out = live[KEYS + list(CONFIG_COLUMNS) + ["window_id", "dataset"]].copy()
    out["tokens_per_s"] = live["tokens"] / live["decode_s"]
    return _with_sd_means(out, ["device", "window_id"], "tokens_per_s", ["dataset"])


def window_ratios(df: pd.DataFrame) -> pd.DataFrame:
    """`per_window` with `ratio` = each window's throughput / target-only's on the same device
    and window (target-only's own rows included, at 1)."""
    _require_target(df)
    windows = per_window(df)
    target = windows[windows["config"] == "target"].set_index(["device", "window_id"])["tokens_per_s"]
    windows["ratio"] = windows["tokens_per_s"].values / target.reindex(
        pd.MultiIndex.from_frame(windows[["device", "window_id"]])).values
    return windows


def window_counts(df: pd.DataFrame) -> pd.DataFrame:
    """Faster/slower windows vs target-only with median and maximum loss among the slower."""
    windows = window_ratios(df)
    others = windows[windows["config"] != "target"]
    rows = []
    for (device, method, config), group in others.groupby(KEYS, sort=False):
        ratio = group["ratio"].dropna()
        slower = ratio[ratio < 1.0]
        loss = 1.0 - slower
        rows.append({"device": device, "method": method, "config": config, "windows": len(ratio),
                     "faster": int((ratio > 1.0).sum()), "slower": int(len(slower)),
                     "ties": int((ratio == 1.0).sum()),
                     "slower_pct": 100.0 * len(slower) / len(ratio) if len(ratio) else np.nan,
                     "median_loss_pct": 100.0 * float(loss.median()) if len(loss) else 0.0,
                     "max_loss_pct": 100.0 * float(loss.max()) if len(loss) else 0.0})
    return _with_fields(pd.DataFrame(rows), windows) if rows else pd.DataFrame(rows)


def counts(df: pd.DataFrame) -> pd.DataFrame:
    """tau, acceptance, coverage, multi-token-forward fraction and forwards, as ratios of sums; `verifications`:
    the target forwards that verified a candidate (NaN where a row with candidates has no per-position counts)."""
    df = _comparable(df)
    positions = df["reached_at"] if "reached_at" in df else [()] * len(df)
    df = df.assign(verifications=[float(reached[0]) if len(reached) else (0.0 if proposed == 0 else np.nan)
                                  for reached, proposed in zip(positions, df["proposed"], strict=True)])
    sums = df.groupby(KEYS, sort=False)[["tokens", "target_forwards", "proposed", "accepted", "multi_token_forwards",
                                         "drafter_forwards"]].sum().reset_index()
    # a sum over a configuration with any unrecorded row is unknown, not a count of the recorded ones
    sums["verifications"] = df.groupby(KEYS, sort=False)["verifications"].agg(
        lambda v: v.sum(skipna=False)).to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        sums["tau"] = sums["tokens"] / sums["target_forwards"]
        sums["acceptance"] = sums["accepted"] / sums["proposed"]
        sums["coverage"] = sums["accepted"] / sums["tokens"]
        sums["multi_token_fraction"] = sums["multi_token_forwards"] / sums["target_forwards"]
    return _with_fields(sums, df)


def decomposition(df: pd.DataFrame) -> pd.DataFrame:
    """Sums of D, V, O, H and T per device x configuration, and the exposed drafter time."""
    df = _comparable(df)
    sums = df.groupby(KEYS, sort=False)[["decode_s", "d_s", "v_s", "o_s", "h_s"]].sum().reset_index()
    sums["exposed_drafter_s"] = sums["d_s"] - sums["o_s"]
    return _with_fields(sums, df)


def oracle(df: pd.DataFrame, catalog: list[str], deployed: dict[str, str] | None = None) -> pd.DataFrame:
    """Per device x dataset: the per-window oracle over `catalog` configurations and the gap
    of the deployed configuration (`deployed[device]`, default: the best pooled one)."""
    df = _comparable(df)
    rows = df[df["config"].isin(catalog)]
    if rows.empty:
        raise SpecbenchError(f"no results for the oracle catalog ({', '.join(catalog) or 'empty'})")
    out = []
    for (device, dataset), group in rows.groupby(["device", "dataset"], sort=False):
        best = group.groupby("window_id")["decode_s"].min()
        tokens = group.groupby("window_id")["tokens"].first()
        # exactly rounded sums (fsum), so that a configuration best on every window shows a gap of 0, not -0.0
        oracle_tp = math.fsum(tokens) / math.fsum(best)
        pooled_by_config = group.groupby("config").apply(lambda g: math.fsum(g["tokens"]) / math.fsum(g["decode_s"]),
                                                         include_groups=False)
        chosen = (deployed or {}).get(device) or str(pooled_by_config.idxmax())
        if chosen not in pooled_by_config:
            raise SpecbenchError(f"deployed configuration {chosen} for {device} is not in the results")
        deployed_tp = float(pooled_by_config[chosen])
        # deployed / oracle is a pooled ratio over the same windows: its interval gives the gap's
        mine = group[group["config"] == chosen].set_index("window_id")
        interval = stats.pooled_ratio_interval(mine["tokens"], mine["decode_s"], tokens[mine.index], best[mine.index])
        out.append({"device": device, "dataset": dataset, "deployed": chosen, "deployed_tokens_per_s": deployed_tp,
                    "oracle_tokens_per_s": oracle_tp, "oracle_pct": 100.0 * deployed_tp / oracle_tp,
                    "gap_pct": 100.0 * (1.0 - deployed_tp / oracle_tp),
                    "gap_pct_low": np.nan if interval is None else 100.0 * (1.0 - interval.high),
                    "gap_pct_high": np.nan if interval is None else 100.0 * (1.0 - interval.low),
                    "windows": len(best), "configs": int(group["config"].nunique())})
    return pd.DataFrame(out)


def sensitivity(df: pd.DataFrame, fits: Sequence[str] = RATIO_FITS,
                flag: str = "extrapolated") -> pd.DataFrame:
    """Pooled throughput under each cost fill-in of `fits` (`cost_fit` values; the first is the
    one every other table uses) and its range, per device x configuration replayed under more
    than the first; `flagged` = windows whose first-fit row is marked by the column `flag`."""
    df = _comparable(df)
    rows = df[(df["source"] == Source.REPLAY) & df["cost_fit"].isin(fits)]  # native rows have no variants
    varied = rows.loc[rows["cost_fit"] != fits[0], "config"].unique()
    if not len(varied):
        raise SpecbenchError(f"no sensitivity rows ({', '.join(fits[1:])}) in these results",
                             hint="run with --sensitivity")
    rows = rows[rows["config"].isin(varied)]
    sums = rows.groupby(KEYS + ["cost_fit"], sort=False)[["tokens", "decode_s"]].sum().reset_index()
    sums["tokens_per_s"] = sums["tokens"] / sums["decode_s"]
    table = sums.pivot_table(index=KEYS, columns="cost_fit", values="tokens_per_s", sort=False).reset_index()
    present = [f for f in fits if f in table.columns]
    table["low"] = table[present].min(axis=1)
    table["high"] = table[present].max(axis=1)
    table["range_pct"] = 100.0 * (table["high"] - table["low"]) / table[fits[0]]
    base = rows[rows["cost_fit"] == fits[0]]
    flagged = base.groupby(KEYS, sort=False)[flag].sum().astype(int).rename("flagged").reset_index()
    table = table.merge(flagged, on=KEYS, how="left")
    table.columns.name = None
    return table[KEYS + present + ["low", "high", "range_pct", "flagged"]]


MACRO_MEAN = "mean over datasets"
"""The `dataset` of a macro-average's mean rows."""
OVERALL = "overall"
"""The `category` of a per-category table's rows over every window."""
UNCATEGORIZED = "(none)"
"""The `category` of the windows without one, beside categorized windows."""


def has_categories(df: pd.DataFrame) -> bool:
    """Whether any row names its window's category."""
    return "category" in df and bool(df["category"].notna().any())


def per_category(df: pd.DataFrame) -> pd.DataFrame:
    """Per device x configuration x category: windows, pooled speedup and its paired bootstrap
    interval (`pooled` on the category's windows), categories in name order, then category OVERALL
    over every window; windows without a category form UNCATEGORIZED."""
    df = _comparable(df)
    _require_target(df)
    names = df["category"].astype(object).where(df["category"].notna(), UNCATEGORIZED)
    if (names == OVERALL).any():
        raise SpecbenchError(f"a window's category is '{OVERALL}', the name the per-category table gives every "
                             "window together", hint="rename the category in the windows file")
    columns = KEYS + ["category", "windows", "speedup", "speedup_low", "speedup_high"]
    parts = [pooled(group, best_target=False).assign(category=name) for name, group in df.groupby(names, sort=True)]
    parts.append(pooled(df, best_target=False).assign(category=OVERALL))
    table = pd.concat([part[columns + list(CONFIG_COLUMNS)] for part in parts], ignore_index=True)
    rank = {key: i for i, key in enumerate(parts[-1][KEYS].itertuples(index=False, name=None))}
    table["_rank"] = [rank.get(key, len(rank)) for key in table[KEYS].itertuples(index=False, name=None)]
    return table.sort_values("_rank", kind="stable").drop(columns="_rank").reset_index(drop=True)


def macro_average(df: pd.DataFrame) -> pd.DataFrame:
    """Per device x configuration: pooled throughput and speedup per dataset, then a row
    (dataset MACRO_MEAN) with their unweighted mean over datasets."""
    df = _comparable(df)
    _require_target(df)
    per_dataset = pd.concat([pooled(group, intervals=False).assign(dataset=name, datasets=1)
                             for name, group in df.groupby("dataset", sort=False)], ignore_index=True)
    macro = per_dataset.groupby(KEYS, sort=False).agg(datasets=("dataset", "nunique"),
                                                      windows=("windows", "sum"),
                                                      tokens_per_s=("tokens_per_s", "mean"),
                                                      speedup=("speedup", "mean")).reset_index()
    macro["dataset"] = MACRO_MEAN
    columns = KEYS + ["dataset", "datasets", "windows", "tokens_per_s", "speedup"]
    table = pd.concat([per_dataset[columns], macro[columns]], ignore_index=True)
    # each configuration's datasets, then its mean, configurations in the order of the rows
    rank = {key: i for i, key in enumerate(macro[KEYS].itertuples(index=False, name=None))}
    table["_rank"] = [rank[key] for key in table[KEYS].itertuples(index=False, name=None)]
    table["_mean"] = table.index >= len(per_dataset)
    table = table.sort_values(["_rank", "_mean"], kind="stable").drop(columns=["_rank", "_mean"])
    return _with_fields(table.reset_index(drop=True), per_dataset)


def replay_fidelity(df: pd.DataFrame, threshold_pct: float = 10.0) -> pd.DataFrame:
    """Replay vs native throughput on the windows run both ways, per device x configuration."""
    df = _comparable(df)
    live = df[df["tokens"] > 0]
    keys = ["device", "config", "window_id"]
    native = live[live["source"] == Source.NATIVE].set_index(keys)
    replay = live[(live["source"] == Source.REPLAY) & (live["cost_fit"] == CostFit.MEDIAN)].set_index(keys)
    both = native.index.intersection(replay.index)
    if not len(both):
        raise SpecbenchError("no window was both replayed and run natively on the same device and configuration",
                             hint="report a replay results directory together with a native one")
    native_tps = native.loc[both, "tokens"] / native.loc[both, "decode_s"]
    replay_tps = replay.loc[both, "tokens"] / replay.loc[both, "decode_s"]
    error = (100.0 * (replay_tps - native_tps).abs() / native_tps).rename("abs_error_pct").reset_index()
    table = error.groupby(["device", "config"], sort=False).agg(
        windows=("abs_error_pct", "size"), mean_abs_error_pct=("abs_error_pct", "mean"),
        max_abs_error_pct=("abs_error_pct", "max")).reset_index()
    table["flagged"] = table["mean_abs_error_pct"] > threshold_pct
    return table


def ablation(df: pd.DataFrame, selected: Mapping[str, As2dConfig], default_budget: int = 7) -> pd.DataFrame:
    """Serial vs decoupled at the default and at the selected budget (the AS2D paper's ablation),
    with the selected configuration's drafter.

    Serial = SpecASR with k_max = budget; decoupled = the selected AS2D configuration with
    B = budget (its other settings kept). Rows that the results do not contain are left out."""
    pooled_rows = pooled(df, intervals=False)
    out = []
    for device, chosen in selected.items():
        on_device = pooled_rows[pooled_rows["device"] == device]
        specasr = on_device["method"] == "specasr"
        if chosen.drafter:
            specasr &= on_device["drafter"] == chosen.drafter
        for arm in ("serial", "decoupled"):
            for which, b in (("default", default_budget), ("selected", chosen.budget)):
                if arm == "serial":
                    match = specasr & (on_device["k_max"] == b)
                else:
                    match = on_device["config"] == replace(chosen, budget=b).label
                for _, row in on_device[match].iterrows():
                    out.append({"device": device, "arm": arm, "budget": f"{which} ({b})", "config": row["config"],
                                "tokens_per_s": row["tokens_per_s"], "speedup": row["speedup"]})
    return pd.DataFrame(out).drop_duplicates(["device", "config"]) if out else pd.DataFrame(out)


def per_position(df: pd.DataFrame) -> pd.DataFrame:
    """P(accept at draft position k | reached k) per device x configuration, one row per k,
    for the configurations whose rows record per-position counts."""
    df = _comparable(df)
    rows = []
    for (device, method, config), group in df.groupby(KEYS, sort=False):
        reached, accepted = summed(group["reached_at"]), summed(group["accepted_at"])
        for k, (r, a) in enumerate(zip(reached, accepted, strict=False), start=1):
            rows.append({"device": device, "method": method, "config": config, "position": k, "reached": int(r),
                         "accepted": int(a), "acceptance": a / r if r else np.nan})
    columns = [*KEYS, "position", "reached", "accepted", "acceptance"]
    return _with_fields(pd.DataFrame(rows, columns=columns), df)


def silent_drafters(df: pd.DataFrame) -> pd.DataFrame:
    """The (dataset, device, configuration)s whose drafter contributed nothing: it proposed no
    candidate, or none of its candidates was accepted (a drafter that silently fell back)."""
    df = _comparable(df)
    drafted = df[df["method"] != "target"]
    sums = drafted.groupby(["dataset", "device", "method", "config"], sort=False).agg(
        windows=("window_id", "size"), proposed=("proposed", "sum"), accepted=("accepted", "sum")).reset_index()
    sums = sums[(sums["proposed"] == 0) | (sums["accepted"] == 0)].reset_index(drop=True)
    sums["problem"] = np.where(sums["proposed"] == 0, "proposed no candidate", "no candidate accepted")
    return _with_fields(sums, df)
