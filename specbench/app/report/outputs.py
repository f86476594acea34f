"""Where a report goes: files in each format, a CSV directory, a self-contained bundle, figures."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from specbench.app.report.inputs import LoadedResults, commands, declared_lines, input_rows, profile_paths
from specbench.app.report.rows import main_rows
from specbench.app.report.sustained import sustained_figures
from specbench.core import metrics
from specbench.render.tables import INDEX, Table, csv_files, render, to_markdown
from specbench.schemas.fileio import write_atomic


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


def bundle(directory: Path, loaded: LoadedResults, tables: list[Table], figures: dict[str, list[Path]],
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
    lines += ["", "## Inputs", "",
              "| results | rows sha256 | mode | windows digest | methods | runner build and models |",
              "|---|---|---|---|---|---|"]
    for path, rows_sha, mode, digest, methods, build in input_rows(loaded):
        lines.append(f"| {path} | {rows_sha[:16]} | {mode} | {digest[:16]} | {methods} | {build} |")
    lines += ["", "## Reproduce", "", "```sh"]
    lines += commands(loaded)
    lines += [shlex.join(argv if argv is not None else ["specbench", *sys.argv[1:]]), "```", ""]
    report_path = directory / "report.md"
    write_atomic(report_path, "\n".join(lines))
    for fmt, name in (("json", "tables.json"), ("jsonl", "tables.jsonl"), ("csv", "csv")):
        write_output(fmt, directory / name, tables)
    return report_path


def make_figures(loaded: LoadedResults, directory: Path, horizon: bool = False) -> dict[str, list[Path]]:
    """PNG + SVG figures of a report into `directory`; returns name -> paths."""
    from specbench.render import plots
    from specbench.schemas.profiles import load_profile

    declared = declared_lines(loaded)

    def save(fig, stem: Path) -> list[Path]:
        if declared:  # a figure priced with declared costs says so on itself
            fig.text(0.01, 0.005, "\n".join(declared), fontsize=6, ha="left", va="bottom", gid="declared-costs")
        return plots.save(fig, stem)

    main = main_rows(loaded.frame).main
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
    from specbench.app.report.energy import energy_rows

    energy = energy_rows(main_rows(loaded.frame).native)
    for device in energy["device"].unique():
        fig, _ = plots.energy_bars(energy, device)
        figures[f"energy-{device}"] = save(fig, directory / f"energy-{device}")
    profiles = list(profile_paths(loaded).values())
    if profiles:
        fig, _ = plots.width_cost([load_profile(p) for p in profiles])
        figures["width-cost"] = save(fig, directory / "width-cost")
    figures.update(sustained_figures(loaded.directories, directory, save))
    if horizon:
        from specbench.app.report.replays import horizon_tables

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
