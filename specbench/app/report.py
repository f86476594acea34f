"""What `specbench report` computes: comparable inputs, tables, figures and bundles."""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Mapping, Sequence

import pandas as pd

from specbench.app.parallel_replay import replay_study
from specbench.core import metrics, samples, text_metrics
from specbench.core.methods.configs import MEAN_WIDTHS, As2dConfig, MethodConfig, config_of
from specbench.core.replay.bulk import DEPTH_LINEAR
from specbench.errors import SpecbenchError
from specbench.render.tables import INDEX, Table, csv_files, render, to_markdown
from specbench.schemas.budgets import load_budget
from specbench.schemas.fileio import file_sha256, write_atomic
from specbench.schemas.results import ROWS, ResultsManifest, load_results, profile_warnings
from specbench.schemas.windows import load_windows

TEXT_DIFFERS = "WARNING: answer text differs between methods"
SILENT = "WARNING: drafter contributed nothing"
DIVERGENT = "Divergent windows, excluded from every table"


@dataclass
class Loaded:
    manifests: list[ResultsManifest]
    frame: pd.DataFrame
    directories: list[Path]
    notes: list[str] = field(default_factory=list)
    """Overrides the user asked for (recorded in every output)."""
    references: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    """window_id -> (window_sha256, reference text or None), for WER/CER; loaded only when rows have text."""
    text_notes: list[str] = field(default_factory=list)
    """Why reference texts are missing, if they are (for stderr)."""


def _identity(manifest: ResultsManifest) -> dict[str, str]:
    """The fields two runs must share to be compared, as field -> value."""
    fields = {"windows.digest": manifest.windows.digest}
    targets = {t.target.sha256 for t in manifest.traces.values()}
    if manifest.target is not None:
        targets.add(manifest.target.sha256)
    if targets:
        fields["target model sha256"] = ",".join(sorted(str(t) for t in targets))
    for profile in manifest.profiles:
        fields[f"profile of {profile.device}"] = profile.sha256
        if profile.runner_sha256:
            fields[f"runner build of {profile.device}"] = profile.runner_sha256
    return fields


def load_many(directories: Sequence[Path], allow_mixed: bool = False, windows: Path | None = None) -> Loaded:
    """Rows of several results directories; comparing unlike runs is refused (or recorded).

    When rows carry answer texts, the windows' reference texts are read from `windows`, or
    else from the windows file each manifest names (when it is still there)."""
    manifests, frames = [], []
    for directory in directories:
        manifest, frame = load_results(directory)
        manifests.append(manifest)
        frames.append(frame)
    notes = []
    seen: dict[str, tuple[str, Path]] = {}
    for directory, manifest in zip(directories, manifests):
        for name, value in _identity(manifest).items():
            if name not in seen:
                seen[name] = (value, directory)
                continue
            first, where = seen[name]
            if first != value:
                message = f"field '{name}' differs: {first} ({where}) vs {value} ({directory})"
                if not allow_mixed:
                    raise SpecbenchError(f"refusing to compare unlike runs: {message}",
                                         hint="compare runs of the same windows, models, runner and profile, "
                                              "or pass --allow-mixed (recorded in the report)")
                notes.append(f"--allow-mixed: {message}")
    frame = pd.concat(frames, ignore_index=True)
    shas = frame.groupby("window_id")["window_sha256"].nunique()
    if (shas > 1).any() and not allow_mixed:
        window = shas[shas > 1].index[0]
        values = sorted(frame.loc[frame["window_id"] == window, "window_sha256"].unique())
        raise SpecbenchError(f"refusing to compare unlike runs: window '{window}' has window_sha256 {values[0]} "
                             f"and {values[1]}", hint="the window changed between runs")
    keys = ["device", "config", "window_id", "ratio_fit", "source"]
    if frame.duplicated(keys).any():
        dup = frame[frame.duplicated(keys)].iloc[0]
        raise SpecbenchError(f"window '{dup['window_id']}' of {dup['config']} on {dup['device']} appears in more "
                             "than one results directory")
    loaded = Loaded(manifests, frame, list(directories), notes)
    if text_metrics.has_text(frame):
        loaded.references, loaded.text_notes = _references(manifests, windows)
    return loaded


