"""What a user calls from Python: `specbench.load_rows` (heavy libraries load on the call)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from specbench.errors import SpecbenchError

if TYPE_CHECKING:
    import pandas as pd

RUN = "run"
"""The column naming the results directory a row came from, as it was given."""


def load_rows(directories: str | Path | Iterable[str | Path]) -> pd.DataFrame:
    """The rows of one or several results directories (`specbench run --out`) in one DataFrame.

    One row per (device, configuration, window) of each run, with every column of its
    rows.jsonl (device, source, the configuration's fields, tokens, decode_s, ...) and first
    `run`: the directory it came from, as given. Each directory is read and checked as
    `specbench report` reads it (manifest, schema version, rows); unlike `report`, runs
    of different windows or models are not refused: the frame holds what the files hold.

    Example:

        frame = specbench.load_rows(["results/pixel8", "results/redmi"])
        frame.groupby(["run", "device", "config"])["decode_s"].sum()
    """
    import pandas as pd

    from specbench.schemas.results import load_results

    paths = [directories] if isinstance(directories, (str, Path)) else list(directories)
    if not paths:
        raise SpecbenchError("load_rows: no results directories given")
    frames = []
    for path in paths:
        frame = load_results(Path(path))[1]
        frame.insert(0, RUN, str(path))
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)
