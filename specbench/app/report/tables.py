"""Every table of a results report, of the rows rows.py chooses, assembled from core.metrics,
core.text_metrics and core.samples; the report itself (summary and tables)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import pandas as pd

from specbench.app.report.inputs import LoadedResults, declared_costs, unstable_timings
from specbench.app.report.rows import (
    IDENTITY,
    NATIVE_SUFFIX,
    MainRows,
    configs_of,
    main_rows,
    per_device,
    width_or_budget,
)
from specbench.app.report.sustained import sustained_tables
from specbench.core import metrics, samples, text_metrics
from specbench.core.methods.configs import CONFIG_COLUMNS, As2dConfig
from specbench.core.pricing import CostFit
from specbench.errors import SpecbenchError
from specbench.render.summary import Summary
from specbench.render.tables import Table

TEXT_DIFFERS = "WARNING: answer text differs between methods"
SILENT = "WARNING: drafter contributed nothing"
DIVERGENT = "Divergent windows, excluded from every table"
DECISIONS = "Native decisions differ from the trace, windows excluded from every table"
DECLARED = "Declared drafter costs (not measured on the device)"


@dataclass(frozen=True)
class Report:
    """What `report` prints: the one-screen summary, then the detail tables."""

    summary: Summary
    """Each method's best configuration and its verdict, per device@placement, for a terminal."""
    summary_table: Table
    """The same as one table, for every other format."""
    tables: list[Table]
    """The detail tables (build_tables)."""

    def all_tables(self) -> list[Table]:
        """The summary's table, then the detail tables: what every output but a terminal takes."""
        return [self.summary_table, *self.tables]


def build_report(loaded: LoadedResults, macro: bool = False,
                 selected: Mapping[str, As2dConfig] | None = None) -> Report:
    """The summary and every table of a report (the pooled numbers computed once for both)."""
    from specbench.app.report.summary import build_summary

    rows = main_rows(loaded.frame)
    pooled = metrics.pooled(rows.main)
    categories = metrics.per_category(rows.main) if metrics.has_categories(rows.main) else None
    return Report(*build_summary(loaded, rows, pooled, categories),
                  _tables(loaded, rows, pooled, macro, selected, categories))


def build_tables(loaded: LoadedResults, macro: bool = False,
                 selected: Mapping[str, As2dConfig] | None = None) -> list[Table]:
    """Every table of a report; `selected`: device -> the AS2D configuration its budget file names."""
    rows = main_rows(loaded.frame)
    categories = metrics.per_category(rows.main) if metrics.has_categories(rows.main) else None
    return _tables(loaded, rows, metrics.pooled(rows.main), macro, selected, categories)


