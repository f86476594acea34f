"""Results directories: a manifest and appendable per-window rows (resumable runs).

    results/<run>/manifest.json   kind specbench.results, schema_version, inputs and their hashes
    results/<run>/rows.jsonl      one row per (device, method configuration, window)

Rows are appended and flushed one window at a time, so an interrupted run keeps what it
finished, and a rerun with the same manifest skips the rows already present. A rerun whose
inputs differ (windows, traces, profile, methods) is refused, naming the field.

A row carries its configuration as typed fields (`methods.row_fields`); its label (`config`)
is derived from them, checked on load, and never read back.
"""

from __future__ import annotations

import json
from dataclasses import MISSING, asdict, dataclass, fields, replace
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from specbench.core.methods.configs import CONFIG_COLUMNS, config_of, parse_method_spec, row_fields
from specbench.core.samples import spread_pct
from specbench.errors import SpecbenchError
from specbench.schemas.environment import KEY as ENV_KEY
from specbench.schemas.environment import (
    DeviceEnvironment,
    Environment,
    LoadedModel,
    continued,
    environment_from_dict,
    environment_to_dict,
    manifest_environment,
)
from specbench.schemas.fileio import Where, append_jsonl, check_header, load_json, need, write_atomic
from specbench.schemas.profiles import StabilityWarning, warnings_from_doc

KIND = "specbench.results"
# Format history: 1 = first version (rows gained the optional `text`, `depth_extrapolated` and
# `placement` later; rows without them still load). 2 = rows carry their configuration as
# typed fields (width ... horizon, null where the method has no such parameter); version 1
# rows load with the fields derived from their label (`_v1_fields`). Rows gained the optional
# `samples_s` (native decode times of every sample) and `reached_at`/`accepted_at` (per-position
# acceptance) later; rows without them load with None and (). Version 2 manifests gained the
# optional `environment` block (schemas/environment.py), which replaces their top-level
# `specbench_version`, `command`, `created`, `runner` and `device_info`; manifests without it load.
VERSIONS = (1, 2)
MANIFEST = "manifest.json"
ROWS = "rows.jsonl"


