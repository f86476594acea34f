"""`specbench report`: compare methods from results directories."""

from __future__ import annotations

from pathlib import Path

import click

from specbench.cli.common import check_output_path, existing_dir, existing_file
from specbench.render.formats import FORMATS


@click.command()
@click.argument("results", type=existing_dir, nargs=-1, required=True)
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True,
              help="table: rich tables on the terminal; md, csv or json for files.")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write to this file instead of stdout.")
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
              help="Write a self-contained Markdown report with figures, inputs and commands here.")
@click.option("--windows", "windows_path", type=existing_file, default=None,
              help="Windows file with the reference texts for WER/CER (default: the one each run's manifest names).")
def report(results: tuple[Path, ...], fmt: str, output: Path | None, allow_mixed: bool, macro: bool,
           sensitivity: bool, budgets: tuple[Path, ...], horizon: bool, plots_dir: Path | None,
           bundle_dir: Path | None, windows_path: Path | None) -> None:
    """Compare methods: pooled throughput and speedup, slower windows, acceptance, D/V/O/H, oracle gap.

    When rows carry answer texts: WER/CER against the windows' references and a check
    that every method answered the same text (differences are listed and warned about).

    Runs over different windows, target models, runner builds or device profiles are
    refused, naming the field and both values (--allow-mixed overrides, and says so in
    the output). Every table states its aggregation order.

    Example:

        specbench report results/pixel8 results/redmi --format md --output report.md --plots figures/
    """
    from specbench.app.progress import stderr
    from specbench.app.report import (
        DIVERGENT,
        SILENT,
        TEXT_DIFFERS,
        add_sensitivity,
        build_tables,
        bundle,
        horizon_report,
        load_many,
        make_figures,
        selected_budgets,
    )
    from specbench.render.tables import print_rich, render, to_markdown

    check_output_path(output)
    loaded = load_many(results, allow_mixed, windows_path)
    if sensitivity:
        add_sensitivity(loaded)
    tables = build_tables(loaded, macro, selected_budgets(budgets) or None)
    if horizon:
        tables += horizon_report(loaded)
    if loaded.notes:
        stderr.print("\n".join(loaded.notes))
    for note in loaded.text_notes:
        click.echo(note, err=True)
    differs = [t for t in tables if t.title.startswith(TEXT_DIFFERS)]
    if differs:
        click.echo(f"warning: {differs[0].title.removeprefix('WARNING: ')}; see that table", err=True)
    silent = [t for t in tables if t.title.startswith(SILENT)]
    if silent:
        click.echo(f"warning: {silent[0].title.removeprefix('WARNING: ')}; see that table", err=True)
    diverged = [t for t in tables if t.title.startswith(DIVERGENT)]
    if diverged:
        click.echo(f"warning: {diverged[0].title[0].lower()}{diverged[0].title[1:]}; see that table", err=True)
    if bundle_dir is not None:
        figures = make_figures(loaded, bundle_dir / "figures", horizon)
        path = bundle(bundle_dir, loaded, tables, figures, to_markdown(tables))
        for name, table in (("tables.csv", "csv"), ("tables.json", "json")):
            (bundle_dir / name).write_text(render(tables, table), encoding="utf-8")
        stderr.print(f"report bundle written to {path}")
    elif plots_dir is not None:
        figures = make_figures(loaded, plots_dir, horizon)
        stderr.print(f"{len(figures)} figures (PNG + SVG) written to {plots_dir}")
    if fmt == "table" and output is None:
        from rich.console import Console

        print_rich(tables, Console())
        return
    text = render(tables, "md" if fmt == "table" else fmt)
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
        stderr.print(f"report written to {output}")

