"""`specbench report`: compare methods from results directories."""

from __future__ import annotations

from pathlib import Path

import click

from ..render import FORMATS, print_rich, render
from ..report import build_tables, load_many
from .common import check_output_path, existing_dir, stderr


@click.command()
@click.argument("results", type=existing_dir, nargs=-1, required=True)
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True,
              help="table: rich tables on the terminal; md, csv or json for files.")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write to this file instead of stdout.")
@click.option("--allow-mixed", is_flag=True, help="Compare results over different windows files (recorded in output).")
def report(results: tuple[Path, ...], fmt: str, output: Path | None, allow_mixed: bool) -> None:
    """Compare methods: pooled throughput and speedup, slower windows, acceptance, D/V/O/H, oracle gap.

    Example:

        specbench report results/pixel8 results/redmi --format md --output report.md
    """
    check_output_path(output)
    _, frame = load_many(results, allow_mixed)
    tables = build_tables(frame)
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