@dataclass(frozen=True)
class WindowResult:
    """One window decoded by one method configuration on one device."""

    device: str
    method: str
    """Registry name: target, sd, specasr, as2d."""
    config: str
    """Configuration label for people and for grouping, e.g. sd[W=5] or as2d[B=7,drafter=small]:
    derived from the fields below (one label per configuration), never parsed."""
    width: int | None
    """SD: physical verification width W. None here and below: the method has no such parameter."""
    p_min: float | None
    """SD: confidence stop."""
    drafter: str | None
    """The drafter named (None: target-only, or the only drafter traced)."""
    k_max: int | None
    """SpecASR: longest draft."""
    tau_threshold: float | None
    """SpecASR: confidence threshold tau (the property `tau` is tokens per target forward)."""
    budget: int | None
    """AS2D: B, candidates per verification."""
    batch: int | None
    """AS2D: tokens per published batch."""
    conf_stop: float | None
    """AS2D: candidates end below this producer confidence."""
    align: str | None
    """AS2D: alignment policy."""
    horizon: int | None
    """AS2D: H, how far the anchor search looks."""
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
    rows; version 1 files may lack the key, so it defaults to not flagged)."""
    text: str = ""
    """The detokenized answer ("" = not recorded, or no text available; optional in version 1 files)."""
    placement: str = ""
    """Placement key (docs/METHODS.md §4.1 Placement) the row was measured or priced in ("" = not recorded)."""
    reached_at: tuple[int, ...] = ()
    """Verifications that reached draft position k, at index k - 1 (docs/METHODS.md §7.3 Acceptance, counts and time
    decomposition; () = none reached any, or not recorded)."""
    accepted_at: tuple[int, ...] = ()
    """Verifications that accepted the candidate at draft position k, at index k - 1."""
    samples_s: list[float] | None = None
    """Native rows: decode_s of every timed decode of the window (`run --native --runs N`), in
    the order they ran; the row is the median one (docs/METHODS.md §6.1 Repeated runs). None: replay rows,
    divergent rows and rows written before samples were kept (a single decode)."""

    @property
    def tau(self) -> float:
        """Tokens per target forward."""
        return self.tokens / self.rounds if self.rounds else float("nan")

    @property
    def spread_pct(self) -> float:
        """Spread of the samples: 100 x standard deviation / median (0 with fewer than two)."""
        return spread_pct(self.samples_s or [])


ROW_FIELDS = tuple(f.name for f in fields(WindowResult))
SAMPLES = "samples_s"
"""The one list of seconds: None or a non-empty list of seconds >= 0."""
_TYPES = {"int": int, "float": float, "str": str, "bool": bool, "tuple[int, ...]": tuple}
_KINDS = {f.name: _TYPES[f.type.removesuffix(" | None")] for f in fields(WindowResult) if f.name != SAMPLES}
"""Column -> Python type of the other columns; the CONFIG_COLUMNS also take None."""
_INFERRED = {int: {"integer"}, float: {"integer", "floating", "mixed-integer-float"}, str: {"string"},
             bool: {"boolean"}}


def _is(value: object, column: str) -> bool:
    kind = _KINDS[column]
    if kind is tuple:
        return isinstance(value, (list, tuple)) and all(_is_count(v) for v in value)
    if value is None:
        return column in CONFIG_COLUMNS
    if kind is float and isinstance(value, float) and not np.isfinite(value):
        return False
    return isinstance(value, (int, float) if kind is float else kind) and (kind is bool or not isinstance(value, bool))


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


COUNT_VECTORS = tuple(name for name, kind in _KINDS.items() if kind is tuple)
"""The per-position columns: tuples of counts (JSON lists on disk)."""


def _samples_ok(value: object) -> bool:
    return value is None or (isinstance(value, list) and len(value) > 0 and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v) and v >= 0 for v in value))


def row_from_dict(doc: dict, where: Where) -> WindowResult:
    values = {}
    for f in fields(WindowResult):
        if f.name == SAMPLES:
            values[f.name] = need(doc, f.name, (list, type(None)), where, None)
            if not _samples_ok(values[f.name]):
                raise where.at(f.name).fail("null or a non-empty list of decode times in seconds >= 0",
                                            values[f.name])
            continue
        kind = (_KINDS[f.name], type(None)) if f.name in CONFIG_COLUMNS else _KINDS[f.name]
        if kind is tuple:
            value = need(doc, f.name, list, where, f.default)
            if not _is(value, f.name):
                raise where.at(f.name).fail("a list of counts (integers >= 0)", value)
            values[f.name] = tuple(value)
            continue
        values[f.name] = need(doc, f.name, kind, where, ... if f.default is MISSING else f.default)
    return WindowResult(**values)


def _check_positions(frame: pd.DataFrame, path: Path) -> None:
    """Per-position counts agree with the row's totals: as many positions reached as accepted,
    never more accepted than reached, and the accepted counts sum to `accepted`."""
    for index, reached, accepted, total in zip(frame.index, frame["reached_at"], frame["accepted_at"],
                                                frame["accepted"]):
        if not reached and not accepted:
            continue
        ok = (len(reached) == len(accepted) and all(a <= r for r, a in zip(reached, accepted))
              and sum(accepted) == total)
        if not ok:
            raise Where(path, f"row {index + 1}").at("accepted_at").fail(
                f"per-position counts consistent with reached_at {list(reached)} and accepted = {total}",
                list(accepted))


def _v1_fields(label: str, where: Where) -> dict:
    """The configuration fields of a version 1 row, which has only its label: the one place a
    label is read back (`sd[W=5,drafter=x]` is the spec `sd:W=5,drafter=x`)."""
    name, _, rest = label.partition("[")
    try:
        configs = parse_method_spec(name + (":" + rest.removesuffix("]") if rest else ""))
    except SpecbenchError:
        configs = []
    if len(configs) != 1 or configs[0].label != label:
        raise where.at("config").fail("a configuration label, such as sd[W=5] (version 1 row)", label)
    return row_fields(configs[0])


def _check_configs(frame: pd.DataFrame, path: Path) -> None:
    """Each distinct configuration must round-trip: its method and fields name a configuration
    whose fields and label are the row's (a row never disagrees with its own label)."""
    columns = ["method", "config", *CONFIG_COLUMNS]
    distinct = frame[columns].drop_duplicates()
    for index, record in zip(distinct.index, distinct.to_dict("records")):
        where = Where(path, f"row {index + 1}")
        try:
            derived = row_fields(config_of(record))
        except SpecbenchError as exc:
            raise where.fail(f"the fields of a configuration ({exc})") from None
        for key in columns:
            if derived[key] != record[key]:
                raise where.at(key).fail(f"{derived[key]!r}, as {record['method']} with the row's other fields "
                                         "gives", record[key])