def _references(manifests: list[ResultsManifest], explicit: Path | None) -> tuple[dict[str, tuple[str, str | None]], list[str]]:
    paths = [Path(explicit)] if explicit is not None else []
    notes = []
    if explicit is None:
        for manifest in manifests:
            named = manifest.windows.path
            if not named:
                continue
            if Path(named).exists():
                paths.append(Path(named))
            else:
                notes.append(f"no reference texts from {named} (not found); pass --windows FILE for WER/CER")
        if not paths and not notes:
            notes.append("the results name no windows file; pass --windows FILE for WER/CER")
    references: dict[str, tuple[str, str | None]] = {}
    for path in dict.fromkeys(paths):
        references.update((w.window_id, (w.window_sha256, w.reference)) for w in load_windows(path))
    if paths and not any(ref is not None for _, ref in references.values()):
        notes.append(f"no window in {', '.join(map(str, dict.fromkeys(paths)))} has a reference text; no WER/CER")
    return references, notes


def add_sensitivity(loaded: Loaded, progress=None) -> None:
    """Replay the cost fill-in variants the results lack (study.SENSITIVITY_FITS: min and max
    co-scheduling ratios for AS2D, depths extended linearly for every method) from the manifests' inputs."""
    from specbench.app.study import SENSITIVITY_FITS, fit_configs, load_inputs

    frame = loaded.frame
    missing_fits = [fit for fit in SENSITIVITY_FITS if not (frame["ratio_fit"] == fit).any()]
    if not missing_fits:
        return
    extra, replayed = [], False
    for manifest in loaded.manifests:
        if manifest.mode != "replay":
            continue
        replayed = True
        configs = list(_configs(frame[frame["source"] == "replay"], list(manifest.methods)).values())
        if not any(fit_configs(configs, fit) for fit in missing_fits):
            continue
        paths = [Path(p.path) for p in manifest.profiles]
        missing = [p for p in [Path(manifest.windows.path), *paths] if not p.exists()]
        if missing:
            raise SpecbenchError(f"--sensitivity replays from the run's inputs; {missing[0]} is gone")
        inputs = load_inputs(Path(manifest.windows.path), Path(next(iter(manifest.traces.values())).path).parent,
                             paths, None)
        subset = set(frame["window_id"])
        inputs.windows[:] = [w for w in inputs.windows if w.window_id in subset]
        for fit in missing_fits:
            todo = fit_configs(configs, fit)
            if todo:
                extra.append(replay_study(inputs.windows, inputs.traces, inputs.profiles, todo, progress, None, fit))
    if not replayed:
        raise SpecbenchError("--sensitivity needs rows from a replay run")
    if extra:
        loaded.frame = pd.concat([frame, *extra], ignore_index=True)


def _configs(rows: pd.DataFrame, labels: Sequence[str] | None = None) -> dict[str, MethodConfig]:
    """label -> configuration of the configurations in `rows` (those of `labels`, in that order)."""
    found = {record["config"]: config_of(record) for record in rows.drop_duplicates("config").to_dict("records")}
    return found if labels is None else {label: found[label] for label in labels if label in found}


