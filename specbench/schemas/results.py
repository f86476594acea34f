"""Results directories: a manifest and appendable per-window rows (resumable runs).

    results/<run>/manifest.json   kind specbench.results, schema_version, inputs and their hashes
    results/<run>/rows.jsonl      one row per (device, method configuration, window)

Rows are appended and flushed one window at a time, so an interrupted run keeps what it
finished, and a rerun with the same manifest skips the rows already present. A rerun whose
inputs differ (windows, traces, profile, methods) is refused, naming the field.
"""

from __future__ import annotations

import json
from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path
from typing import Iterable

import numpy as np
import pandas as pd

from specbench.errors import SpecbenchError
from specbench.schemas.fileio import Where, append_jsonl, check_header, load_json, need, write_atomic

KIND = "specbench.results"
# Format history: 1 = first version (rows gained the optional `text`, `depth_extrapolated` and
# `placement` later; rows
# without them still load).
VERSIONS = (1,)
MANIFEST = "manifest.json"
ROWS = "rows.jsonl"


@dataclass(frozen=True)
class WindowResult:
    """One window decoded by one method configuration on one device."""

    device: str
    method: str
    """Registry name: target, sd, specasr, as2d."""
    config: str
    """Configuration label, e.g. sd[W=5] or as2d[B=7,drafter=small]."""
    window_id: str
    window_sha256: str
    dataset: str
    split: str
    tokens: int
    """Tokens committed after the prefill (N - 1)."""
    decode_s: float
    """From the end of the initial prefill(s) to the last commit."""
    rounds: int
    """Target forwards."""
    proposed: int
    """Candidates verified."""
    accepted: int
    multi_token_rounds: int
    """Target forwards that committed more than one token."""
    drafter_forwards: int
    d_s: float
    """D: drafter/producer service time."""
    v_s: float
    """V: target (verification) service time."""
    o_s: float
    """O: time both lanes worked at once."""
    h_s: float
    """H: residual (start-up, waits, alignment, drain): time neither lane ran a model."""
    extrapolated: bool
    """Used a co-scheduling ratio the profile did not measure (AS2D; depths: `depth_extrapolated`)."""
    lossless: bool
    """Committed exactly the target's greedy output (false: a native divergence, whose (device,
    window) every report aggregate leaves out: metrics.split_divergent)."""
    source: str = "replay"
    """'replay' (priced from a profile) or 'native' (device clock)."""
    ratio_fit: str = "median"
    """Which fill-in of unmeasured costs priced the row: median (the median co-scheduling ratio,
    flat outside the measured depths; every table's rows), min/max (co-scheduling ratio
    sensitivity) or depth-linear (depth sensitivity: the nearest measured segment extended)."""
    depth_extrapolated: bool = False
    """Priced a forward at a KV depth outside the profile's measured depths (False on native
    rows and on rows written before this field existed)."""
    text: str = ""
    """The detokenized answer ("" = not recorded: rows written before it existed, or no text available)."""
    placement: str = ""
    """Placement key (docs/METHODS.md §4.1) the row was measured or priced in ("" = not recorded)."""

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.decode_s if self.decode_s > 0 else float("nan")

    @property
    def degenerate(self) -> bool:
        return self.tokens == 0

    @property
    def exposed_drafter_s(self) -> float:
        return self.d_s - self.o_s

    @property
    def tau(self) -> float:
        return self.tokens / self.rounds if self.rounds else float("nan")


ROW_FIELDS = tuple(f.name for f in fields(WindowResult))
_INFERRED = {"int": {"integer"}, "float": {"integer", "floating", "mixed-integer-float"}, "str": {"string"},
             "bool": {"boolean"}}
_COLUMN_KINDS = {f.name: _INFERRED[f.type] for f in fields(WindowResult)}
_PYTHON_KINDS = {"int": int, "float": (int, float), "str": str, "bool": bool}


def _is(value: object, column: str) -> bool:
    kind = _PYTHON_KINDS[next(f.type for f in fields(WindowResult) if f.name == column)]
    return isinstance(value, kind) and (kind is bool or not isinstance(value, bool))


def row_from_dict(doc: dict, where: Where) -> WindowResult:
    values = {}
    for f in fields(WindowResult):
        kind = {"int": int, "float": float, "str": str, "bool": bool}[f.type]
        values[f.name] = need(doc, f.name, kind, where, ... if f.default is MISSING else f.default)
    return WindowResult(**values)


def row_key(row: WindowResult) -> tuple[str, str, str, str]:
    return row.device, row.config, row.window_id, row.ratio_fit


