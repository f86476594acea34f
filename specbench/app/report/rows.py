"""The one rule choosing the rows a report describes (main_rows), and what several of its rooms
read off rows: their configurations, a configuration's W/B column and the columns naming it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from specbench.core import metrics
from specbench.core.methods.configs import MEAN_WIDTHS, MethodConfig, config_of
from specbench.core.pricing import CostFit
from specbench.errors import SpecbenchError
from specbench.schemas.results import Source

IDENTITY = ("device", "method", "drafter", "W/B")
"""What names a configuration's row besides its label, which a narrow terminal cuts short."""
NATIVE_SUFFIX = " (native runs)"


@dataclass(frozen=True)
class MainRows:
    """The rows a report's tables are computed from, split once (docs/METHODS.md §7 Metrics)."""

    frame: pd.DataFrame
    """Every row less the divergent windows' (§7.6 Divergent windows)."""
    diverged: pd.DataFrame
    """The rows of the divergent windows."""
    replayed: pd.DataFrame
    """Replay rows priced with the default fill-in (cost_fit median)."""
    native: pd.DataFrame
    """Rows decoded on the device."""
    main: pd.DataFrame
    """What every table but the fidelity and sensitivity ones reports: `replayed`, or `native` when there is none."""
    suffix: str
    """Added to the titles of the tables of `main`: '' for replay rows, NATIVE_SUFFIX for native ones."""
    mismatched: pd.DataFrame
    """Native rows whose decisions differ from their trace's (their windows are not in `frame`)."""


def main_rows(frame: pd.DataFrame) -> MainRows:
    """The one rule choosing the rows a report describes: replayed rows at the median fill-in,
    else native rows. Divergent windows leave first, so a native divergence also drops the replay rows."""
    kept, diverged = metrics.split_divergent(frame)
    replayed = kept[(kept["cost_fit"] == CostFit.MEDIAN) & (kept["source"] == Source.REPLAY)]
    native = kept[kept["source"] == Source.NATIVE]
    main = replayed if len(replayed) else native
    if main.empty:
        mismatched = frame[metrics.decisions_differ(frame)]
        if len(diverged) or len(mismatched):
            raise SpecbenchError(f"no result rows to report: every window is left out, {len(diverged)} rows "
                                 f"diverged and {len(mismatched)} rows' decisions differ from the trace",
                                 hint="see the runs' divergences.jsonl and decisions.jsonl "
                                      "(docs/METHODS.md §6.4 Drafters and decisions checked against the trace)")
        raise SpecbenchError("no result rows to report")
    return MainRows(kept, diverged, replayed, native, main, "" if len(replayed) else NATIVE_SUFFIX,
                    frame[metrics.decisions_differ(frame)])


def configs_of(rows: pd.DataFrame, labels: Sequence[str] | None = None) -> dict[str, MethodConfig]:
    """label -> configuration of the configurations in `rows` (those of `labels`, in that order)."""
    found = {record["config"]: config_of(record) for record in rows.drop_duplicates("config").to_dict("records")}
    return found if labels is None else {label: found[label] for label in labels if label in found}



def width_or_budget(method: str, width: int | None, budget: int | None) -> str | None:
    """SD's width (MEAN_WIDTHS on its mean over W), AS2D's budget, None for the others."""
    if method == "sd":
        return MEAN_WIDTHS if width is None else str(width)
    return str(budget) if method == "as2d" else None


def per_device(counts: Sequence[tuple[str, int, int]], noun: str = "windows") -> str:
    """(device, n, of) as "2 of 8 windows on local@split, 2 of 8 on local@shared": a count of (device, window)
    pairs summed over devices would read as more windows (or configurations) than the study has."""
    return ", ".join(f"{n} of {total}" + (f" {noun}" if not i else "") + f" on {device}"
                     for i, (device, n, total) in enumerate(counts))