def build_tables(loaded: Loaded, macro: bool = False, selected: Mapping[str, As2dConfig] | None = None) -> list[Table]:
    """Every table of a report; `selected`: device -> the AS2D configuration its budget file names."""
    # Divergent windows go before `main` is chosen: a native divergence also drops the replay rows.
    frame, diverged = metrics.split_divergent(loaded.frame)
    replayed = frame[(frame["ratio_fit"] == "median") & (frame["source"] == "replay")]
    native = frame[frame["source"] == "native"]
    main = replayed if len(replayed) else native
    if main.empty:
        raise SpecbenchError("no result rows to report")
    suffix = "" if len(replayed) else " (native runs)"
    tables = [pooled_table(main, suffix)]
    if len(replayed) and len(native):
        tables.append(pooled_table(native, " (native runs)"))
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
    if len(diverged):
        windows = len(diverged[["device", "window_id"]].drop_duplicates())
        tables.insert(0, Table(f"{DIVERGENT} ({windows} window{'' if windows == 1 else 's'})",
                               metrics.ORDER["divergent"], diverged))
    if loaded.notes:
        tables.insert(0, Table("Overrides", "recorded as given on the command line",
                               pd.DataFrame({"note": loaded.notes})))
    declared = declared_costs(loaded)
    if len(declared):
        tables.insert(0, Table(DECLARED, "drafter costs from the profile's `declared` block (docs/METHODS.md "
                               "§4.7 Declared drafter costs), priced like measured ones in every table", declared))
    if frame["ratio_fit"].isin(["min", "max"]).any():
        tables.append(Table("Sensitivity to extrapolated co-scheduling ratios (tokens/s)",
                            "pooled throughput replayed with the median, minimum and maximum measured ratio "
                            "filling unmeasured widths; flagged = windows whose median replay used an unmeasured "
                            "ratio", metrics.sensitivity(frame),
                            {c: ".2f" for c in ("median", "min", "max", "low", "high", "range_pct")}))
    if (frame["ratio_fit"] == DEPTH_LINEAR).any():
        depth = metrics.sensitivity(frame, ("median", DEPTH_LINEAR), "depth_extrapolated")
        tables.append(Table("Sensitivity to KV depths beyond the measured ones: flat vs linear (tokens/s)",
                            "pooled throughput replayed with costs outside the profile's measured depths held flat "
                            "(as every other table) and extended linearly from the nearest two measured depths "
                            "(never below 0 s); flagged = windows whose flat replay priced a forward outside them",
                            depth.rename(columns={"median": "flat", DEPTH_LINEAR: "linear"}),
                            {c: ".2f" for c in ("flat", "linear", "low", "high", "range_pct")}))
    if len(native) and len(replayed):
        tables.append(Table("Replay fidelity (replay vs native throughput)", "per window |replay - native| / "
                            "native, then mean and max per device x configuration; flagged above 10%",
                            metrics.replay_fidelity(frame), {"mean_abs_error_pct": ".2f", "max_abs_error_pct": ".2f"}))
    if text_metrics.has_text(frame):
        # WER/CER from the same rows as the other tables, or the native rows when only those have text
        scored, scored_suffix = (main, suffix) if text_metrics.has_text(main) else (native, " (native runs)")
        tables += text_tables(frame[frame["ratio_fit"] == "median"], scored, loaded.references, scored_suffix)
    tables += stability_tables(loaded, native)
    return tables


def stability_tables(loaded: Loaded, native: pd.DataFrame) -> list[Table]:
    """The spread of native rows decoded several times (`run --native --runs N`), and the
    unstable timings of the profiles the runs used (docs/METHODS.md §4.6 Stability warnings, §6.1 Repeated runs);
    none when neither applies."""
    tables = []
    spread = samples.spread_table(native)
    if len(spread):
        tables.append(_per_configuration(
            "Native decode spread over repeated runs", samples.ORDER, spread,
            {"windows": None, "runs": None, "median_spread_pct": ".2f", "max_spread_pct": ".2f",
             "unstable_windows": None}))
    unstable = profile_warnings(loaded.manifests)
    if len(unstable):
        unstable = unstable.assign(median_s=unstable["median_s"] * 1e3).rename(columns={"median_s": "median_ms"})
        tables.append(Table(f"Unstable profile timings (spread > {samples.UNSTABLE_SPREAD_PCT:g}% of the median)",
                            samples.ORDER_PROFILE, unstable, {"median_ms": ".4f", "spread_pct": ".1f"},
                            ("device", "profile")))
    return tables


IDENTITY = ("device", "method", "drafter", "W/B")
"""What names a configuration's row besides its label, which a narrow terminal cuts short."""


DECLARED = "Declared drafter costs (not measured on the device)"


