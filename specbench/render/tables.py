"""One table record, many outputs: rich on a terminal, Markdown, JSON, JSON lines or one CSV
file per table elsewhere."""

from __future__ import annotations

import io
import json
import math
import re
from dataclasses import dataclass, field

import pandas as pd
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table as RichTable
from tabulate import tabulate

TEXT_FORMATS = ("md", "json", "jsonl")
"""The formats that are one text (CSV is one file per table: `csv_files`)."""
RECORD_FIELDS = ("title", "aggregation")
"""What every JSON-lines record carries besides its row: its table's title and aggregation line."""
INDEX = "index.csv"
"""The CSV directory's list of its tables: file, title, aggregation, rows."""


@dataclass(frozen=True)
class Table:
    title: str
    """What the table shows; every output prints it."""
    order: str
    """The aggregation order, printed under the title."""
    frame: pd.DataFrame
    """The rows, one column per field."""
    formats: dict[str, str] = field(default_factory=dict)
    """column -> format spec for text outputs, e.g. '.2f'."""
    keys: tuple[str, ...] = ()
    """Columns that name a row rather than measure it: on a terminal, those with the same value on
    every row are named once under the table instead (every other output keeps them)."""
    optional: tuple[tuple[str, ...], ...] = ()
    """Groups of measures (an interval's two bounds) that a terminal too narrow for every column
    leaves out, the last group first (named under the table; every other output keeps them)."""
    label: str = ""
    """A column naming each row in one word (a configuration label) that `keys` spell out: a terminal
    leaves it out where the keys tell its values apart (every other output keeps it)."""
    warning: str = ""
    """Non-empty for a table the reader must not miss: the one-line message a command prints on
    stderr ("answer text differs between methods (1 of 8 windows on local@split)"); a terminal prints its
    title in red."""
    alert: str = ""
    """Non-empty for a table worth a look that is no warning: the one line, with its count, that a
    terminal's one-screen view prints in its place ("12 unstable profile timings ...")."""


def _cell(value: object, spec: str | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if spec and isinstance(value, (int, float)) and not isinstance(value, bool):
        return format(value, spec)
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _text_rows(table: Table) -> list[list[str]]:
    return [[_cell(v, table.formats.get(c)) for c, v in zip(table.frame.columns, row, strict=False)]
            for row in table.frame.itertuples(index=False)]


def to_markdown(tables: list[Table]) -> str:
    parts = []
    for table in tables:
        parts.append(f"### {table.title}\n\n_Aggregation: {table.order}_\n")
        parts.append(tabulate(_text_rows(table), headers=list(table.frame.columns), tablefmt="github",
                              disable_numparse=True) + "\n")
    return "\n".join(parts)


def _slug(title: str) -> str:
    """A file name from a title: 'Pooled decode throughput (native runs)' -> 'pooled-decode-throughput-native-runs'."""
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-") or "table"


def csv_files(tables: list[Table]) -> dict[str, str]:
    """One flat CSV per table (a header row, then its rows), named by the slug of its title
    (`-2`, `-3`, ... when two titles give the same slug), and INDEX naming each file's table."""
    files: dict[str, str] = {}
    index = []
    for table in tables:
        slug, n = _slug(table.title), 1
        name = f"{slug}.csv"
        while name in files or name == INDEX:
            n += 1
            name = f"{slug}-{n}.csv"
        out = io.StringIO()
        table.frame.to_csv(out, index=False, float_format="%.6g", lineterminator="\n")
        files[name] = out.getvalue()
        index.append({"file": name, "title": table.title, "aggregation": table.order, "rows": len(table.frame)})
    out = io.StringIO()
    pd.DataFrame(index, columns=["file", "title", "aggregation", "rows"]).to_csv(out, index=False, lineterminator="\n")
    return {INDEX: out.getvalue(), **files}


def _json_value(value: object) -> object:
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "item"):
        return _json_value(value.item())
    return value


def _rows(table: Table) -> list[dict]:
    columns = table.frame.columns
    return [{c: _json_value(v) for c, v in zip(columns, row, strict=False)}
            for row in table.frame.itertuples(index=False)]


