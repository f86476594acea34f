"""The report's output formats, importable without pandas or rich: `report --help` lists them."""

from __future__ import annotations

OUTPUT_FORMATS = ("table", "md", "csv", "json", "jsonl")
"""table: rich tables on a terminal; the others are what specbench.render.tables.render writes."""
