"""Horizon sweep (ProgDraft style): what drafting K tokens ahead buys, for K = 3..12.

For each horizon K, serial SD drafts up to K tokens per round (physical width K + 1).
Reported per drafter: tau (tokens per target forward), the per-depth acceptance
P(accept at depth d | depth d reached), and the pooled speedup over target-only on a
device profile — showing where acceptance saturates and extra depth stops paying.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from specbench.core.methods.sd import SdConfig
from specbench.core.methods.target import TargetConfig
from specbench.core.replay.bulk import replay_serial, sd_ops, trace_for
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
        reached = np.zeros(k + 1, dtype=np.int64)
        accepted = np.zeros(k + 1, dtype=np.int64)
        for window in windows:
            _, trace = trace_for(traces, config, window.window_id)
            ops = sd_ops(trace, window.cap, config)
            proposed = ops.target_width - 1
            for d in range(1, k + 1):
                reached[d] += int(np.sum((proposed >= d) & (ops.target_accepted >= d - 1)))
                accepted[d] += int(np.sum(ops.target_accepted >= d))
        priced = replay_serial(windows, traces, [profile], config)
        tps = priced["tokens"].sum() / priced["decode_s"].sum()
        summary.append({"drafter": drafter, "device": profile.name, "K": k,
                        "tau": priced["tokens"].sum() / priced["rounds"].sum(), "tokens_per_s": tps,
                        "speedup": tps / target_tps})
        for d in range(1, k + 1):
            depths.append({"drafter": drafter, "K": k, "depth": d, "reached": int(reached[d]),
                           "accepted": int(accepted[d]),
                           "acceptance": accepted[d] / reached[d] if reached[d] else np.nan})
    return pd.DataFrame(summary), pd.DataFrame(depths)
