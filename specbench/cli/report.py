"""`specbench report`: compare methods from results directories."""

from __future__ import annotations

from pathlib import Path

import click

from specbench.cli.common import check_output_dir, check_output_path, existing_dir, existing_file
from specbench.errors import SpecbenchError
from specbench.render.formats import OUTPUT_FORMATS


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

    if fmt == "csv" and output is None:
        raise SpecbenchError("--format csv writes one file per table: pass --output DIR",
                             hint="or --format jsonl for one stream on stdout")
    outputs = _outputs([("md" if fmt == "table" else fmt, "--output", output), ("md", "--export-md", export_md),
                        ("json", "--export-json", export_json), ("jsonl", "--export-jsonl", export_jsonl),
                        ("csv", "--export-csv", export_csv)])
    from specbench.schemas.validation import is_validation_dir

    validations = [r for r in results if is_validation_dir(r)]
    if validations:
        _report_validations(results, validations, fmt, output, outputs, plots_dir or bundle_dir)
        return
    loaded = load_many(results, allow_mixed, windows_path)
    if sensitivity:
        add_sensitivity(loaded)
    built = build_report(loaded, macro, selected_budgets(budgets) or None)
    horizons = horizon_report(loaded) if horizon else []
    tables = built.all_tables() + horizons
    if loaded.notes:
        stderr.print("\n".join(loaded.notes))
    for note in loaded.text_notes:
        click.echo(note, err=True)
    compact = fmt == "table" and output is None and not detail
    for warning in dict.fromkeys(t.warning for t in tables if t.warning) if not compact else ():
        click.echo(f"warning: {warning}; see that table", err=True)  # the one screen lists them itself
    if bundle_dir is not None:
        figures = make_figures(loaded, bundle_dir / "figures", horizon)
        path = bundle(bundle_dir, loaded, tables, figures)
        stderr.print(f"report bundle written to {path}")
    elif plots_dir is not None:
        figures = make_figures(loaded, plots_dir, horizon)
        stderr.print(f"{len(figures)} figures (PNG + SVG) written to {plots_dir}")
    _emit(tables, fmt, output, outputs, (built.summary, built.tables + horizons), detail)


def _report_validations(results: tuple[Path, ...], validations: list[Path], fmt: str, output: Path | None,
                        outputs: list[tuple[str, Path]], figures_dir: Path | None) -> None:
    """A validation directory's tables (specbench validate), through the same outputs as a results report."""
    from specbench.app.progress import stderr
    from specbench.app.validation_report import validation_figures, validation_tables

    if len(validations) != len(results):
        other = next(r for r in results if r not in validations)
        raise SpecbenchError(f"{other}: a results directory, reported beside the validation {validations[0]}",
                             hint="report validations and results directories separately")
    tables = [t for v in validations for t in validation_tables(v)]
    if figures_dir is not None:
        paths = [p for v in validations for p in validation_figures(v, figures_dir)]
        stderr.print(f"{len(paths)} figure files written to {figures_dir}")
    _emit(tables, fmt, output, outputs)


def _emit(tables: list, fmt: str, output: Path | None, outputs: list[tuple[str, Path]], screen=None,
          detail: bool = True) -> None:
    """Every --output/--export-* file, then stdout unless --output took it; a terminal prints
    `screen`, when given: (the one-screen summary, the tables after it), in place of `tables`,
    the tables themselves only with `detail` (else a line per warning and where they are)."""
    from specbench.app.progress import stderr
    from specbench.app.report import write_output
    from specbench.render.summary import print_summary
    from specbench.render.tables import print_rich, render, screen_lines

    for out_fmt, path in outputs:
        write_output(out_fmt, path, tables)
        stderr.print(f"report ({out_fmt}) written to {path}")
    if output is not None:
        return
    if fmt == "table":
        from rich.console import Console

        console = Console()
        if screen is not None:
            print_summary(screen[0], console)
            tables = screen[1]
            if not detail:
                for line in screen_lines(tables, "--detail"):
                    console.print(line, highlight=False, markup=False)
                return
        print_rich(tables, console)
        return
    click.echo(render(tables, fmt), nl=False)


def _outputs(asked: list[tuple[str, str, Path | None]]) -> list[tuple[str, Path]]:
    """(format, path) of each output given as (format, option, path or None); a bad path, or
    one named twice, is refused here, before any work."""
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
