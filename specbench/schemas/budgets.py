"""The budget file (`budgets/*.yaml`): the AS2D configuration budget selection fixed for a device."""

from __future__ import annotations

from pathlib import Path

from specbench.core.budget import BudgetChoice
from specbench.core.methods.configs import As2dConfig
from specbench.errors import SpecbenchError
from specbench.schemas.fileio import Where, check_header, dump_yaml, load_yaml, need, reject_unknown, write_atomic

KIND = "specbench.budget"
# Format history: 1 = first version.
VERSIONS = (1,)


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
    try:  # the configuration's own range checks (B, batch, H >= 1, conf_stop in [0, 1], align), named with the file
        config = As2dConfig(**fields)
    except SpecbenchError as exc:
        raise SpecbenchError(f"{path}: {exc}") from None
    _check_selection(need(doc, "selection", dict, where, {}), where.at("selection"))
    return need(doc, "device", str, where), config


def _check_selection(selection: dict, where: Where) -> None:
    """The record of how the choice was made: throughputs >= 0, a dev window count >= 1."""
    throughputs = [("tokens_per_s", selection, where)] if "tokens_per_s" in selection else []
    throughputs += [("tokens_per_s", doc, where.at("runners_up").at(i))
                    for i, doc in enumerate(need(selection, "runners_up", list, where, []))]
    for key, doc, at in throughputs:
        value = need(doc, key, float, at)
        if value < 0:
            raise at.at(key).out_of_range(value, "tokens per second >= 0")
    if "dev_windows" in selection and need(selection, "dev_windows", int, where) < 1:
        raise where.at("dev_windows").out_of_range(selection["dev_windows"], "an integer >= 1")
