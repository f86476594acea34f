"""`specbench report`: compare methods from results directories."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from specbench.cli.common import existing_dir, existing_file
from specbench.render.formats import OUTPUT_FORMATS

if TYPE_CHECKING:
    from specbench.app.report.request import ReportView


@click.command()
@click.argument("results", type=existing_dir, nargs=-1, required=True)
@click.option("--format", "fmt", type=click.Choice(OUTPUT_FORMATS), default="table", show_default=True,
              help="table: rich tables on the terminal; md, json or jsonl (one record per table row) to stdout "
                   "or --output FILE; csv: one file per table, into --output DIR.")
@click.option("--output", type=click.Path(path_type=Path), default=None,
              help="Write to this file (--format csv: this directory) instead of stdout.")
@click.option("--export-md", type=click.Path(path_type=Path), default=None, metavar="FILE",
              help="Also write Markdown to this file.")
@click.option("--export-json", type=click.Path(path_type=Path), default=None, metavar="FILE",
              help="Also write JSON to this file.")
@click.option("--export-jsonl", type=click.Path(path_type=Path), default=None, metavar="FILE",
              help="Also write JSON lines (one record per table row) to this file.")
@click.option("--export-csv", type=click.Path(path_type=Path), default=None, metavar="DIR",
              help="Also write one CSV per table, and index.csv, into this directory.")
@click.option("--allow-mixed", is_flag=True,
              help="Compare runs whose windows, models, runner or profile differ (recorded in the output).")
@click.option("--macro", is_flag=True, help="Add the macro-average over datasets.")
@click.option("--sensitivity", is_flag=True,
              help="Replay AS2D with the min and max measured co-scheduling ratios, and every method with costs "
                   "beyond the measured KV depths extended linearly (when the run has no such rows).")
@click.option("--budget", "budgets", type=existing_file, multiple=True,
              help="Budget YAML (select-budget) per device: oracle gap of the configuration it names (drafter, "
                   "B and the rest) and the ablation.")
@click.option("--horizon", is_flag=True, help="Add the horizon sweep (SD at K = 3..12) from the run's traces.")
@click.option("--plots", "plots_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write the figures (PNG and SVG) here.")
@click.option("--bundle", "bundle_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write a self-contained Markdown report with figures, inputs and commands here, and the "
                   "tables as tables.json, tables.jsonl and csv/ (one CSV per table).")
@click.option("--windows", "windows_path", type=existing_file, default=None,
              help="Windows file with the reference texts for WER/CER (default: the one each run's manifest names).")
@click.option("--detail", is_flag=True,
              help="--format table: print every table after the summary (default: the summary, one line per "
                   "kind of warning, and where the tables are).")
def report(results: tuple[Path, ...], fmt: str, output: Path | None, export_md: Path | None,
           export_json: Path | None, export_jsonl: Path | None, export_csv: Path | None, allow_mixed: bool,
           macro: bool, sensitivity: bool, budgets: tuple[Path, ...], horizon: bool, plots_dir: Path | None,
           bundle_dir: Path | None, windows_path: Path | None, detail: bool) -> None:
    """Compare methods: pooled throughput and speedup, slower windows, acceptance, D/V/O/H, oracle gap.

    On a terminal (--format table), one screen: per device@placement each method's best
    configuration, its speedup against its own and the best target-only, the interval, replay's
    fidelity where native rows exist, and a verdict priced with the profile's own costs (why it
    pays, or does not); then one line per kind of warning with its count. --detail prints every
    table after it, each row on one line of the terminal (long cells become footnotes under the
    table). Every other format has every table, the summary first.

    When the windows carry categories (`windows --layout prompts`): the pooled speedup and its
    interval per category and overall, and the summary names where each method pays and loses.

    When rows carry answer texts: WER/CER against the windows' references and a check
    that every method answered the same text (differences are listed and warned about).

    Runs over different windows, target models, runner builds or device profiles are
    refused, naming the field and both values (--allow-mixed overrides, and says so in
    the output). Every table states its aggregation order.

    Every output comes from one computation of the tables: --format/--output and any
    --export-* at once.

    Example:

        specbench report results/pixel8 results/redmi --format md --output report.md --plots figures/

        specbench report results/pixel8 --export-jsonl report.jsonl --export-csv tables/
    """
    from specbench.app.report.request import ReportRequest
    from specbench.app.report.request import report as report_request

    view = report_request(ReportRequest(
        results=results, fmt=fmt, output=output, export_md=export_md, export_json=export_json,
        export_jsonl=export_jsonl, export_csv=export_csv, allow_mixed=allow_mixed, macro=macro,
        sensitivity=sensitivity, budgets=budgets, horizon=horizon, plots_dir=plots_dir, bundle_dir=bundle_dir,
        windows=windows_path, detail=detail))
    if view is not None:
        show(view)


def show(view: ReportView) -> None:
    """A report on stdout: a terminal (--format table) gets the one-screen summary first when the
    view has one, and the tables themselves only with --detail; other formats the rendered tables."""
    from specbench.render.summary import print_lines, print_summary
    from specbench.render.tables import print_rich, render, screen_lines

    if view.fmt != "table":
        click.echo(render(view.tables, view.fmt), nl=False)
        return
    from rich.console import Console

    console = Console()
    tables = view.tables
    if view.summary is not None and view.screen_tables is not None:
        print_summary(view.summary, console)
        tables = view.screen_tables
        if not view.detail:
            print_lines(screen_lines(tables, "--detail"), console)
            return
    print_rich(tables, console)