def rows_frame(docs: Sequence[Mapping]) -> pd.DataFrame:
    """Rows (mappings of the WindowResult fields) as the DataFrame producers and loaders give:
    configuration columns hold the values as given, None where a method lacks the parameter
    (pandas would turn a column of integers and nulls into floats and NaN)."""
    frame = pd.DataFrame(docs, columns=list(ROW_FIELDS))
    for name in CONFIG_COLUMNS:
        frame[name] = pd.Series([doc.get(name) for doc in docs], index=frame.index, dtype=object)
    frame[SAMPLES] = _samples_column([doc.get(SAMPLES) for doc in docs], frame.index)
    return frame


def _samples_column(values: Sequence, index) -> pd.Series:
    """The samples column as lists and None (a missing value, or pandas' NaN for one, is None)."""
    return pd.Series([v if isinstance(v, list) else None for v in values], index=index, dtype=object)


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
        """Start or resume a run; returns the keys of rows already done. A resumed manifest keeps
        its environment's first session and lists this one in `resumes` (schemas/environment.py)."""
        if self.manifest_path.exists():
            if not resume:
                raise SpecbenchError(f"{self.directory}: results already exist",
                                     hint="pass --resume to continue that run, or choose another --out")
            version, old = read_manifest(self.manifest_path)
            if version != VERSIONS[-1]:
                # One file holds one format: new rows would not match the old ones.
                raise SpecbenchError(f"{self.directory}: cannot resume schema_version {version} results "
                                     f"(this specbench writes version {VERSIONS[-1]})",
                                     hint="run into another --out directory")
            for key in sorted(set(manifest) | set(old)):
                if key in _PER_SESSION:
                    continue
                if old.get(key) != manifest.get(key):
                    raise SpecbenchError(f"{self.directory}: cannot resume: manifest field '{key}' differs "
                                         f"({_brief(old.get(key))} before, {_brief(manifest.get(key))} now)")
            if ENV_KEY in manifest:
                env = resumed_environment(old, manifest, Where(self.manifest_path))
                write_atomic(self.manifest_path, _manifest_text(old | {ENV_KEY: environment_to_dict(env)}))
            frame = self.frame()
            return set(zip(frame["device"], frame["config"], frame["window_id"], frame["ratio_fit"]))
        self.directory.mkdir(parents=True, exist_ok=True)
        write_atomic(self.manifest_path, _manifest_text(manifest))
        self.rows_path.touch()
        return set()

    def finish(self, at: str, models: Sequence[LoadedModel] = (), after: Mapping | None = None) -> None:
        """Record the end of this session in the manifest's environment (`Environment.finish`);
        a manifest without one (written by an older specbench, and not resumed) is left as it is."""
        version, doc = read_manifest(self.manifest_path)
        env = manifest_environment(doc, Where(self.manifest_path))
        if env is not None:
            doc[ENV_KEY] = environment_to_dict(env.finish(at, models, after))
            write_atomic(self.manifest_path, _manifest_text(doc, version))

    def append(self, rows: Iterable[WindowResult]) -> None:
        append_jsonl(self.rows_path, (asdict(r) for r in rows))

    def append_frame(self, frame: pd.DataFrame) -> None:
        """Append rows given as a DataFrame with the WindowResult columns."""
        if frame.empty:
            return
        missing = {f.name: [f.default] * len(frame) if f.name in COUNT_VECTORS else f.default
                   for f in fields(WindowResult) if f.name not in frame and f.default is not MISSING}
        if missing:  # optional columns a producer does not fill (e.g. text) get their defaults
            frame = frame.assign(**missing)
        frame = frame.assign(**{SAMPLES: _samples_column(frame[SAMPLES].tolist(), frame.index)})
        append_jsonl(self.rows_path, frame[list(ROW_FIELDS)].to_dict("records"))

    def frame(self) -> pd.DataFrame:
        """All complete rows, validated: a bad line is named by its number."""
        if not self.rows_path.exists():
            return pd.DataFrame(columns=list(ROW_FIELDS))
        version = read_manifest(self.manifest_path)[0]
        data = self.rows_path.read_bytes()
        complete = data if data.endswith(b"\n") else data[: data.rfind(b"\n") + 1]
        docs = []
        required = {f.name for f in fields(WindowResult) if f.default is MISSING}
        v1_fields: dict[str, dict] = {}
        for number, line in enumerate(complete.decode("utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                doc = json.loads(line)
            except json.JSONDecodeError as exc:
                raise SpecbenchError(f"{self.rows_path}: line {number} is not valid JSON ({exc.msg})") from None
            if version == 1 and isinstance(doc, dict) and isinstance(doc.get("config"), str):
                label = doc["config"]
                if label not in v1_fields:
                    v1_fields[label] = _v1_fields(label, Where(self.rows_path, f"line {number}"))
                doc = {**v1_fields[label], **doc}  # the row's own method stays, and is checked below
            if not isinstance(doc, dict) or not required <= doc.keys():
                row_from_dict(doc, Where(self.rows_path, f"line {number}"))  # raises, naming the key
            docs.append(doc)
        frame = rows_frame(docs)
        for name in COUNT_VECTORS:
            column = frame[name]
            if not column.map(lambda v, k=name: _is(v, k) or (not isinstance(v, list) and pd.isna(v))).all():
                line = int(np.argmax((~column.map(lambda v, k=name: _is(v, k))).to_numpy()))
                row_from_dict(docs[line], Where(self.rows_path, f"row {line + 1}"))
            frame[name] = column.map(lambda v: tuple(v) if isinstance(v, list) else ())
        for f in fields(WindowResult):
            if f.name in COUNT_VECTORS:
                continue
            if f.default is not MISSING and f.default is not None and frame[f.name].isna().any():
                # object first: an all-missing column is float64, which will not hold a str default
                frame[f.name] = frame[f.name].astype(object).fillna(f.default)
        for name, kind in _KINDS.items() if docs else ():  # no rows (a run stopped before its first): no types
            if kind is tuple:
                continue
            inferred = pd.api.types.infer_dtype(frame[name], skipna=name in CONFIG_COLUMNS)
            if inferred not in _INFERRED[kind] and not (name in CONFIG_COLUMNS and inferred == "empty"):
                bad = ~frame[name].map(lambda v, k=name: _is(v, k))  # the slow path only finds the line
                line = int(np.argmax(bad.to_numpy()))
                row_from_dict(docs[line], Where(self.rows_path, f"row {line + 1}"))
        bad_samples = ~frame[SAMPLES].map(_samples_ok)
        if bad_samples.any():
            line = int(np.argmax(bad_samples.to_numpy()))
            row_from_dict(docs[line], Where(self.rows_path, f"row {line + 1}"))
        _check_configs(frame, self.rows_path)
        _check_positions(frame, self.rows_path)
        return frame

    def rows(self) -> list[WindowResult]:
        return [WindowResult(**doc) for doc in self.frame().to_dict("records")]


def _brief(value: object) -> str:
    text = repr(value)
    return text if len(text) < 80 else text[:77] + "..."


def _manifest_text(manifest: dict, version: int = VERSIONS[-1]) -> str:
    return json.dumps({"kind": KIND, "schema_version": version, **manifest}, indent=2, sort_keys=False) + "\n"


_PER_SESSION = (ENV_KEY, "created", "specbench_version", "command", "runner", "device_info")
"""Manifest keys a resume does not compare as they are: the environment (merged, its runner and
device checked) and what older manifests kept of it at their top level."""


def resumed_environment(old: dict, manifest: dict, where: Where) -> Environment:
    """The environment of a resumed run: the old one continued by this session's; the runner
    build and the device must be the ones the run began with (their rows would not compare)."""
    new = environment_from_dict(manifest[ENV_KEY], where.at(ENV_KEY))
    before = manifest_environment(old, where)
    pairs = [("runner", before.runner, new.runner), ("device", before.device, new.device)] if before else []
    legacy = old.get("runner") if before is None else None
    if isinstance(legacy, dict) and new.runner is not None:  # an older manifest kept the runner at its top level
        pairs.append(("runner.sha256", legacy.get("sha256"), new.runner.sha256))
    for key, was, now in pairs:
        if isinstance(was, DeviceEnvironment) and isinstance(now, DeviceEnvironment):  # its state may change
            was, now = replace(was, governor=None, snapshot={}), replace(now, governor=None, snapshot={})
        if was is not None and now is not None and was != now:
            raise SpecbenchError(f"{where.path}: cannot resume: manifest field '{ENV_KEY}.{key}' differs "
                                 f"({_brief(was)} before, {_brief(now)} now)",
                                 hint="finish the run with the runner and device it began with, or use another --out")
    return continued(before, new)


def read_manifest(path: Path) -> tuple[int, dict]:
    """(schema_version, the manifest without its header)."""
    doc = load_json(path)
    version = check_header(doc, KIND, VERSIONS, Where(path))
    manifest_environment(doc, Where(path))  # validated where present; older manifests have none
    return version, {k: v for k, v in doc.items() if k not in ("kind", "schema_version")}



def load_results(directory: Path) -> tuple[dict, pd.DataFrame]:
    directory = Path(directory)
    if not (directory / MANIFEST).exists():
        raise SpecbenchError(f"{directory}: not a results directory (no {MANIFEST})",
                             hint="pass the --out directory of `specbench run`")
    results = ResultsDir(directory)
    return read_manifest(results.manifest_path)[1], results.frame()


def profile_warnings(manifests: Sequence[Mapping], paths: Sequence[Path]) -> pd.DataFrame:
    """The stability warnings of the profiles the runs used, as each manifest copied them (a
    replay run's `profiles[].warnings`, a native run's `placement_profile.warnings`): one row
    per (device, profile, timing), each once."""
    out = []
    for manifest, path in zip(manifests, paths):
        entries = [(p.get("device", "?"), p, f"profiles[{i}]") for i, p in enumerate(manifest.get("profiles") or [])]
        if isinstance(manifest.get("placement_profile"), dict):
            entries.append((manifest.get("device", "?"), manifest["placement_profile"], "placement_profile"))
        for device, entry, key in entries:
            where = Where(Path(path) / MANIFEST, key).at("warnings")
            for warning in warnings_from_doc(entry.get("warnings", []), where):
                out.append({"device": device, "profile": str(entry.get("path", "?")), **asdict(warning)})
    columns = ["device", "profile", *(f.name for f in fields(StabilityWarning))]
    return pd.DataFrame(out, columns=columns).drop_duplicates(ignore_index=True)
