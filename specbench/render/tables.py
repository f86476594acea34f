"""One table record, many outputs: rich on a terminal, Markdown, CSV or JSON elsewhere."""

from __future__ import annotations

import io
import json
import math
from dataclasses import dataclass, field

import pandas as pd
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table as RichTable
from tabulate import tabulate


@dataclass(frozen=True)
class Table:
    title: str
    order: str
    """The aggregation order, printed under the title."""
    frame: pd.DataFrame
    formats: dict[str, str] = field(default_factory=dict)
    """column -> format spec for text outputs, e.g. '.2f'."""
    keys: tuple[str, ...] = ()
    """Columns that name a row rather than measure it: on a terminal, those with the same value on
    every row are named once under the table instead (every other output keeps them)."""


def _cell(value: object, spec: str | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if spec and isinstance(value, (int, float)) and not isinstance(value, bool):
        return format(value, spec)
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _text_rows(table: Table) -> list[list[str]]:
    return [[_cell(v, table.formats.get(c)) for c, v in zip(table.frame.columns, row)]
            for row in table.frame.itertuples(index=False)]


def to_markdown(tables: list[Table]) -> str:
    parts = []
    for table in tables:
        parts.append(f"### {table.title}\n\n_Aggregation: {table.order}_\n")
        parts.append(tabulate(_text_rows(table), headers=list(table.frame.columns), tablefmt="github",
                              disable_numparse=True) + "\n")
    return "\n".join(parts)


def to_csv(tables: list[Table]) -> str:
    """One CSV block per table, each preceded by a `# title` comment line."""
    out = io.StringIO()
    for i, table in enumerate(tables):
        if i:
            out.write("\n")
        out.write(f"# {table.title}\n")
        table.frame.to_csv(out, index=False, float_format="%.6g", lineterminator="\n")
    return out.getvalue()


def _json_value(value: object) -> object:
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "item"):
        return _json_value(value.item())
    return value


def to_json(tables: list[Table]) -> str:
    doc = [{"title": t.title, "aggregation": t.order,
            "rows": [{c: _json_value(v) for c, v in zip(t.frame.columns, row)} for row in t.frame.itertuples(index=False)]}
           for t in tables]
    return json.dumps(doc, indent=2) + "\n"


def print_rich(tables: list[Table], console: Console) -> None:
    for table in tables:
        console.print(_rich_table(table, console.width))


def _rich_table(table: Table, width: int) -> RichTable:
    """`table` for a terminal `width` columns wide: key columns equal on every row go under it,
    numbers are never cut, and what does not fit wraps (a long label folds, never ends in "...")."""
    constant = [c for c in table.keys if c in table.frame and len(table.frame) > 1
                and table.frame[c].map(repr).nunique() == 1]
    shown = Table(table.title, table.order, table.frame.drop(columns=constant), table.formats)
    caption = f"aggregation: {table.order}"
    if constant:
        values = _text_rows(Table("", "", table.frame[constant], table.formats))[0]
        caption += "\non every row: " + ", ".join(f"{c} {v}" for c, v in zip(constant, values))
    rows = _text_rows(shown)
    columns = [str(c) for c in shown.frame.columns]
    widest = [max([len(row[i]) for row in rows], default=1) for i in range(len(columns))]
    # too wide: a number's name longer than the number wraps at its words (tokens per s)
    narrow = sum(max(w, len(c)) for w, c in zip(widest, columns)) + len(columns) - 1 > width
    # labels such as specasr[k_max=8,...] are not markup; a WARNING table stands out
    rich_table = RichTable(title=escape(table.title), caption=escape(caption), caption_justify="left",
                           title_style="bold red" if table.title.startswith("WARNING") else None,
                           box=box.SIMPLE_HEAD, show_edge=False, padding=0)
    for column, name, most in zip(shown.frame.columns, columns, widest):
        if not pd.api.types.is_numeric_dtype(shown.frame[column]):
            rich_table.add_column(name, overflow="fold")
        elif narrow and len(name) > most:
            header = name.replace("_", " ")
            rich_table.add_column(header, justify="right", width=max([most] + [len(w) for w in header.split()]))
        else:
            rich_table.add_column(name, justify="right", no_wrap=True)
    for row in rows:
        rich_table.add_row(*map(escape, row))
    return rich_table


def render(tables: list[Table], fmt: str) -> str:
    if fmt == "md":
        return to_markdown(tables)
    if fmt == "csv":
        return to_csv(tables)
    if fmt == "json":
        return to_json(tables)
    raise ValueError(f"unknown format {fmt}")
