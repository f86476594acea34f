"""The comparison tables of `specbench report`, built from result rows."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pandas as pd

from . import metrics
from .errors import SpecbenchError
from .render import Table
from .results import load_results


def load_many(directories: Sequence[Path], allow_mixed: bool = False) -> tuple[list[dict], pd.DataFrame]:
    """Rows of several results directories; unlike windows files are refused."""
    manifests, frames = [], []
    for directory in directories:
        manifest, frame = load_results(directory)
        manifests.append(manifest)
        frames.append(frame)
    digests = {m.get("windows", {}).get("digest") for m in manifests}
    if len(digests) > 1 and not allow_mixed:
        first, second = sorted(str(d) for d in digests)[:2]
        raise SpecbenchError(f"results use different windows (field windows.digest: {first} vs {second})",
                             hint="compare runs over the same windows file, or pass --allow-mixed")
    frame = pd.concat(frames, ignore_index=True)
    keys = ["device", "config", "window_id", "ratio_fit"]
    if frame.duplicated(keys).any():
        dup = frame[frame.duplicated(keys)].iloc[0]
        raise SpecbenchError(f"window '{dup['window_id']}' of {dup['config']} on {dup['device']} appears in more "
                             "than one results directory")
    return manifests, frame


def build_tables(frame: pd.DataFrame) -> list[Table]:
    main = frame[frame["ratio_fit"] == "median"]
    if main.empty:
        raise SpecbenchError("no result rows to report")
    pooled = metrics.pooled(main)
    tables = [
        Table("Pooled decode throughput", metrics.ORDER["pooled"],
              pooled[["device", "config", "windows", "tokens", "decode_s", "tokens_per_s", "speedup"]],
              {"decode_s": ".3f", "tokens_per_s": ".2f", "speedup": ".3f"}),
        Table("Windows faster / slower than target-only", metrics.ORDER["windows"],
              metrics.window_counts(main)[["device", "config", "windows", "faster", "slower", "slower_pct",
                                           "median_loss_pct", "max_loss_pct"]],
              {"slower_pct": ".1f", "median_loss_pct": ".1f", "max_loss_pct": ".1f"}),
        Table("Acceptance and forwards", metrics.ORDER["counts"],
              metrics.counts(main)[["device", "config", "tau", "acceptance", "coverage", "multi_token_fraction",
                                    "target_forwards", "drafter_forwards"]],
              {"tau": ".3f", "acceptance": ".3f", "coverage": ".3f", "multi_token_fraction": ".3f"}),
        Table("Time decomposition T = D + V - O + H (seconds)", metrics.ORDER["decomposition"],
              metrics.decomposition(main)[["device", "config", "decode_s", "d_s", "v_s", "o_s", "h_s",
                                           "exposed_drafter_s"]],
              {c: ".3f" for c in ("decode_s", "d_s", "v_s", "o_s", "h_s", "exposed_drafter_s")}),
    ]
    as2d = sorted(main.loc[main["method"] == "as2d", "config"].unique())
    if len(as2d) > 1:
        tables.append(Table("Oracle over the AS2D catalog (deployed = best pooled)", metrics.ORDER["oracle"],
                            metrics.oracle(main, as2d),
                            {"deployed_tokens_per_s": ".2f", "oracle_tokens_per_s": ".2f", "oracle_pct": ".2f",
                             "gap_pct": ".2f"}))
    if frame["ratio_fit"].nunique() > 1:
        table = metrics.sensitivity(frame)
        tables.append(Table("Sensitivity to extrapolated co-scheduling ratios (tokens/s)",
                            "pooled throughput replayed with the median, minimum and maximum measured ratio "
                            "filling unmeasured widths", table,
                            {c: ".2f" for c in ("median", "min", "max", "low", "high", "range_pct")}))
    return tables
