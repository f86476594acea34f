"""The one-screen summary a terminal prints before the detail tables: per device@placement a
heading, one line of numbers per method's best configuration and, under it, the verdict's
arithmetic. Every other output takes the same numbers as a table (app.report.Report.summary_table)."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

from rich.console import Console
from rich.markup import escape

INDENT = 4
"""Columns a verdict is indented by under its configuration's line."""


@dataclass(frozen=True)
class SummaryLine:
    """One method's best configuration on one device@placement."""

    name: str
    """The configuration in a few words, e.g. 'sd W=5 smollm2'."""
    cells: tuple[str, ...]
    """Its numbers, formatted, one per `Summary.columns`."""
    verdict: str
    """Why it pays or not (core.verdict), or why there is no verdict."""
    categories: str = ""
    """Where it pays and where it loses, by the windows' categories ("" when they have none)."""


@dataclass(frozen=True)
class SummarySection:
    """One device@placement."""

    heading: str
    """The device@placement and its target-only baseline."""
    lines: tuple[SummaryLine, ...]
    """Each method's best configuration."""


@dataclass(frozen=True)
class Summary:
    title: str
    """Printed first."""
    columns: tuple[str, ...]
    """Names of each line's cells."""
    sections: tuple[SummarySection, ...]
    """One per device@placement."""
    notes: tuple[str, ...] = ()
    """Printed under the sections (what the verdicts assume, what is missing)."""


def summary_lines(summary: Summary, width: int) -> list[str]:
    """The summary as plain lines at most `width` columns wide (a column empty on every line left out)."""
    lines = [line for s in summary.sections for line in s.lines]
    names = max([len(line.name) for line in lines] + [len("method")])
    shown = [i for i in range(len(summary.columns)) if any(line.cells[i] != "-" for line in lines)]
    cells = {i: max([len(summary.columns[i])] + [len(line.cells[i]) for line in lines]) for i in shown}

    def row(name: str, values: tuple[str, ...]) -> str:
        return ("  " + name.ljust(names) + "".join("  " + values[i].rjust(w) for i, w in cells.items())).rstrip()

    def wrapped(text: str, indent: int) -> list[str]:
        return wrap_line(" " * indent + text, width)

    out = wrapped(summary.title, 0)
    for section in summary.sections:
        out += wrapped(section.heading, 0)
        if section.lines:
            out.append(row("method", summary.columns))
        for line in section.lines:
            out.append(row(line.name, line.cells))
            if line.verdict:
                out += wrapped(line.verdict, INDENT)
            if line.categories:
                out += wrapped(line.categories, INDENT)
    for note in summary.notes:
        out += wrapped(note, 0)
    return out


def wrap_line(text: str, width: int) -> list[str]:
    """`text` in lines of at most `width` columns, broken between words, each continuation indented two
    columns past the text's own indent; a word longer than the line (a path) stays whole."""
    indent = len(text) - len(text.lstrip(" "))
    return textwrap.wrap(text.lstrip(" "), width, initial_indent=" " * indent,
                         subsequent_indent=" " * (indent + 2), break_on_hyphens=False,
                         break_long_words=False) or [""]


def print_lines(lines: list[str], console: Console) -> None:
    """Lines of prose on a terminal, each wrapped at its width by `wrap_line` (the terminal's own wrap
    would break a line mid-phrase and start its continuation at column 0)."""
    for line in lines:
        for part in wrap_line(line, console.width):
            console.print(escape(part), highlight=False, soft_wrap=True)


def print_summary(summary: Summary, console: Console) -> None:
    """The summary on a terminal, then a blank line before what follows."""
    for line in summary_lines(summary, console.width):
        console.print(escape(line), highlight=False, soft_wrap=True)
    console.print()
