"""Horizon sweep (ProgDraft style): what drafting K tokens ahead buys, for K = 3..12.

For each horizon K, serial SD drafts up to K tokens per round (physical width K + 1).
Reported per drafter: tau (tokens per target forward), the per-depth acceptance
P(accept at depth d | depth d reached), and the pooled speedup over target-only on a
device profile — showing where acceptance saturates and extra depth stops paying.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from specbench.core.methods.configs import SdConfig, TargetConfig
from specbench.core.positions import summed
from specbench.core.replay.bulk import replay_serial
from specbench.schemas.profiles import DeviceProfile
from specbench.schemas.traces import TraceFile
from specbench.schemas.windows import Window

HORIZONS = tuple(range(3, 13))


def horizon_sweep(windows: Sequence[Window], traces: Mapping[str, TraceFile], profile: DeviceProfile,
                  drafter: str, horizons: Sequence[int] = HORIZONS) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(summary per K, per-depth acceptance per K) for one drafter on one device."""
    target = replay_serial(windows, traces, [profile], TargetConfig())
    target_tps = target["tokens"].sum() / target["decode_s"].sum()
    summary, depths = [], []
    for k in horizons:
        config = SdConfig(width=k + 1, drafter=drafter)
        priced = replay_serial(windows, traces, [profile], config)
        reached, accepted = summed(priced["reached_at"], k), summed(priced["accepted_at"], k)
        tps = priced["tokens"].sum() / priced["decode_s"].sum()
        summary.append({"drafter": drafter, "device": profile.name, "K": k,
                        "tau": priced["tokens"].sum() / priced["target_forwards"].sum(), "tokens_per_s": tps,
                        "speedup": tps / target_tps})
        for d in range(1, k + 1):
            depths.append({"drafter": drafter, "K": k, "depth": d, "reached": int(reached[d - 1]),
                           "accepted": int(accepted[d - 1]),
                           "acceptance": accepted[d - 1] / reached[d - 1] if reached[d - 1] else np.nan})
    return pd.DataFrame(summary), pd.DataFrame(depths)