def _tables(loaded: LoadedResults, rows: MainRows, pooled: pd.DataFrame, macro: bool,
            selected: Mapping[str, As2dConfig] | None, categories: pd.DataFrame | None = None) -> list[Table]:
    frame, main, native, suffix = rows.frame, rows.main, rows.native, rows.suffix
    tables = [pooled_table(main, suffix, pooled)]
    if categories is not None:
        tables.append(category_table(categories, suffix))
    if len(rows.replayed) and len(native):
        tables.append(pooled_table(native, NATIVE_SUFFIX))
    tables += [
        _per_configuration("Windows faster / slower than target-only" + suffix, metrics.ORDER["windows"],
                           metrics.window_counts(main), {"windows": None, "faster": None, "slower": None,
                                                         "slower_pct": ".1f", "median_loss_pct": ".1f",
                                                         "max_loss_pct": ".1f"}),
        _per_configuration("Acceptance and forwards" + suffix, metrics.ORDER["counts"], metrics.counts(main),
                           {"tau": ".3f", "acceptance": ".3f", "coverage": ".3f", "multi_token_fraction": ".3f",
                            "target_forwards": None, "drafter_forwards": None}),
        *position_tables(main, suffix),
        _per_configuration("Time decomposition T = D + V - O + H (seconds)" + suffix, metrics.ORDER["decomposition"],
                           metrics.decomposition(main),
                           dict.fromkeys(("decode_s", "d_s", "v_s", "o_s", "h_s", "exposed_drafter_s"), ".3f")),
    ]
    if macro:
        tables.append(_per_configuration("Macro-average over datasets", "pooled throughput and speedup per "
                                         "dataset x device x configuration, then the unweighted mean over datasets "
                                         f"(dataset '{metrics.MACRO_MEAN}')", metrics.macro_average(main),
                                         {"dataset": None, "datasets": None, "windows": None, "tokens_per_s": ".2f",
                                          "speedup": ".3f"}))
    as2d = sorted(main.loc[main["method"] == "as2d", "config"].unique())
    deployed = _deployed(main, selected) if selected else {}
    if len(as2d) > 1:
        tables.append(Table("Oracle over the AS2D catalog" + (" (deployed = selected budget)" if deployed else
                                                              " (deployed = best pooled)"),
                            metrics.ORDER["oracle"],
                            metrics.oracle(main, as2d, {d: c.label for d, c in deployed.items()} or None),
                            {c: ".2f" for c in ("deployed_tokens_per_s", "oracle_tokens_per_s", "oracle_pct",
                                                 "gap_pct", "gap_pct_low", "gap_pct_high")}))
    if deployed:
        table = metrics.ablation(main, deployed)
        if len(table):
            tables.append(Table("Ablation: decoupling and budget configuration", "pooled throughput per device x "
                                "arm, with the selected drafter; serial = specasr with k_max = budget, decoupled = "
                                "the selected as2d configuration with B = budget",
                                table, {"tokens_per_s": ".2f", "speedup": ".3f"}))
    mismatched = rows.mismatched
    if len(mismatched):
        shown = mismatched[["device", "window_id", "config", "drafter", "drafter_sha256"]].assign(
            drafter_sha256=mismatched["drafter_sha256"].map(lambda v: v[:12] if isinstance(v, str) else v))
        title = f"{DECISIONS} ({len(shown)} row{'' if len(shown) == 1 else 's'})"
        tables.insert(0, Table(title, metrics.ORDER["decisions"], shown.reset_index(drop=True),
                               warning=f"{title[0].lower()}{title[1:]}"))
    if len(rows.diverged):
        title = f"{DIVERGENT} ({divergent_count(rows.diverged, loaded.frame)})"
        explained = rows.diverged.assign(explanation=[
            loaded.explanations.get((r.device, r.window_id, r.config), "") for r in rows.diverged.itertuples()])
        tables.insert(0, Table(title, metrics.ORDER["divergent"], explained,
                               warning=f"{title[0].lower()}{title[1:]}"))
    if loaded.notes:
        tables.insert(0, Table("Overrides", "recorded as given on the command line",
                               pd.DataFrame({"note": loaded.notes})))
    declared = declared_costs(loaded)
    if len(declared):
        tables.insert(0, Table(DECLARED, "drafter costs from the profile's `declared` block (docs/METHODS.md "
                               "§4.7 Declared drafter costs), priced like measured ones in every table", declared,
                               alert=f"{len(declared)} declared drafter cost{'' if len(declared) == 1 else 's'} "
                                     "(not measured on the device) priced these results"))
    if frame["cost_fit"].isin([CostFit.MIN, CostFit.MAX]).any():
        tables.append(Table("Sensitivity to extrapolated co-scheduling ratios (tokens/s)",
                            "pooled throughput replayed with the median, minimum and maximum measured ratio "
                            "filling unmeasured widths; flagged = windows whose median replay used an unmeasured "
                            "ratio", metrics.sensitivity(frame),
                            {c: ".2f" for c in ("median", "min", "max", "low", "high", "range_pct")}))
    flat, linear = CostFit.DEPTH_FLAT.value, CostFit.DEPTH_LINEAR.value
    if (frame["cost_fit"] == linear).any():
        depth = metrics.sensitivity(frame, (CostFit.MEDIAN.value, linear), "depth_extrapolated")
        tables.append(Table(f"Sensitivity to KV depths beyond the measured ones: {flat} vs {linear} "
                            "(tokens/s)",
                            "pooled throughput replayed with costs outside the profile's measured depths held flat "
                            "(as every other table) and extended linearly from the nearest two measured depths "
                            "(never below 0 s); flagged = windows whose flat replay priced a forward outside them",
                            depth.rename(columns={CostFit.MEDIAN.value: flat}),
                            {c: ".2f" for c in (flat, linear, "low", "high", "range_pct")}))
    if len(native) and len(rows.replayed):
        fidelity = metrics.replay_fidelity(frame)
        flagged = per_device([(str(device), int(mine["flagged"].sum()), len(mine))
                              for device, mine in fidelity.groupby("device", sort=True) if mine["flagged"].any()],
                             "configurations")
        tables.append(Table("Replay fidelity (replay vs native throughput)", "per window |replay - native| / "
                            "native, then mean and max per device x configuration; flagged above 10%",
                            fidelity, {"mean_abs_error_pct": ".2f", "max_abs_error_pct": ".2f"},
                            alert=f"replay fidelity: {flagged} off native by more "
                                  "than 10% (mean over windows; the host's drift and run-to-run noise included, "
                                  "which `specbench validate` measures apart)" if flagged else ""))
    if text_metrics.has_text(frame):
        # WER/CER from the same rows as the other tables, or the native rows when only those have text
        scored, scored_suffix = (main, suffix) if text_metrics.has_text(main) else (native, NATIVE_SUFFIX)
        tables += text_tables(frame[frame["cost_fit"] == CostFit.MEDIAN], scored, loaded.references, scored_suffix)
    from specbench.app.report.energy import energy_tables

    tables += energy_tables(loaded, rows)
    tables += stability_tables(loaded, native)
    tables += sustained_tables(loaded.directories)
    return tables


