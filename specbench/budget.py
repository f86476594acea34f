"""Budget selection (METHODS §7): one drafter and one budget per device, fixed before deployment.

`select_budget` is pure: it takes AS2D replay rows of development windows and picks the
catalog configuration with the highest pooled decode throughput; ties go to the smaller
budget. The YAML it is saved as is what `specbench run --budget` reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import pandas as pd

from .errors import SpecbenchError
from .fileio import Where, check_header, dump_yaml, load_yaml, need, reject_unknown, write_atomic
from .methods.as2d import As2dConfig

KIND = "specbench.budget"
# Format history: 1 = first version.
VERSIONS = (1,)


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
    """The best configuration of `configs` on `rows` (AS2D rows of one device, dev split only)."""
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


def budget_to_dict(choice: BudgetChoice, provenance: dict) -> dict:
    c = choice.config
    return {"kind": KIND, "schema_version": VERSIONS[-1], "device": choice.device,
            "as2d": {"drafter": c.drafter, "B": c.budget, "batch": c.batch, "conf_stop": c.conf_stop,
                     "align": c.align, "H": c.horizon},
            "selection": {"tokens_per_s": choice.tokens_per_s, "margin_pct": choice.margin_pct,
                          "runners_up": [{"config": label, "tokens_per_s": tps} for label, tps in choice.runners_up],
                          "extrapolated_cosched": choice.extrapolated, "extrapolated_depth": choice.depth_extrapolated,
                          "dev_windows": choice.windows,
                          **provenance}}


def save_budget(path: Path, choice: BudgetChoice, provenance: dict) -> None:
    write_atomic(Path(path), dump_yaml(budget_to_dict(choice, provenance)))


def load_budget(path: Path) -> tuple[str, As2dConfig]:
    """(device name, AS2D configuration) from a budget file."""
    path = Path(path)
    doc = load_yaml(path)
    where = Where(path)
    check_header(doc, KIND, VERSIONS, where)
    reject_unknown(doc, {"kind", "schema_version", "device", "as2d", "selection"}, where)
    as2d = need(doc, "as2d", dict, where)
    a_where = where.at("as2d")
    reject_unknown(as2d, {"drafter", "B", "batch", "conf_stop", "align", "H"}, a_where)
    fields = {"budget": need(as2d, "B", int, a_where),
              "drafter": need(as2d, "drafter", (str, type(None)), a_where, None),
              "batch": need(as2d, "batch", int, a_where, 8),
              "conf_stop": float(need(as2d, "conf_stop", float, a_where, 0.0)),
              "align": need(as2d, "align", str, a_where, "anchor"), "horizon": need(as2d, "H", int, a_where, 8)}
    try:  # schema errors above name the file already; the configuration's own checks do not
        config = As2dConfig(**fields)
    except SpecbenchError as exc:
        raise SpecbenchError(f"{path}: {exc}") from None
    return need(doc, "device", str, where), config
