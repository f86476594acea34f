"""Budget selection (docs/METHODS.md §8 Budget selection): one drafter and one budget per device, fixed before
deployment.

`select_budget` is pure: it takes AS2D replay rows of development windows and picks the
catalog configuration with the highest pooled decode throughput; ties go to the smaller
budget. `schemas.budgets` saves it as the YAML that `specbench run --budget` reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from specbench.core.methods.configs import As2dConfig
from specbench.core.metrics import split_divergent
from specbench.errors import SpecbenchError


@dataclass(frozen=True)
class BudgetChoice:
    device: str
    config: As2dConfig
    tokens_per_s: float
    """Pooled decode throughput of the choice on the development windows."""
    runners_up: tuple[tuple[str, float], ...]
    """The next best configurations (label, pooled tokens/s), best first."""
    margin_pct: float
    """How much faster the choice is than the runner-up, percent."""
    extrapolated: bool
    """The choice used co-scheduling ratios the profile did not measure."""
    windows: int
    depth_extrapolated: bool = False
    """The choice priced forwards outside the profile's measured KV depths."""


def select_budget(rows: pd.DataFrame, configs: Sequence[As2dConfig], runners_up: int = 3) -> BudgetChoice:
    """The best configuration of `configs` on `rows` (AS2D rows of one device, dev split only). A
    window where a configuration diverged natively leaves the choice (docs/METHODS.md §7.6 Divergent windows): its
    row claims no time, so it would otherwise win."""
    rows = split_divergent(rows)[0]
    if rows.empty:
        raise SpecbenchError("no development rows to select a budget from")
    if (rows["split"] != "dev").any():
        raise SpecbenchError("budget selection uses development windows only; test rows were given")
    devices = rows["device"].unique()
    if len(devices) != 1:
        raise SpecbenchError(f"select one device at a time (got {', '.join(map(str, devices))})")
    by_label = {c.label: c for c in configs}
    sums = rows[rows["config"].isin(by_label)].groupby("config").agg(
        tokens=("tokens", "sum"), decode_s=("decode_s", "sum"), extrapolated=("extrapolated", "any"),
        depth_extrapolated=("depth_extrapolated", "any"), windows=("window_id", "nunique"))
    missing = sorted(set(by_label) - set(sums.index))
    if missing:
        raise SpecbenchError(f"no replay rows for catalog configuration {missing[0]}")
    sums["tokens_per_s"] = sums["tokens"] / sums["decode_s"]
    order = sorted(sums.index, key=lambda label: (-sums.at[label, "tokens_per_s"], by_label[label].budget,
                                                  by_label[label].drafter or "", label))
    best = order[0]
    others = tuple((label, float(sums.at[label, "tokens_per_s"])) for label in order[1:1 + runners_up])
    margin = float(100.0 * (sums.at[best, "tokens_per_s"] / others[0][1] - 1.0)) if others else float("inf")
    return BudgetChoice(str(devices[0]), by_label[best], float(sums.at[best, "tokens_per_s"]), others, margin,
                        bool(sums.at[best, "extrapolated"]), int(sums.at[best, "windows"]),
                        bool(sums.at[best, "depth_extrapolated"]))