CATEGORIES = "Speedup per category"


def category_table(categories: pd.DataFrame, suffix: str) -> Table:
    """`metrics.per_category` as Spec-Bench prints it: a row per device x configuration, a column per
    category and `overall`, each with its interval (CATEGORY_low, CATEGORY_high; a narrow terminal
    leaves the intervals out first)."""
    names = list(dict.fromkeys(categories["category"]))
    keys = ["device", "config"]
    wide = categories.drop_duplicates(keys)[keys + ["method", *CONFIG_COLUMNS]].reset_index(drop=True)
    measures: dict[str, str | None] = {}
    for name in names:
        mine = categories[categories["category"] == name].set_index(keys)
        at = pd.MultiIndex.from_frame(wide[keys])
        for column, suffix_ in (("speedup", ""), ("speedup_low", "_low"), ("speedup_high", "_high")):
            wide[f"{name}{suffix_}"] = mine[column].reindex(at).to_numpy()
            measures[f"{name}{suffix_}"] = ".3f"
    windows = categories[categories["config"] == "target"].drop_duplicates("category").set_index("category")["windows"]
    order = metrics.ORDER["categories"] + "; windows: " + ", ".join(
        f"{name} {int(windows[name])}" for name in names if name in windows)
    optional = tuple((f"{name}_low", f"{name}_high") for name in reversed(names))
    return _per_configuration(CATEGORIES + suffix, order, wide, measures, optional)


def stability_tables(loaded: LoadedResults, native: pd.DataFrame) -> list[Table]:
    """The spread of native rows decoded several times (`run --native --runs N`), and the
    unstable timings of the profiles the runs used (docs/METHODS.md §4.6 Stability warnings,
    §6.1 Repeated runs); none when neither applies."""
    tables = []
    spread = samples.spread_table(native)
    if len(spread):
        table = _per_configuration(
            "Native decode spread over repeated runs", samples.ORDER, spread,
            {"windows": None, "runs": None, "median_spread_pct": ".2f", "max_spread_pct": ".2f",
             "unstable_windows": None})
        unstable_windows = int(spread["unstable_windows"].sum())
        if unstable_windows:
            table = replace(table, alert=f"{unstable_windows} unstable native decodes over repeated runs (window x "
                                         "configuration)")
        tables.append(table)
    unstable = unstable_timings(loaded)
    if len(unstable):
        unstable = unstable.assign(median_s=unstable["median_s"] * 1e3).rename(columns={"median_s": "median_ms"})
        what = f"unstable profile timings (spread > {samples.UNSTABLE_SPREAD_PCT:g}% of the median)"
        if "ratio" in unstable and unstable["ratio"].notna().any():
            what += " and co-scheduling ratios below 1 (cells: beyond their interval; AS2D decodes': priced as 1)"
        tables.append(Table(what[:1].upper() + what[1:], samples.ORDER_PROFILE, unstable,
                            {"median_ms": ".4f", "spread_pct": ".1f"}, ("device", "profile"),
                            alert=f"{len(unstable)} {what}"))
    return tables