def declared_costs(loaded: Loaded) -> pd.DataFrame:
    """device, drafter, declared: each declared drafter cost the rows were priced with (a
    profile's declared drafter that no row used is left out)."""
    records = []
    rows = loaded.frame[(loaded.frame["source"] == "replay") & (loaded.frame["method"] != "target")]
    for manifest in loaded.manifests:
        for profile in manifest.profiles:
            on_device = rows[rows["device"] == profile.device]
            named = set(on_device["drafter"].dropna())
            unnamed = on_device["drafter"].isna().any()  # the only drafter traced
            for drafter, note in profile.declared_costs.items():
                if drafter in named or (unnamed and len(manifest.traces) == 1 and drafter in manifest.traces):
                    records.append({"device": profile.device, "drafter": drafter, "declared": note})
    return pd.DataFrame(records, columns=["device", "drafter", "declared"]).drop_duplicates()


def declared_lines(loaded: Loaded) -> list[str]:
    """The declared costs as one sentence each, for figures and bundles."""
    return [f"{r.device}: drafter '{r.drafter}' costs are declared, not measured ({r.declared})"
            for r in declared_costs(loaded).itertuples()]


def _per_configuration(title: str, order: str, table: pd.DataFrame, measures: Mapping[str, str | None],
                       optional: tuple[tuple[str, ...], ...] = ()) -> Table:
    """A table of device, config, `measures` (column -> format spec, None: as is), then method,
    drafter and W/B from the configuration fields; `optional`: measures a narrow terminal leaves out."""
    if table.empty:  # e.g. window counts of a run with target-only rows alone: nothing to compare
        table = table.reindex(columns=["device", "config", *measures, "method", "drafter", "width", "budget"])
    frame = table[["device", "config", *measures]].copy()
    frame["method"] = table["method"]
    frame["drafter"] = table["drafter"]
    frame["W/B"] = [_width_or_budget(*values) for values in zip(table["method"], table["width"], table["budget"])]
    return Table(title, order, frame, {c: spec for c, spec in measures.items() if spec}, IDENTITY, optional)


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
        tables.append(Table(f"{SILENT} ({count} dataset x configuration{'' if count == 1 else 's'})" + suffix,
                            metrics.ORDER["silent"], silent[["dataset", "device", "config", "windows", "proposed",
                                                             "accepted", "problem"]]))
    return tables


def _width_or_budget(method: str, width: int | None, budget: int | None) -> str | None:
    """SD's width (MEAN_WIDTHS on its mean over W), AS2D's budget, None for the others."""
    if method == "sd":
        return MEAN_WIDTHS if width is None else str(width)
    return str(budget) if method == "as2d" else None


def pooled_table(rows: pd.DataFrame, suffix: str) -> Table:
    pooled = metrics.pooled(rows)
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
        windows = int(summary.at[0, "differing"])
        tables.append(Table(f"{TEXT_DIFFERS} ({windows} window{'' if windows == 1 else 's'})",
                            text_metrics.ORDER["text_differs"], differing))
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
        found = _configs(main[(main["device"] == device) & (main["method"] == "as2d")])
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


def write_csv_dir(directory: Path, tables: list[Table]) -> None:
    """One CSV per table and their index (render.tables.csv_files) into `directory`, each file
    written whole; CSVs that an earlier index there named and this one does not are removed,
    so the directory holds one report's tables."""
    directory.mkdir(exist_ok=True)
    files = csv_files(tables)
    old = set(pd.read_csv(directory / INDEX)["file"]) if (directory / INDEX).is_file() else set()
    for name, text in sorted(files.items(), key=lambda item: item[0] == INDEX):  # the index last
        write_atomic(directory / name, text)
    for name in old - set(files):
        if Path(name).name == name and name.endswith(".csv"):
            (directory / name).unlink(missing_ok=True)


def write_output(fmt: str, path: Path, tables: list[Table]) -> None:
    """`tables` in format `fmt` to `path`: a directory of CSVs for csv, else one file, written whole."""
    if fmt == "csv":
        write_csv_dir(path, tables)
    else:
        write_atomic(path, render(tables, fmt))


