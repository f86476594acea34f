"""The budget file (`budgets/*.yaml`): the AS2D configuration budget selection fixed for a device."""

from __future__ import annotations

from pathlib import Path

from specbench.core.budget import BudgetChoice
from specbench.core.methods.configs import As2dConfig
from specbench.errors import SchemaError, SpecbenchError
from specbench.schemas.fileio import (
    Where,
    check_header,
    dump_yaml,
    from_dict,
    load_yaml,
    need,
    reject_unknown,
    to_dict,
    write_atomic,
)

KIND = "specbench.budget"
# Format history: 1 = first version.
VERSIONS = (1,)


def budget_to_dict(choice: BudgetChoice, provenance: dict) -> dict:
    return {"kind": KIND, "schema_version": VERSIONS[-1], "device": choice.device, "as2d": to_dict(choice.config),
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
    try:
        config = from_dict(As2dConfig, need(doc, "as2d", dict, where), where.at("as2d"))
    except SchemaError:
        raise
    except SpecbenchError as exc:  # the configuration's own checks (B, batch, H >= 1, conf_stop, align), named
        # with the file
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