def _per_configuration(title: str, order: str, table: pd.DataFrame, measures: Mapping[str, str | None],
                       optional: tuple[tuple[str, ...], ...] = ()) -> Table:
    """A table of device, config, `measures` (column -> format spec, None: as is), then method,
    drafter and W/B from the configuration fields; `optional`: measures a narrow terminal leaves out."""
    if table.empty:  # e.g. window counts of a run with target-only rows alone: nothing to compare
        table = table.reindex(columns=["device", "config", *measures, "method", "drafter", "width", "budget"])
    frame = table[["device", "config", *measures]].copy()
    frame["method"] = table["method"]
    frame["drafter"] = table["drafter"]
    frame["W/B"] = [width_or_budget(*values)
                    for values in zip(table["method"], table["width"], table["budget"], strict=False)]
    return Table(title, order, frame, {c: spec for c, spec in measures.items() if spec}, IDENTITY, optional,
                 label="config")


def position_tables(rows: pd.DataFrame, suffix: str) -> list[Table]:
    """Per-position acceptance, and the configurations whose drafter contributed nothing
    (both empty when no row records per-position counts or every drafter helped)."""
    tables = []
    positions = metrics.per_position(rows)
    if len(positions):
        tables.append(_per_configuration("Per-position acceptance P(accept at k | reached k)" + suffix,
                                         metrics.ORDER["positions"], positions,
                                         {"position": None, "reached": None, "accepted": None,
                                          "acceptance": ".3f"}))
    silent = metrics.silent_drafters(rows)
    if len(silent):
        count = len(silent)
        title = f"{SILENT} ({count} dataset x configuration{'' if count == 1 else 's'})" + suffix
        tables.append(Table(title, metrics.ORDER["silent"], silent[["dataset", "device", "config", "windows",
                                                                   "proposed", "accepted", "problem"]],
                            warning=title.removeprefix("WARNING: ")))
    return tables


def pooled_table(rows: pd.DataFrame, suffix: str, pooled: pd.DataFrame | None = None) -> Table:
    """Pooled throughput, speedups and intervals of `rows` (`pooled`: metrics.pooled(rows), when already computed)."""
    pooled = metrics.pooled(rows) if pooled is None else pooled
    measures = {"windows": None, "tokens": None, "decode_s": ".3f", "tokens_per_s": ".2f", "speedup": ".3f",
                "speedup_low": ".3f", "speedup_high": ".3f", "mean_window_speedup": ".3f"}
    order = metrics.ORDER["pooled"] + _extrapolation_note(rows)
    if "speedup_vs_best_target" in pooled:
        measures.update(dict.fromkeys(("speedup_vs_best_target", "speedup_vs_best_target_low",
                                       "speedup_vs_best_target_high"), ".3f"))
        order += "; " + metrics.ORDER["placements"]
    # a narrow terminal keeps the point estimates; the speedup's interval goes last
    optional = (("speedup_low", "speedup_high"), ("mean_window_speedup",),
                ("speedup_vs_best_target_low", "speedup_vs_best_target_high"))
    return _per_configuration("Pooled decode throughput" + suffix, order, pooled, measures, optional)


