"""Plots for reports, readable in black and white (line styles, markers and hatches).

Each function takes the numbers (DataFrames) and returns the figure together with the
data series it drew, so tests check the series rather than pixels. `save` writes PNG and
SVG side by side.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from specbench.extras import require

STYLES = [("-", "o"), ("--", "s"), (":", "^"), ("-.", "D"), ((0, (5, 1)), "v"), ((0, (1, 1)), "x"),
          ((0, (3, 1, 1, 1)), "P"), ((0, (5, 3)), "*")]
HATCHES = ["", "///", "...", "xx", "\\\\", "++"]


def _pyplot():
    matplotlib = require("matplotlib", "plots", "drawing figures (report --plots, --bundle)")

    matplotlib.use("Agg")  # files only; no display needed
    import matplotlib.pyplot as plt

    return plt


def _style(i: int) -> dict:
    line, marker = STYLES[i % len(STYLES)]
    return {"linestyle": line, "marker": marker, "color": "black", "markevery": 0.1, "markersize": 4,
            "linewidth": 1.2}


def _finish(ax, fig=None, xlabel: str | None = None, ylabel: str | None = None, title: str | None = None,
            grid: bool = True, legend_size: int = 7) -> None:
    """Name one axis's x, y and title, grid it (light grey) and put its legend; with `fig`, lay
    the figure out once its last axis is done."""
    ax.set(**{k: v for k, v in (("xlabel", xlabel), ("ylabel", ylabel), ("title", title)) if v is not None})
    if grid:
        ax.grid(True, color="0.85")
    ax.legend(fontsize=legend_size)
    if fig is not None:
        fig.set_layout_engine("tight")


def throughput_cdf(per_window: pd.DataFrame, device: str, configs: Sequence[str]):
    """Per-window throughput CDF on one device, one curve per configuration (AS2D Figure 5 style)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    series = {}
    rows = per_window[per_window["device"] == device]
    for i, config in enumerate(configs):
        values = np.sort(rows.loc[rows["config"] == config, "tokens_per_s"].to_numpy())
        if not len(values):
            continue
        fraction = np.arange(1, len(values) + 1) / len(values)
        ax.step(values, fraction, where="post", label=config, **_style(i))
        series[config] = (values, fraction)
    _finish(ax, fig, "decode throughput per window (tokens/s)", "fraction of windows",
            f"Per-window throughput CDF — {device}")
    return fig, series


def decomposition_bars(parts: pd.DataFrame, device: str):
    """Stacked V | exposed drafter (D - O) | H bars per configuration: their sum is T."""
    plt = _pyplot()
    rows = parts[parts["device"] == device].reset_index(drop=True)
    fig, ax = plt.subplots(figsize=(max(6, 0.5 * len(rows) + 2), 4))
    x = np.arange(len(rows))
    layers = [("V (verification)", rows["v_s"].to_numpy()),
              ("D - O (exposed drafter)", (rows["d_s"] - rows["o_s"]).to_numpy()),
              ("H (residual)", rows["h_s"].to_numpy())]
    bottom = np.zeros(len(rows))
    series = {}
    for i, (label, values) in enumerate(layers):
        ax.bar(x, values, bottom=bottom, label=label, color=["0.35", "white", "0.8"][i], edgecolor="black",
               hatch=HATCHES[i])
        series[label] = values
        bottom = bottom + values
    ax.plot(x, rows["decode_s"], linestyle="none", marker="_", color="black", markersize=14, label="T")
    ax.set_xticks(x, rows["config"], rotation=60, ha="right", fontsize=7)
    highest_s = float(rows["decode_s"].max()) if len(rows) else 0.0
    ax.set_ylim(0, 1.08 * max(float(bottom.max(initial=0.0)), highest_s, 1e-9))
    _finish(ax, fig, None, "seconds (sum over windows)", f"T = D + V - O + H — {device}", grid=False)
    series["T"] = rows["decode_s"].to_numpy()
    return fig, series


def width_cost(profiles: Sequence, depth_index: int = 0):
    """Target cost per position CT(w) / w against width w, one curve per device."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    series = {}
    for i, profile in enumerate(profiles):
        table = profile.target_costs
        widths = np.array(table.widths())
        per_position = np.array([table.seconds[w][depth_index] for w in widths]) / widths * 1e3
        ax.plot(widths, per_position, label=profile.name, **{**_style(i), "markevery": 1})
        series[profile.name] = (widths, per_position)
    depth = int(profiles[0].target_costs.depths[depth_index]) if profiles else 0
    _finish(ax, fig, "verification width w (tokens)", "target cost per position (ms)",
            f"Width sweep: CT(w)/w at KV depth {depth}")
    return fig, series


def horizon(summary: pd.DataFrame, depths: pd.DataFrame):
    """tau and speedup against K, and per-depth acceptance at the largest K, per drafter."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    series = {}
    for i, (drafter, rows) in enumerate(summary.groupby("drafter", sort=False)):
        axes[0].plot(rows["K"], rows["tau"], label=drafter, **{**_style(i), "markevery": 1})
        axes[2].plot(rows["K"], rows["speedup"], label=drafter, **{**_style(i), "markevery": 1})
        deepest = depths[(depths["drafter"] == drafter) & (depths["K"] == depths["K"].max())]
        axes[1].plot(deepest["depth"], deepest["acceptance"], label=drafter, **{**_style(i), "markevery": 1})
        series[drafter] = {"K": rows["K"].to_numpy(), "tau": rows["tau"].to_numpy(),
                           "speedup": rows["speedup"].to_numpy(), "depth": deepest["depth"].to_numpy(),
                           "acceptance": deepest["acceptance"].to_numpy()}
    _finish(axes[0], None, "horizon K", "tau (tokens / target forward)", "tau")
    _finish(axes[1], None, "depth d", "P(accept at d | reached d)", f"per-depth acceptance, K={depths['K'].max()}")
    _finish(axes[2], fig, "horizon K", "speedup over target-only", "speedup")
    return fig, series


