"""A profile's raw timings judged (docs/METHODS.md §4.6 Stability warnings): the timings that spread more than
UNSTABLE_SPREAD_PCT of their median, the cells that stopped at their maximum count short of their precision, and
the co-scheduling ratios below 1 beyond their interval after a re-measurement."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from specbench.core.repetitions import achieved_precision, reaches
from specbench.core.samples import UNSTABLE_SPREAD_PCT, spread_pct
from specbench.schemas.profiles import DECODE_TABLE, DrafterProfile, StabilityWarning, cosched_ratio_table


def stability_warnings(samples: Sequence[dict]) -> list[StabilityWarning]:
    """The unstable timings among a profile's raw runner records (the `*.samples.jsonl` lines:
    `forward` records with `samples_us`, `cosched` records with `samples`), the cells measured
    to a precision that stopped at their maximum count short of it, and the co-scheduling ratios
    below 1 beyond their interval after a re-measurement (a cosched record's `below_one`), pure."""
    out = []

    def check(model: str, table: str, record: dict, values: Sequence[float]) -> None:
        spread = spread_pct(values) if len(values) > 1 else 0.0
        wanted = record.get("precision") if table in ("CT", "CD", "CD_all") else None
        achieved = achieved_precision(values) if wanted is not None and values else math.inf
        # a cell stops short of its precision only at the maximum count (a zero median has no
        # relative precision, and no profile takes it as a cost)
        short = wanted is not None and math.isfinite(achieved) and not reaches(achieved, float(wanted))
        if spread > UNSTABLE_SPREAD_PCT or short:
            out.append(StabilityWarning(model, table, int(record["width"]), int(record["depth"]),
                                        float(np.median(values)) / 1e6, round(spread, 3), len(values),
                                        float(wanted) if short and wanted is not None else None,
                                        round(achieved, 6) if short else None))

    for record in samples:
        name = str(record.get("model_name", record.get("model", "?")))
        if record.get("kind") == "forward":
            table = "CT" if record.get("model") == "target" else "CD_all" if record.get("logits") == "all" else "CD"
            check(name, table, record, record.get("samples_us") or [])
        elif record.get("kind") == "cosched":
            for measure, values in (record.get("samples") or {}).items():
                check(name, f"cosched {measure.removesuffix('_us')}", record, values or [])
            for low in record.get("below_one") or []:  # core/cosched.py: after a re-measurement
                lane = "target" if low["ratio"] == "rho_target" else "drafter"
                values = (record.get("samples") or {}).get(f"{lane}_together_us") or []
                out.append(StabilityWarning(name, cosched_ratio_table(low["ratio"]), int(record["width"]),
                                            int(record["depth"]), float(np.median(values)) / 1e6,
                                            round(spread_pct(values) if len(values) > 1 else 0.0, 3), len(values),
                                            ratio=float(low["value"]), ratio_low=float(low["low"]),
                                            ratio_high=float(low["high"])))
    return out


def decode_warnings(drafters: Sequence[DrafterProfile]) -> list[StabilityWarning]:
    """Per drafter, the `cosched.decode` ratios its AS2D decodes measured below 1 and the profile prices as 1
    (core/decomposition.decode_contention): width 1 for single-token steps and the producer beside them, 2 for
    verifications and the producer beside them, 0 for either lane's pooled ratio."""
    out = []
    for drafter in drafters:
        decode = drafter.cosched.decode if drafter.cosched is not None else None
        if decode is None:
            continue
        for key, value in decode.below_one.items():
            # every ratio `below_one` names has its count in `<name>_forwards`, but the pooled target's (`forwards`)
            forwards = getattr(decode, f"{key}_forwards", decode.forwards)
            width = 1 if key.endswith("single") else 2 if key.endswith("verify") else 0
            out.append(StabilityWarning(drafter.name, f"{DECODE_TABLE} {key}", width,
                                        0, 0.0, 0.0, int(forwards), ratio=round(float(value), 6)))
    return out