class ResultsDir:
    """Manifest + rows of one run; appends rows as windows finish."""

    def __init__(self, directory: Path):
        self.directory = Path(directory)

    @property
    def manifest_path(self) -> Path:
        return self.directory / MANIFEST

    @property
    def rows_path(self) -> Path:
        return self.directory / ROWS

    def open(self, manifest: dict, resume: bool) -> set[tuple[str, str, str, str]]:
        """Start or resume a run; returns the keys of rows already done."""
        if self.manifest_path.exists():
            if not resume:
                raise SpecbenchError(f"{self.directory}: results already exist",
                                     hint="pass --resume to continue that run, or choose another --out")
            old = load_manifest(self.manifest_path)
            for key in sorted(set(manifest) | set(old)):
                if key in ("created", "specbench_version", "command"):
                    continue
                if old.get(key) != manifest.get(key):
                    raise SpecbenchError(f"{self.directory}: cannot resume: manifest field '{key}' differs "
                                         f"({_brief(old.get(key))} before, {_brief(manifest.get(key))} now)")
            frame = self.frame()
            return set(zip(frame["device"], frame["config"], frame["window_id"], frame["ratio_fit"]))
        self.directory.mkdir(parents=True, exist_ok=True)
        write_atomic(self.manifest_path, _manifest_text(manifest))
        self.rows_path.touch()
        return set()

    def append(self, rows: Iterable[WindowResult]) -> None:
        append_jsonl(self.rows_path, (asdict(r) for r in rows))

    def append_frame(self, frame: pd.DataFrame) -> None:
        """Append rows given as a DataFrame with the WindowResult columns."""
        if frame.empty:
            return
        missing = {f.name: f.default for f in fields(WindowResult) if f.name not in frame and f.default is not MISSING}
        if missing:  # optional columns a producer does not fill (e.g. text) get their defaults
            frame = frame.assign(**missing)
        append_jsonl(self.rows_path, frame[list(ROW_FIELDS)].to_dict("records"))

    def frame(self) -> pd.DataFrame:
        """All complete rows, validated: a bad line is named by its number."""
        if not self.rows_path.exists():
            return pd.DataFrame(columns=list(ROW_FIELDS))
        data = self.rows_path.read_bytes()
        complete = data if data.endswith(b"\n") else data[: data.rfind(b"\n") + 1]
        docs = []
        required = {f.name for f in fields(WindowResult) if f.default is MISSING}
        for number, line in enumerate(complete.decode("utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                doc = json.loads(line)
            except json.JSONDecodeError as exc:
                raise SpecbenchError(f"{self.rows_path}: line {number} is not valid JSON ({exc.msg})") from None
            if not isinstance(doc, dict) or not required <= doc.keys():
                row_from_dict(doc, Where(self.rows_path, f"line {number}"))  # raises, naming the key
            docs.append(doc)
        frame = pd.DataFrame(docs, columns=list(ROW_FIELDS))
        for f in fields(WindowResult):
            if f.default is not MISSING and frame[f.name].isna().any():
                # object first: an all-missing column is float64, which will not hold a str default
                frame[f.name] = frame[f.name].astype(object).fillna(f.default)
        for name, kinds in _COLUMN_KINDS.items():
            if pd.api.types.infer_dtype(frame[name], skipna=False) not in kinds:
                bad = ~frame[name].map(lambda v, k=name: _is(v, k))  # the slow path only finds the line
                line = int(np.argmax(bad.to_numpy()))
                row_from_dict(docs[line], Where(self.rows_path, f"row {line + 1}"))
        return frame

    def rows(self) -> list[WindowResult]:
        return [WindowResult(**doc) for doc in self.frame().to_dict("records")]


def _brief(value: object) -> str:
    text = repr(value)
    return text if len(text) < 80 else text[:77] + "..."


def _manifest_text(manifest: dict) -> str:
    return json.dumps({"kind": KIND, "schema_version": VERSIONS[-1], **manifest}, indent=2, sort_keys=False) + "\n"


def load_manifest(path: Path) -> dict:
    doc = load_json(path)
    check_header(doc, KIND, VERSIONS, Where(path))
    return {k: v for k, v in doc.items() if k not in ("kind", "schema_version")}


def load_results(directory: Path) -> tuple[dict, pd.DataFrame]:
    directory = Path(directory)
    if not (directory / MANIFEST).exists():
        raise SpecbenchError(f"{directory}: not a results directory (no {MANIFEST})",
                             hint="pass the --out directory of `specbench run`")
    results = ResultsDir(directory)
    return load_manifest(results.manifest_path), results.frame()