def to_json(tables: list[Table]) -> str:
    doc = [{"title": t.title, "aggregation": t.order, "rows": _rows(t)} for t in tables]
    return json.dumps(doc, indent=2) + "\n"


def to_jsonl(tables: list[Table]) -> str:
    """One JSON object per table row: the table's title and aggregation line, then the row's columns."""
    lines = []
    for table in tables:
        clash = [c for c in RECORD_FIELDS if c in table.frame.columns]
        if clash:
            raise ValueError(f"table {table.title!r} has a column named {clash[0]!r}, which JSON lines records use")
        lines += [json.dumps({"title": table.title, "aggregation": table.order, **row}) + "\n" for row in _rows(table)]
    return "".join(lines)


def print_rich(tables: list[Table], console: Console) -> None:
    for table in tables:
        console.print(_rich_table(table, console.width))


def screen_lines(tables: list[Table], where: str) -> list[str]:
    """What a one-screen view prints in place of `tables`: one line per kind of warning or alert,
    with its count, then how many tables there are and `where` they are printed in full."""
    lines = [f"warning: {t.warning}; see {where}" if t.warning else f"{t.alert}; see {where}"
             for t in tables if t.warning or t.alert]
    lines = list(dict.fromkeys(lines))
    if tables:
        lines.append(f"{len(tables)} detail table{'' if len(tables) == 1 else 's'} "
                     f"({', '.join(dict.fromkeys(_short_title(t.title) for t in tables))}): {where}")
    return lines


def _short_title(title: str) -> str:
    """A table's title without a leading 'WARNING: ' and what it adds in parentheses or after a colon,
    its first letter lower-cased: 'Pooled decode throughput (native runs)' -> 'pooled decode throughput'."""
    short = re.split(r" \(|: ", title.removeprefix("WARNING: "), maxsplit=1)[0]
    return short[:1].lower() + short[1:]


def _rich_table(table: Table, width: int) -> RichTable:
    """`table` for a terminal `width` columns wide: key columns equal on every row, and measures
    empty on every row (an interval that had no spread to resample), are named under it;
    numbers are never cut, and what does not fit wraps (a long label folds, never ends in "...")."""
    constant = [c for c in table.keys if c in table.frame and len(table.frame) > 1
                and table.frame[c].map(repr).nunique() == 1]
    empty = [c for c in table.frame.columns if c not in table.keys and len(table.frame) and table.frame[c].isna().all()]
    carried = [table.label] if _keys_name_the_label(table) else []
    shown = Table(table.title, table.order, table.frame.drop(columns=constant + empty + carried), table.formats)
    caption = f"aggregation: {table.order}"
    if constant:
        values = _text_rows(Table("", "", table.frame[constant], table.formats))[0]
        caption += "\non every row: " + ", ".join(f"{c} {v}" for c, v in zip(constant, values, strict=False))
    if empty:
        caption += "\nempty on every row: " + ", ".join(empty)
    if carried:
        caption += f"\n{table.label} left out: {', '.join(k for k in table.keys if k in shown.frame)} name each row"
    groups = [[c for c in group if c in shown.frame.columns] for group in table.optional]
    dropped: list[str] = []
    while groups and _least_width(shown) > width:
        group = groups.pop()
        dropped[:0] = group
        shown = Table(shown.title, shown.order, shown.frame.drop(columns=group), shown.formats)
    if dropped:
        caption += f"\nleft out at this width (--format md or jsonl has them): {', '.join(dropped)}"
    shown, notes = _footnoted(shown, width)
    if notes:
        caption += "".join(f"\n[{i}] {value}" for i, value in enumerate(notes, start=1))
    rows = _text_rows(shown)
    columns = [str(c) for c in shown.frame.columns]
    widest = [max([len(row[i]) for row in rows], default=1) for i in range(len(columns))]
    # too wide: a number's name longer than the number wraps at its words (tokens per s)
    narrow = sum(max(w, len(c)) for w, c in zip(widest, columns, strict=False)) + len(columns) - 1 > width
    # labels such as specasr[k_max=8,...] are not markup; a WARNING table stands out
    rich_table = RichTable(title=escape(table.title), caption=escape(caption), caption_justify="left",
                           title_style="bold red" if table.warning else None,
                           box=box.SIMPLE_HEAD, show_edge=False, padding=0)
    for column, name, most in zip(shown.frame.columns, columns, widest, strict=False):
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