def bundle(directory: Path, loaded: Loaded, tables: list[Table], figures: dict[str, list[Path]],
           argv: Sequence[str] | None = None) -> Path:
    """A self-contained report: report.md (tables, figures, input manifest, commands to
    reproduce), the tables as tables.json, tables.jsonl and one CSV per table in csv/."""
    directory.mkdir(parents=True, exist_ok=True)
    markdown = to_markdown(tables)
    lines = ["# specbench report", ""]
    lines += [f"> {note}" for note in loaded.notes] + ([""] if loaded.notes else [])
    declared = declared_lines(loaded)
    lines += [f"> {note}" for note in declared] + ([""] if declared else [])
    lines += [markdown, "## Figures", ""]
    for name, paths in figures.items():
        png = next(p for p in paths if p.suffix == ".png")
        lines.append(f"![{name}]({png.relative_to(directory)})")
    lines += ["", "## Inputs", "", "| results | rows sha256 | mode | windows digest | methods | runner build and models |",
              "|---|---|---|---|---|---|"]
    for path, manifest in zip(loaded.directories, loaded.manifests):
        rows_sha = file_sha256(path / ROWS)
        lines.append(f"| {path} | {rows_sha[:16]} | {manifest.mode} | {manifest.windows.digest[:16]} | "
                     f"{len(manifest.methods)} | {manifest.builds_and_models() or 'not recorded'} |")
    lines += ["", "## Reproduce", "", "```sh"]
    lines += [m.command for m in loaded.manifests if m.command]
    lines += [shlex.join(argv if argv is not None else ["specbench", *sys.argv[1:]]), "```", ""]
    report_path = directory / "report.md"
    write_atomic(report_path, "\n".join(lines))
    for fmt, name in (("json", "tables.json"), ("jsonl", "tables.jsonl"), ("csv", "csv")):
        write_output(fmt, directory / name, tables)
    return report_path


def make_figures(loaded: Loaded, directory: Path, horizon: bool = False) -> dict[str, list[Path]]:
    """PNG + SVG figures of a report into `directory`; returns name -> paths."""
    from specbench.render import plots
    from specbench.schemas.profiles import load_profile

    declared = declared_lines(loaded)

    def save(fig, stem: Path) -> list[Path]:
        if declared:  # a figure priced with declared costs says so on itself
            fig.text(0.01, 0.005, "\n".join(declared), fontsize=6, ha="left", va="bottom", gid="declared-costs")
        return plots.save(fig, stem)

    frame = metrics.split_divergent(loaded.frame)[0]
    main = frame[(frame["ratio_fit"] == "median")]
    main = main[main["source"] == ("replay" if (main["source"] == "replay").any() else "native")]
    figures: dict[str, list[Path]] = {}
    per_window = metrics.per_window(main)
    for device in main["device"].unique():
        configs = _cdf_configs(per_window[per_window["device"] == device])
        fig, _ = plots.throughput_cdf(per_window, device, configs)
        figures[f"cdf-{device}"] = save(fig, directory / f"cdf-{device}")
        fig, _ = plots.decomposition_bars(metrics.decomposition(main), device)
        figures[f"dvoh-{device}"] = save(fig, directory / f"dvoh-{device}")
        positions = metrics.per_position(main[main["device"] == device])
        if len(positions):
            fig, _ = plots.position_acceptance(positions, device)
            figures[f"positions-{device}"] = save(fig, directory / f"positions-{device}")
    profiles = _profiles(loaded)
    if profiles:
        fig, _ = plots.width_cost([load_profile(p) for p in profiles])
        figures["width-cost"] = save(fig, directory / "width-cost")
    if horizon:
        summary, depths, _ = horizon_tables(loaded)
        fig, _ = plots.horizon(summary, depths)
        figures["horizon"] = save(fig, directory / "horizon")
    return figures


def _cdf_configs(per_window: pd.DataFrame) -> list[str]:
    """One curve per method: target, the SD mean over W, specasr, and the best pooled AS2D."""
    method = per_window["method"]
    curves = (method == "target") | (method == "specasr") | ((method == "sd") & per_window["width"].isna())
    configs = list(per_window.loc[curves, "config"].unique())
    as2d = per_window[per_window["method"] == "as2d"]
    if len(as2d):
        configs.append(as2d.groupby("config")["tokens_per_s"].median().idxmax())
    return configs