def text_tables(frame: pd.DataFrame, scored: pd.DataFrame, references: dict[str, tuple[str, str | None]],
                suffix: str = "") -> list[Table]:
    """Transcripts (WER/CER of the `scored` rows, when references are known) and the
    lossless-in-text check over every row of `frame`."""
    tables = []
    scores = text_metrics.transcripts(scored, references) if text_metrics.has_text(scored) else pd.DataFrame()
    if len(scores):
        order = text_metrics.ORDER["transcripts"]
        empty = int(scores["empty_reference"].sum())
        if empty:
            order += f"; note: {empty} rows (window x configuration) had an empty reference: no WER/CER for them"
        tables.append(Table(f"Transcripts: WER / CER against the reference (%){suffix}", order, scores,
                            {c: ".2f" for c in ("wer_pct", "wer_mean_pct", "cer_pct", "cer_mean_pct")}))
    summary, differing = text_metrics.text_check(frame)
    tables.append(Table("Lossless in text (answer texts identical across methods)",
                        text_metrics.ORDER["lossless_text"], summary))
    if len(differing):
        counts = per_device([(device, differ, checked)
                             for device, checked, differ in text_metrics.text_check_by_device(frame) if differ])
        title = f"{TEXT_DIFFERS} ({counts})"
        tables.append(Table(title, text_metrics.ORDER["text_differs"], differing,
                            warning=title.removeprefix("WARNING: ")))
    return tables


def _extrapolation_note(rows: pd.DataFrame) -> str:
    """What the table's rows priced beyond the profile's measurements, if anything."""
    parts = [f"{int(rows[column].sum())} rows {what}" for column, what in
             (("extrapolated", "used an unmeasured co-scheduling ratio"),
              ("depth_extrapolated", "priced a KV depth outside the measured depths (flat there)"))
             if rows[column].any()]
    return "; " + ", ".join(parts) + " (see --sensitivity)" if parts else ""


def _deployed(main: pd.DataFrame, selected: Mapping[str, As2dConfig]) -> dict[str, As2dConfig]:
    """Per device, the AS2D configuration of the results that its budget file names: every
    parameter the file records must match; a file naming no drafter (selected with a single
    traced drafter) matches a configuration that names one, if only one does."""
    out = {}
    for device, wanted in selected.items():
        found = {label: config for label, config in
                 configs_of(main[(main["device"] == device) & (main["method"] == "as2d")]).items()
                 if isinstance(config, As2dConfig)}
        match = [label for label, config in found.items() if config == wanted]
        if not match and wanted.drafter is None:
            match = [label for label, config in found.items() if replace(config, drafter=None) == wanted]
        if len(match) != 1:
            problem = "several configurations match it" if match else "it is not in these results"
            raise SpecbenchError(f"--budget: the budget file for device '{device}' names {wanted.label}, but "
                                 f"{problem} (AS2D configurations of {device}: {', '.join(sorted(found)) or 'none'})",
                                 hint="report the results of `specbench run --budget` with that file")
        out[device] = found[match[0]]
    return out


def horizon_report(loaded: LoadedResults) -> list[Table]:
    """`report --horizon`'s tables: SD's tau and speedup per drafter x K, and acceptance per depth."""
    from specbench.app.report.replays import horizon_tables

    summary, depths, notes = horizon_tables(loaded)
    left_out = ("; " + "; ".join(notes)) if notes else ""
    return [Table("Horizon sweep (SD drafting K tokens)", "per drafter x K: tau = sum(tokens) / "
                  "sum(target forwards); speedup = pooled throughput / target-only's" + left_out, summary,
                  {"tau": ".3f", "tokens_per_s": ".2f", "speedup": ".3f"}),
            Table("Per-depth acceptance P(accept at d | reached d)", "counts over all rounds of all windows", depths,
                  {"acceptance": ".3f"})]


def divergent_count(diverged: pd.DataFrame, every_row: pd.DataFrame) -> str:
    """Per device, the windows that diverged against the windows it ran."""
    return per_device([(str(device), rows["window_id"].nunique(),
                        every_row.loc[every_row["device"] == device, "window_id"].nunique())
                       for device, rows in diverged.groupby("device", sort=True)])
