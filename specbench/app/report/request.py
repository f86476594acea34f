"""`specbench report`: one request: results (or validation) directories loaded and compared, every
--output/--export-* file written, and what stdout shows returned to the command."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from specbench.errors import SpecbenchError

if TYPE_CHECKING:
    from specbench.render.summary import Summary
    from specbench.render.tables import Table


@dataclass(frozen=True)
class ReportRequest:
    """`report`'s arguments and options, as given."""

    results: tuple[Path, ...]
    """RESULTS: results directories, or validation directories (not both)."""
    fmt: str = "table"
    """--format: one of render/formats.py's OUTPUT_FORMATS."""
    output: Path | None = None
    """--output: the file (csv: the directory) instead of stdout."""
    export_md: Path | None = None
    """--export-md FILE."""
    export_json: Path | None = None
    """--export-json FILE."""
    export_jsonl: Path | None = None
    """--export-jsonl FILE."""
    export_csv: Path | None = None
    """--export-csv DIR."""
    allow_mixed: bool = False
    """--allow-mixed: compare unlike runs (and say so)."""
    macro: bool = False
    """--macro: add the macro-average over datasets."""
    sensitivity: bool = False
    """--sensitivity: replay the cost fill-in variants when the runs have none."""
    budgets: tuple[Path, ...] = ()
    """--budget, each time given: a device's budget file."""
    horizon: bool = False
    """--horizon: add the SD horizon sweep."""
    plots_dir: Path | None = None
    """--plots: the figures' directory."""
    bundle_dir: Path | None = None
    """--bundle: the self-contained report's directory."""
    windows: Path | None = None
    """--windows: the reference texts (None: each run's own windows)."""
    detail: bool = False
    """--detail: a terminal prints every table after the summary."""

    def __post_init__(self) -> None:
        if self.fmt == "csv" and self.output is None:
            raise SpecbenchError("--format csv writes one file per table: pass --output DIR",
                                 hint="or --format jsonl for one stream on stdout")


@dataclass(frozen=True)
class ReportView:
    """What stdout shows when no --output took it: `tables` in `fmt`; a terminal (fmt 'table')
    shows `summary` first when given, then `screen_tables` only with `detail` (else a line per
    warning and where the tables are)."""

    tables: list[Table]
    fmt: str
    summary: Summary | None = None
    screen_tables: list[Table] | None = None
    detail: bool = True


def report(request: ReportRequest) -> ReportView | None:
    """Build the report `request` asks for, write every --output/--export-* file (and the
    figures or bundle), and return what stdout shows (None: --output took it). Output paths are
    refused before any work; notes and warnings go to stderr."""
    from specbench.app.progress import stderr
    from specbench.app.report import (
        add_sensitivity,
        build_report,
        bundle,
        horizon_report,
        load_many,
        make_figures,
        selected_budgets,
    )
    from specbench.schemas.validation import is_validation_dir

    r = request
    outputs = _outputs([("md" if r.fmt == "table" else r.fmt, "--output", r.output), ("md", "--export-md", r.export_md),
                        ("json", "--export-json", r.export_json), ("jsonl", "--export-jsonl", r.export_jsonl),
                        ("csv", "--export-csv", r.export_csv)])
    validations = [d for d in r.results if is_validation_dir(d)]
    if validations:
        return _report_validations(r, validations, outputs)
    loaded = load_many(r.results, r.allow_mixed, r.windows)
    if r.sensitivity:
        add_sensitivity(loaded)
    built = build_report(loaded, r.macro, selected_budgets(r.budgets) or None)
    horizons = horizon_report(loaded) if r.horizon else []
    tables = built.all_tables() + horizons
    if loaded.notes:
        stderr.print("\n".join(loaded.notes))
    for note in loaded.text_notes:
        print(note, file=sys.stderr, flush=True)  # before the tables, as a terminal shows it
    compact = r.fmt == "table" and r.output is None and not r.detail
    for warning in dict.fromkeys(t.warning for t in tables if t.warning) if not compact else ():
        print(f"warning: {warning}; see that table", file=sys.stderr, flush=True)  # the one screen lists them
    if r.bundle_dir is not None:
        figures = make_figures(loaded, r.bundle_dir / "figures", r.horizon)
        path = bundle(r.bundle_dir, loaded, tables, figures)
        stderr.print(f"report bundle written to {path}")
    elif r.plots_dir is not None:
        figures = make_figures(loaded, r.plots_dir, r.horizon)
        stderr.print(f"{len(figures)} figures (PNG + SVG) written to {r.plots_dir}")
    return _written(ReportView(tables, r.fmt, built.summary, built.tables + horizons, r.detail), r.output, outputs)


def _report_validations(request: ReportRequest, validations: list[Path],
                        outputs: list[tuple[str, Path]]) -> ReportView | None:
    """A validation directory's tables (specbench validate), through the same outputs as a results report."""
    from specbench.app.progress import stderr
    from specbench.app.validation_report import validation_figures, validation_tables

    if len(validations) != len(request.results):
        other = next(d for d in request.results if d not in validations)
        raise SpecbenchError(f"{other}: a results directory, reported beside the validation {validations[0]}",
                             hint="report validations and results directories separately")
    tables = [t for v in validations for t in validation_tables(v)]
    figures_dir = request.plots_dir or request.bundle_dir
    if figures_dir is not None:
        paths = [p for v in validations for p in validation_figures(v, figures_dir)]
        stderr.print(f"{len(paths)} figure files written to {figures_dir}")
    return _written(ReportView(tables, request.fmt), request.output, outputs)


def _written(view: ReportView, output: Path | None, outputs: list[tuple[str, Path]]) -> ReportView | None:
    """Every --output/--export-* file written; `view` when stdout still shows it (no --output)."""
    from specbench.app.progress import stderr
    from specbench.app.report import write_output

    for out_fmt, path in outputs:
        write_output(out_fmt, path, view.tables)
        stderr.print(f"report ({out_fmt}) written to {path}")
    return view if output is None else None


def _outputs(asked: list[tuple[str, str, Path | None]]) -> list[tuple[str, Path]]:
    """(format, path) of each output given as (format, option, path or None); a bad path, or
    one named twice, is refused here, before any work."""
    from specbench.app.options import check_output_dir, check_output_path

    outputs: list[tuple[str, Path]] = []
    named: dict[Path, str] = {}
    for fmt, option, path in asked:
        if path is None:
            continue
        try:
            (check_output_dir if fmt == "csv" else check_output_path)(path)
        except SpecbenchError as exc:
            raise SpecbenchError(f"{option} {exc}") from None
        if path.resolve() in named:
            raise SpecbenchError(f"{option} {path}: also named by {named[path.resolve()]}")
        named[path.resolve()] = option
        outputs.append((fmt, path))
    return outputs