def _profiles(loaded: Loaded) -> list[Path]:
    paths = {}
    for manifest in loaded.manifests:
        for profile in manifest.profiles:
            if Path(profile.path).exists():
                paths[profile.device] = Path(profile.path)
    return list(paths.values())


def horizon_tables(loaded: Loaded) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """The horizon sweep of every traced drafter on the first device, from the first replay run's inputs:
    (summary, per-depth acceptance, notes naming the horizons left out). Windows that diverged
    natively on that device leave the sweep (docs/METHODS.md §7.6 Divergent windows), and so does
    every K the profile's target widths or a drafter's traced rows cannot price."""
    from specbench.app.study import load_inputs
    from specbench.core.replay.horizon import HORIZONS, horizon_sweep

    manifest = next((m for m in loaded.manifests if m.mode == "replay"), None)
    if manifest is None:
        raise SpecbenchError("--horizon needs a replay run (it replays SD at K = 3..12 from the run's traces)")
    traces_dir = Path(next(iter(manifest.traces.values())).path).parent
    inputs = load_inputs(Path(manifest.windows.path), traces_dir, [Path(manifest.profiles[0].path)], None)
    profile = inputs.profiles[0]
    diverged = metrics.split_divergent(loaded.frame)[1]
    dropped = set(diverged.loc[diverged["device"] == profile.name, "window_id"])
    windows = [w for w in inputs.windows if w.window_id not in dropped]
    notes = [f"{len(dropped)} window(s) that diverged natively on {profile.name} left out"] if dropped else []
    widths = set(profile.target_costs.widths())
    parts = []
    for name in sorted(inputs.traces):
        drafts = next(iter(inputs.traces[name].windows.values())).drafts
        k_max = None if drafts is None or drafts.lookup is not None else drafts.k_max
        horizons = [k for k in HORIZONS if k + 1 in widths and (k_max is None or k <= k_max)]
        if len(horizons) < len(HORIZONS):
            notes.append(f"{name}: K = {', '.join(str(k) for k in HORIZONS if k not in horizons)} left out "
                         f"(the profile measures target widths {min(widths)}..{max(widths)}"
                         + (f"; the trace holds {k_max} drafts per row" if k_max is not None else "") + ")")
        if horizons:
            parts.append(horizon_sweep(windows, inputs.traces, profile, name, horizons))
    if not parts:
        raise SpecbenchError(f"--horizon: no K in {HORIZONS[0]}..{HORIZONS[-1]} can be priced: " + "; ".join(notes),
                             hint="profile wider target widths (--max-width) or trace with a larger --k-max")
    return (pd.concat([p[0] for p in parts], ignore_index=True), pd.concat([p[1] for p in parts], ignore_index=True),
            notes)


def horizon_report(loaded: Loaded) -> list[Table]:
    """`report --horizon`'s tables: SD's tau and speedup per drafter x K, and acceptance per depth."""
    summary, depths, notes = horizon_tables(loaded)
    left_out = ("; " + "; ".join(notes)) if notes else ""
    return [Table("Horizon sweep (SD drafting K tokens)", "per drafter x K: tau = sum(tokens) / "
                  "sum(target forwards); speedup = pooled throughput / target-only's" + left_out, summary,
                  {"tau": ".3f", "tokens_per_s": ".2f", "speedup": ".3f"}),
            Table("Per-depth acceptance P(accept at d | reached d)", "counts over all rounds of all windows", depths,
                  {"acceptance": ".3f"})]


def selected_budgets(paths: Sequence[Path]) -> dict[str, As2dConfig]:
    """Device -> the AS2D configuration its budget file names (`report --budget`, one file per device)."""
    selected: dict[str, As2dConfig] = {}
    for path in paths:
        device, config = load_budget(path)
        if device in selected:
            raise SpecbenchError(f"--budget {path}: a second budget file for device '{device}'")
        selected[device] = config
    return selected