def position_acceptance(positions: pd.DataFrame, device: str, configs: Sequence[str] | None = None):
    """P(accept at draft position k | reached k) against k on one device, one curve per configuration."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    series = {}
    rows = positions[positions["device"] == device]
    for i, config in enumerate(configs if configs is not None else rows["config"].unique()):
        mine = rows[rows["config"] == config]
        if not len(mine):
            continue
        k, p = mine["position"].to_numpy(), mine["acceptance"].to_numpy(dtype=float)
        ax.plot(k, p, label=config, **{**_style(i), "markevery": 1})
        series[config] = (k, p)
    ax.set_ylim(0, 1.05)
    _finish(ax, fig, "draft position k", "P(accept at k | reached k)", f"Per-position acceptance — {device}")
    return fig, series


def replay_vs_native(observations: pd.DataFrame, floors: pd.DataFrame, metric: str):
    """Per device, replay / native − 1 (%) of each window against its native value, one marker per
    configuration, with each configuration's floor band ±F0 (two native runs' disagreement)."""
    plt = _pyplot()
    rows = observations[observations["metric"] == metric]
    devices = list(dict.fromkeys(rows["device"]))
    fig, axes = plt.subplots(1, max(len(devices), 1), figsize=(6 * max(len(devices), 1), 4), squeeze=False)
    series = {}
    for ax, device in zip(axes[0], devices, strict=False):
        mine = rows[rows["device"] == device]
        for i, config in enumerate(dict.fromkeys(mine["config"])):
            one = mine[mine["config"] == config]
            native = np.sqrt(one["native_a"].to_numpy() * one["native_b"].to_numpy())
            error = 100 * (one["replay"].to_numpy() / native - 1)
            floor = floors[(floors["device"] == device) & (floors["config"] == config) & (floors["metric"] == metric)]
            f0 = float(floor["f0_pct"].iloc[0]) if len(floor) else float("nan")
            style = _style(i)
            ax.plot(native, error, linestyle="none", marker=style["marker"], color="black", markersize=4,
                    fillstyle="none", label=f"{config} (F0 {f0:.1f}%)")
            series[(device, config)] = (native, error, f0)
        widest = max((s[2] for k, s in series.items() if k[0] == device and np.isfinite(s[2])), default=0.0)
        ax.axhspan(-widest, widest, color="0.9", zorder=0, label=f"widest floor ±{widest:.1f}%")
        ax.axhline(0, color="black", linewidth=0.8)
        unit = " tokens/s" if metric == "throughput" else " speedup"
        _finish(ax, None, "native (geometric mean of Na and Nb)" + unit, "replay / native − 1 (%)",
                f"Replay vs native {metric} — {device}", legend_size=6)
    fig.set_layout_engine("tight")
    return fig, series


def sustained_timeline(requests: pd.DataFrame):
    """Sustained load (docs/METHODS.md §6.3 Sustained load): throughput (top) and the hottest zone (bottom) against the
    end of each request (the temperature: when its snapshot was read), one curve per run x configuration;
    `requests` has run, config, end_s, snapshot_s, tokens_per_s and hottest_c."""
    plt = _pyplot()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    series = {}
    for i, ((run, config), rows) in enumerate(requests.groupby(["run", "config"], sort=False)):
        label = f"{config} ({run})"
        top.plot(rows["end_s"], rows["tokens_per_s"], label=label, **_style(i))
        bottom.plot(rows["snapshot_s"], rows["hottest_c"], label=label, **_style(i))
        series[label] = rows[["end_s", "tokens_per_s", "snapshot_s", "hottest_c"]].to_numpy()
    _finish(top, None, None, "tokens/s", "Sustained load: throughput per request")
    _finish(bottom, fig, "seconds into the stream (request end; snapshot read)", "hottest zone (°C)",
            "Sustained load: hottest thermal zone")
    return fig, series


def energy_bars(energy: pd.DataFrame, device: str):
    """Joules per request per configuration on one device: the whole bar is what the battery gave,
    its hatched part what the request drew above the idle draw; each bar names its ratio to target-only."""
    plt = _pyplot()
    rows = energy[energy["device"] == device]
    fig, ax = plt.subplots(figsize=(6, 4))
    x = np.arange(len(rows))
    total = rows["j_per_request"].astype(float).to_numpy()
    above = rows["j_per_request_above_idle"].astype(float).to_numpy()
    ax.bar(x, total, color="white", edgecolor="black", label="total")
    if not np.isnan(above).all():
        ax.bar(x, np.nan_to_num(above), color="white", edgecolor="black", hatch="///", label="above idle")
    for i, ratio in enumerate(rows["vs_target"]):
        if ratio is not None and not pd.isna(ratio):
            ax.annotate(f"{float(ratio):.2f}x", (x[i], total[i]), ha="center", va="bottom", fontsize=7)
    ax.set_xticks(x, list(rows["config"]), rotation=20, ha="right", fontsize=7)
    _finish(ax, fig, None, "energy per request (J)", f"Energy per request — {device} (ratio: vs target-only)")
    return fig, {"config": list(rows["config"]), "total": total, "above_idle": above}


def save(fig, stem: Path) -> list[Path]:
    """Write `stem`.png and `stem`.svg; returns the paths."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.with_suffix(".png"), stem.with_suffix(".svg")]
    for path in paths:
        fig.savefig(path, dpi=150)
    _pyplot().close(fig)
    return paths
