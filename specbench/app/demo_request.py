"""`specbench demo`'s options as one request (DemoRequest), light to import: its field defaults are the
command's option defaults; app/demo.py runs it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from specbench.app.options import RESULTS


@dataclass(frozen=True)
class DemoRequest:
    """`demo`'s options, as given."""

    out: Path = RESULTS / "demo"
    """--out: the demo's directory."""
    quick: bool = False
    """--quick: the smoke run."""
    placements: tuple[str, ...] = ()
    """--placement, each time given (none: every named placement)."""
    speech: bool = False
    """--speech: the speech suite instead of the text one."""
    detail: bool = False
    """--detail: print every table after the summary."""
