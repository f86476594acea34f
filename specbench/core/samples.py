"""Repeated timings (docs/METHODS.md §6.1 Repeated runs): the median sample, the spread, the stability threshold.

One definition serves native rows decoded `--runs` times and profile costs timed
`--repetitions` times: spread = sample standard deviation / median, in percent. How many
samples a profile cell takes is `core.repetitions`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

UNSTABLE_SPREAD_PCT = 10.0
"""A timing whose spread exceeds this is unstable (pyperf check's rule, against the median)."""
ORDER = ("per window: spread = 100 x standard deviation / median of its decode times (the row is the median "
         f"sample); then per device x configuration the median and maximum over windows; unstable = spread > "
         f"{UNSTABLE_SPREAD_PCT:g}%")
ORDER_PROFILE = ("per profiled timing (model, table, width, depth) whose samples spread more than "
                 f"{UNSTABLE_SPREAD_PCT:g}% of their median (100 x standard deviation / median), as the runs' "
                 "manifests recorded them from the profile; a table `cosched decode` row is a ratio an AS2D decode "
                 "realised below 1 (the target's: width 1 single-token steps, 2 verifications, 0 pooled; "
                 "`cosched decode producer`: the producer's), samples its forwards, priced as 1")
IDENTITY = ("method", "drafter", "width", "budget")
"""Configuration fields a spread table carries beside the label."""


def median_index(values: Sequence[float]) -> int:
    """Index of the median sample: the lower of the two middle ones for an even count, so
    the median is always one real sample (its other measurements belong to it); ties go to
    the earliest."""
    if not len(values):
        raise ValueError("no samples")
    order = sorted(range(len(values)), key=lambda i: (values[i], i))
    return order[(len(values) - 1) // 2]


def spread_pct(values: Sequence[float]) -> float:
    """100 x sample standard deviation (n - 1) / median; 0 for a single sample or a zero median."""
    array = np.asarray(values, dtype=np.float64)
    median = float(np.median(array)) if array.size else 0.0
    if array.size < 2 or median <= 0:
        return 0.0
    return float(100.0 * np.std(array, ddof=1) / median)


def spread_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per device x configuration over the rows with several samples: windows, samples per
    window (min..max as one value when equal), the median and maximum spread over windows, and
    the windows whose spread exceeds UNSTABLE_SPREAD_PCT, then the IDENTITY fields. Empty when
    no row has two samples (divergent rows have none)."""
    columns = ["device", "config", "windows", "runs", "median_spread_pct", "max_spread_pct", "unstable_windows",
               *IDENTITY]
    many = rows[rows["samples_s"].map(lambda s: isinstance(s, list) and len(s) > 1)]
    if many.empty:
        return pd.DataFrame(columns=columns)
    spreads = many.assign(spread=many["samples_s"].map(spread_pct), runs=many["samples_s"].map(len))
    out = []
    for (device, config), group in spreads.groupby(["device", "config"], sort=False):
        low, high = int(group["runs"].min()), int(group["runs"].max())
        out.append({"device": device, "config": config, "windows": len(group),
                    "runs": str(low) if low == high else f"{low}..{high}",
                    "median_spread_pct": float(group["spread"].median()),
                    "max_spread_pct": float(group["spread"].max()),
                    "unstable_windows": int((group["spread"] > UNSTABLE_SPREAD_PCT).sum()),
                    **{key: group[key].iloc[0] for key in IDENTITY}})
    table = pd.DataFrame(out, columns=columns)
    for key in IDENTITY:  # as given: integers and None, not floats and NaN
        table[key] = pd.Series([o[key] for o in out], index=table.index, dtype=object)
    return table