def _keys_name_the_label(table: Table) -> bool:
    """Whether the key columns a label spells out (those with one value per label, e.g. method,
    drafter and W/B, not the device) tell `table.label`'s values apart, one to one."""
    if not table.label or table.label not in table.frame:
        return False
    frame = table.frame.map(repr)
    spelled = [k for k in table.keys if k in frame and k != table.label
               and (frame.groupby(table.label)[k].nunique() == 1).all()]
    return bool(spelled) and not frame[[table.label, *spelled]].drop_duplicates().duplicated(spelled).any()


LABEL_WIDTH = 12
"""The narrowest a text column folds to (a configuration label over a few lines)."""
FOOTNOTE_MIN = 6
"""A text column whose cells are all this short or shorter is never footnoted (a marker is up to 5 wide)."""


def _footnoted(table: Table, width: int) -> tuple[Table, list[str]]:
    """`table` with the longest text cells replaced by footnote markers ([1], [2], ...: one per
    distinct value, the values returned in order) until its rows fit `width` columns on one line
    each (numbers whole, number names wrapped at their words); as it was when they already fit,
    or when only numbers are left too wide."""
    frame = _short_paths(table.frame) if _natural_width(table) > width else table.frame
    notes: dict[str, int] = {}
    while True:
        shown = Table(table.title, table.order, frame, table.formats)
        excess = _natural_width(shown) - width
        rows = _text_rows(shown)
        text = [(max([len(row[i]) for row in rows], default=0), column) for i, column in enumerate(frame.columns)
                if not pd.api.types.is_numeric_dtype(frame[column])]
        text = [(most, column) for most, column in text if most > FOOTNOTE_MIN]
        if excess <= 0 or not text:
            return shown, list(notes)
        most, column = max(text, key=lambda pair: pair[0])
        cutoff = max(FOOTNOTE_MIN, most - excess)
        cells = [_cell(v, table.formats.get(column)) for v in frame[column]]

        def marker(cell: str) -> str:
            return f"[{notes.setdefault(cell, len(notes) + 1)}]"

        frame = frame.assign(**{column: [marker(c) if len(c) > cutoff else v
                                         for c, v in zip(cells, frame[column], strict=True)]})


def _short_paths(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with each text column of paths shown by their file names, where the names tell the
    paths apart."""
    changed = {}
    for column in frame.columns:
        values = frame[column]
        if pd.api.types.is_numeric_dtype(values) or not values.map(lambda v: isinstance(v, str) and "/" in v).all():
            continue
        names = {v: v.rstrip("/").rpartition("/")[2] for v in values.unique()}
        if len(set(names.values())) == len(names):
            changed[column] = values.map(names)
    return frame.assign(**changed) if changed else frame


def _natural_width(table: Table) -> int:
    """The terminal columns `table` takes with every cell on one line and number names wrapped at their words."""
    rows = _text_rows(table)
    total = len(table.frame.columns) - 1
    for i, column in enumerate(table.frame.columns):
        most = max([len(row[i]) for row in rows], default=1)
        total += max(most, max(len(w) for w in str(column).replace("_", " ").split() or [""]))
    return total


def _least_width(table: Table) -> int:
    """The fewest terminal columns `table` needs with its number names wrapped at their words
    and its text folded, numbers whole."""
    rows = _text_rows(table)
    total = len(table.frame.columns) - 1
    for i, column in enumerate(table.frame.columns):
        most = max([len(row[i]) for row in rows], default=1)
        word = max(len(w) for w in str(column).replace("_", " ").split() or [""])
        numeric = pd.api.types.is_numeric_dtype(table.frame[column])
        total += max(most, word) if numeric else min(most, max(word, LABEL_WIDTH))
    return total


def render(tables: list[Table], fmt: str) -> str:
    """`tables` as one text in a TEXT_FORMATS format."""
    if fmt == "md":
        return to_markdown(tables)
    if fmt == "json":
        return to_json(tables)
    if fmt == "jsonl":
        return to_jsonl(tables)
    raise ValueError(f"no single text for format {fmt} (csv: csv_files)")
