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
import shlex
import shutil
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from pathlib import Path

import numpy as np
import pandas as pd

from specbench.core.methods.configs import CONFIG_COLUMNS, config_of, row_fields
from specbench.errors import SpecbenchError
from specbench.schemas.environment import KEY as ENV_KEY
from specbench.schemas.environment import (
    DeviceEnvironment,
    Environment,
    LoadedModel,
    continued,
)
from specbench.schemas.fileio import (
    RULE,
    Rule,
    StrEnum,
    Where,
    WriterLock,
    append_jsonl,
    check_header,
    every_key,
    field_plans,
    from_dict,
    load_json,
    need,
    reject_unknown,
    rule,
    to_dict,
    write_atomic,
)
from specbench.schemas.placement import Placement
from specbench.schemas.profiles import ModelId, StabilityWarning

KIND = "specbench.results"
# Format history (every change of shape bumps VERSION and adds a line; other versions are refused):
# 1 = first version: rows name their configuration by its label only.
# 2 = rows carry their configuration as typed fields (width ... horizon, null where the method has
#     no such parameter), `samples_s`, `reached_at`/`accepted_at`; manifests gain `environment`.
# 3 = the manifest is one typed record (`ResultsManifest`): `environment` required, no top-level
#     `specbench_version`/`command`/`created`/`runner`/`device_info`; a profile entry names its
#     runner build by `runner_sha256`; row columns named for what they count: `target_forwards`,
#     `multi_token_forwards` and `cost_fit` (were `rounds`, `multi_token_rounds`, `ratio_fit`).
# 4 = rows gain `energy_j`, `energy_above_idle_j`, `energy_samples` (null without an energy source);
#     a native manifest gains `energy` (the battery sampling asked for and what it found); a
#     sustained native run (`run --native --sustained`) writes `timeline.jsonl`: one
#     `TimelineRecord` per request (its times on the runner's clock and the phone's thermal state).
# 5 = rows gain `category` (the window's category, null when it has none), `drafter_sha256` (the model
#     file that drafted a native row; null for target-only, the prompt-lookup drafter and replay rows)
#     and `decisions_match` (a native row's decisions against the trace's; null when not checked); a
#     native manifest names every drafter it ran (`drafters`, a list, was `drafter`) and keys
#     `templates` by 'target' and each drafter's name (was 'target'/'drafter').
VERSION = 5
VERSIONS = (VERSION,)
MANIFEST = "manifest.json"
ROWS = "rows.jsonl"
MAX_ROW_S = 86_400.0
"""The most seconds a row's times may hold: a day for one window is no measurement but a broken clock or file."""
_COUNT = rule(low=0, expected="a count >= 0")
_SECONDS = rule(low=0, high=MAX_ROW_S, expected=f"seconds in [0, {MAX_ROW_S:g}]")
_PROBABILITY = rule(low=0, high=1, expected="a probability in [0, 1]")
_ENERGY = rule(low=0, expected="null or a value >= 0 (finite)")
_POSITIONS = rule(low=0, expected="a list of counts (integers >= 0)")


class Source(StrEnum):
    """Where a run's numbers come from: a manifest's `mode`, a row's `source`."""

    REPLAY = "replay"
    """Priced from a profile."""
    NATIVE = "native"
    """Decoded on a device, timed by its clock."""


MODES = tuple(s.value for s in Source)


@every_key  # a file of this version writes every key of a row
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
    p_min: float | None = field(metadata=_PROBABILITY)
    """SD: confidence stop."""
    drafter: str | None
    """The drafter named (None: target-only, or the only drafter traced)."""
    k_max: int | None
    """SpecASR: longest draft."""
    tau_threshold: float | None = field(metadata=_PROBABILITY)
    """SpecASR: confidence threshold tau (the property `tau` is tokens per target forward)."""
    budget: int | None
    """AS2D: B, candidates per verification."""
    batch: int | None
    """AS2D: tokens per published batch."""
    conf_stop: float | None = field(metadata=_PROBABILITY)
    """AS2D: candidates end below this producer confidence."""
    align: str | None
    """AS2D: alignment policy."""
    horizon: int | None
    """AS2D: H, how far the anchor search looks."""
    window_id: str
    window_sha256: str
    dataset: str
    split: str
    tokens: int = field(metadata=_COUNT)
    """Tokens committed after the prefill (N - 1)."""
    decode_s: float = field(metadata=_SECONDS)
    """From the end of the initial prefill(s) to the last commit."""
    target_forwards: int = field(metadata=_COUNT)
    """Target forwards."""
    proposed: int = field(metadata=_COUNT)
    """Candidates verified."""
    accepted: int = field(metadata=_COUNT)
    multi_token_forwards: int = field(metadata=_COUNT)
    """Target forwards that committed more than one token."""
    drafter_forwards: int = field(metadata=_COUNT)
    d_s: float = field(metadata=_SECONDS)
    """D: drafter/producer service time."""
    v_s: float = field(metadata=_SECONDS)
    """V: target (verification) service time."""
    o_s: float = field(metadata=_SECONDS)
    """O: time both lanes worked at once."""
    h_s: float = field(metadata=_SECONDS)
    """H: residual (start-up, waits, alignment, drain): time neither lane ran a model."""
    extrapolated: bool
    """Used a co-scheduling ratio the profile did not measure (AS2D; depths: `depth_extrapolated`)."""
    lossless: bool
    """Committed exactly the target's greedy output (false: a native divergence, whose (device,
    window) every report aggregate leaves out: metrics.split_divergent)."""
    source: str = Source.REPLAY.value
    """A `Source` value: 'replay' (priced from a profile) or 'native' (device clock)."""
    cost_fit: str = "median"
    """Which fill-in of unmeasured costs priced the row: median (the median co-scheduling ratio,
    flat outside the measured depths; every table's rows), min/max (co-scheduling ratio
    sensitivity) or depth-linear (depth sensitivity: the nearest measured segment extended)."""
    depth_extrapolated: bool = False
    """Priced a forward at a KV depth outside the profile's measured depths (False on native rows)."""
    text: str = ""
    """The detokenized answer ("" = not recorded, or no text available)."""
    placement: str = ""
    """Placement key (docs/METHODS.md §4.1 Placement) the row was measured or priced in ("" = not recorded)."""
    reached_at: tuple[int, ...] = field(default=(), metadata=_POSITIONS)
    """Verifications that reached draft position k, at index k - 1 (docs/METHODS.md §7.3 Acceptance, counts and time
    decomposition; () = none reached any, or not recorded)."""
    accepted_at: tuple[int, ...] = field(default=(), metadata=_POSITIONS)
    """Verifications that accepted the candidate at draft position k, at index k - 1."""
    energy_j: float | None = field(default=None, metadata=_ENERGY)
    """Native rows: joules the battery gave over the median sample's request (its prefill and decode,
    docs/METHODS.md §10 Energy). None: no energy source (replay rows, hosts without a battery)."""
    energy_above_idle_j: float | None = field(default=None, metadata=rule(expected="null or a finite number"))
    """energy_j less the idle power over the same time (None: no energy source or no idle period)."""
    energy_samples: int | None = field(default=None, metadata=_ENERGY)
    """Battery samples taken within that request (None: no energy source)."""
    samples_s: list[float] | None = field(default=None, metadata=rule(
        low=0, check=bool, expected="null or a non-empty list of decode times in seconds >= 0"))
    """Native rows: decode_s of every timed decode of the window (`run --native --runs N`), in
    the order they ran; the row is the median one (docs/METHODS.md §6.1 Repeated runs). None: replay rows and
    divergent rows."""
    category: str | None = None
    """The window's category (`Window.category`, e.g. "coding"); None: the window has none."""
    drafter_sha256: str | None = None
    """Native rows: sha256 of the model file that drafted the row (None: target-only, the prompt-lookup
    drafter, which has no file, and replay rows, whose drafter is their trace's)."""
    decisions_match: bool | None = None
    """Native rows checked against a trace (docs/METHODS.md §6.4 Drafters and decisions checked against the trace): True
    when every sample decided as replay decides on the trace (SD, SpecASR: accepted and proposed counts of
    every verification; AS2D: the producer's stream), False when one did not (the row is then left out of
    every aggregate, like a divergence). None: not checked (replay rows, target-only, divergent rows, runs
    without --traces, a drafter with no trace)."""

    @property
    def tau(self) -> float:
        """Tokens per target forward."""
        return self.tokens / self.target_forwards if self.target_forwards else float("nan")


ROW_FIELDS = tuple(f.name for f in fields(WindowResult))
SAMPLES = "samples_s"
"""The one list of seconds: None or a non-empty list of seconds >= 0."""
_ROW_PLANS = field_plans(WindowResult)
_KINDS = {p.name: tuple if p.kind is list else p.kind for p in _ROW_PLANS if p.name != SAMPLES}
"""Column -> Python type of the other columns; the NULLABLE ones also take None."""
ENERGY_COLUMNS = ("energy_j", "energy_above_idle_j", "energy_samples")
NULLABLE = tuple(p.name for p in _ROW_PLANS if p.nullable and p.name != SAMPLES)
"""Columns that hold None: a method's absent parameter, a row without an energy source, a window without a
category, a row no drafter model drafted, a row whose decisions were not checked."""
_NULL_FILLED = (*ENERGY_COLUMNS, "category", "drafter_sha256", "decisions_match")
"""The nullable columns a producer's frame may leave NaN (the configuration columns it fills itself)."""
_INFERRED = {int: {"integer"}, float: {"integer", "floating", "mixed-integer-float"}, str: {"string"},
             bool: {"boolean"}}


def _is(value: object, column: str) -> bool:
    kind = _KINDS[column]
    if kind is tuple:
        return isinstance(value, (list, tuple)) and all(_is_count(v) for v in value)
    if value is None:
        return column in NULLABLE
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
    return from_dict(WindowResult, doc, where)


def _check_positions(frame: pd.DataFrame, path: Path) -> None:
    """Per-position counts agree with the row's totals: as many positions reached as accepted,
    never more accepted than reached, and the accepted counts sum to `accepted`."""
    for index, reached, accepted, total in zip(frame.index, frame["reached_at"], frame["accepted_at"],
                                                frame["accepted"], strict=False):
        if not reached and not accepted:
            continue
        ok = (len(reached) == len(accepted) and all(a <= r for r, a in zip(reached, accepted, strict=False))
              and sum(accepted) == total)
        if not ok:
            raise Where(path, f"row {index + 1}").at("accepted_at").fail(
                f"per-position counts consistent with reached_at {list(reached)} and accepted = {total}",
                list(accepted))


def _ruled(metadata: Mapping) -> tuple[str, ...]:
    return tuple(p.name for p in _ROW_PLANS if p.rule is metadata[RULE])


COUNTS = _ruled(_COUNT)
SECONDS = _ruled(_SECONDS)
PROBABILITIES = _ruled(_PROBABILITY)
"""Row columns range-checked on load (with the energy columns): counts >= 0, seconds in [0, MAX_ROW_S],
probabilities in [0, 1]."""


def _check_ranges(frame: pd.DataFrame, path: Path, lines: Sequence[int]) -> None:
    """Every number of the rows finite and within its field's range, or an error naming the file, the
    line, the column, the value and the range."""
    checks = [(p.name, p.rule.expected or "a finite number", p.nullable, _within(p.rule)) for p in _ROW_PLANS
              if p.kind is float or (p.kind is int and (p.rule.low is not None or p.rule.high is not None))]
    tokens = frame["tokens"].to_numpy(dtype=np.float64)
    checks += [("decode_s", "seconds > 0 (the row committed tokens)", False, lambda v: (v > 0) | (tokens == 0))]
    for column, expected, nullable, ok in checks:
        values = pd.to_numeric(frame[column], errors="coerce") if nullable else frame[column]
        values = values.astype(np.float64)
        good = ok(values) | values.isna() if nullable else ok(values)
        bad = ~good.to_numpy(dtype=bool)
        if bad.any():
            at = int(np.argmax(bad))
            value = frame[column].iloc[at]
            shown = value.item() if hasattr(value, "item") else value  # numpy scalar -> Python for the message
            raise Where(path, f"line {lines[at]}").at(column).fail(expected, shown)


def _within(rule_: Rule):
    """Series -> where each value is finite and within the rule's bounds (the vectorised `from_dict` check)."""
    def ok(v: pd.Series) -> pd.Series:
        good = np.isfinite(v)
        if rule_.low is not None:
            good &= (v > rule_.low) if rule_.above else (v >= rule_.low)
        if rule_.high is not None:
            good &= (v < rule_.high) if rule_.below else (v <= rule_.high)
        return good
    return ok


ROW_KEY = ["device", "config", "window_id", "cost_fit", "source"]
"""What identifies a row in its results directory: one row per key (a resumed run skips the keys it has)."""


def _check_unique(frame: pd.DataFrame, path: Path, lines: Sequence[int]) -> None:
    """Refuse a row whose key an earlier row of the file holds (two writers, or a file edited by hand)."""
    duplicated = frame.duplicated(ROW_KEY).to_numpy()
    if duplicated.any():
        at = int(np.argmax(duplicated))
        row = frame.iloc[at]
        first = int(np.argmax((frame[ROW_KEY] == row[ROW_KEY]).all(axis=1).to_numpy()))
        raise SpecbenchError(f"{path}:{lines[at]}: a duplicated row: window '{row['window_id']}' of {row['config']} "
                             f"on {row['device']} ({row['source']}, cost_fit {row['cost_fit']}) is also on line "
                             f"{lines[first]}",
                             hint="the directory had two writers; rerun into a fresh --out")


def _check_configs(frame: pd.DataFrame, path: Path) -> None:
    """Each distinct configuration must round-trip: its method and fields name a configuration
    whose fields and label are the row's (a row never disagrees with its own label)."""
    columns = ["method", "config", *CONFIG_COLUMNS]
    distinct = frame[columns].drop_duplicates()
    for index, record in zip(distinct.index, distinct.to_dict("records"), strict=False):
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
    for name in NULLABLE:
        frame[name] = pd.Series([doc.get(name) for doc in docs], index=frame.index, dtype=object)
    frame[SAMPLES] = _samples_column([doc.get(SAMPLES) for doc in docs], frame.index)
    return frame


def _samples_column(values: Sequence, index) -> pd.Series:
    """The samples column as lists and None (a missing value, or pandas' NaN for one, is None)."""
    return pd.Series([v if isinstance(v, list) else None for v in values], index=index, dtype=object)


_TEMPLATES = "'target' or a drafter's name -> a template name (strings)"


@dataclass(frozen=True)
class WindowsInput:
    """The windows a run decoded."""

    path: str
    """The windows file as the command named it."""
    digest: str
    """`windows.windows_digest` of the windows run (two runs compare only on equal digests)."""
    count: int = field(metadata=rule(low=0, expected="a count >= 0"))
    """How many windows the run decoded."""


@dataclass(frozen=True)
class TraceInput:
    """One traces file a replay run read (the manifest keys them by drafter name)."""

    path: str
    target: ModelId
    drafter: ModelId


@dataclass(frozen=True)
class ProfileInput:
    """A profile a run used: each profile a replay run priced with, or the profile a native run
    took its placement from."""

    path: str
    sha256: str
    """sha256 of the profile file as the run read it."""
    device: str | None = field(default=None, metadata=rule(omit=True))
    """Replay: the device@placement the rows of this profile are named by (None: a native run's)."""
    runner_sha256: str | None = field(default=None, metadata=rule(omit=True))
    """Replay: sha256 of the runner build that measured the profile (None: it records none)."""
    placement: Placement | None = field(default=None, metadata=rule(omit=True))
    """Replay: the profile's placement (native runs record theirs in `ResultsManifest.placement`)."""
    warnings: tuple[StabilityWarning, ...] = field(default=(), metadata=rule(omit=True))
    """The profile's unstable timings, copied so that a report shows them without the profile."""
    environment: Environment | None = field(default=None, metadata=rule(omit=True))
    """Replay: the profile's environment block (who measured it with which build and models)."""
    declared_costs: Mapping[str, str] = field(default_factory=dict, metadata=rule(
        omit=True, expected="drafter name -> a description (strings)"))
    """Replay: drafter name -> how its declared (not measured) costs are described."""


@dataclass(frozen=True)
class Repeats:
    """A native run's `--runs`/`--warmup` (absent from the manifest at 1/0)."""

    runs: int = field(metadata=rule(low=1))
    """Timed decodes of every (window, configuration)."""
    warmup: int = field(metadata=rule(low=0))
    """Untimed decodes of every configuration before the first window."""


@every_key  # read as written: every key
@dataclass(frozen=True)
class EnergyRecord:
    """A native run's battery sampling (docs/METHODS.md §10 Energy): what `run --native` asked
    (compared on resume) and what the last session found (filled in when it finishes)."""

    interval_ms: int = field(metadata=rule(low=1, expected="milliseconds >= 1"))
    """--energy-interval: milliseconds between samples."""
    idle_s: float
    """--energy-idle: seconds of idle draw measured before the first window."""
    declared_convention: str | None
    """--energy-convention as given (None: detected)."""
    current_path: str
    """The current file on the device (current_now)."""
    voltage_path: str
    status_path: str
    no_source: str | None = None
    """Why there is no energy ("no energy source: ..."); None: the battery was sampled."""
    convention: str | None = None
    """The convention the samples were read with, e.g. uA,uV,discharging_negative."""
    detected: bool = False
    """The convention was detected from the values and status (not declared)."""
    status: str | None = None
    """The battery's status as the runner read it (Discharging, Charging, ...)."""
    samples: int = 0
    """Samples the last session's job took."""
    idle_w: float | None = None
    """Mean power over the idle period (None: no idle period measured)."""
    idle_samples: int | None = None
    """Samples taken within the idle period."""
    idle_start_us: int | None = None
    """The idle period on the runner's clock (CLOCK_MONOTONIC, microseconds)."""
    idle_end_us: int | None = None


ENERGY_ASKED = ("interval_ms", "idle_s", "declared_convention", "current_path", "voltage_path",
                "status_path")
"""The EnergyRecord fields a resumed run must match."""


@dataclass(frozen=True)
class ResultsManifest:
    """`manifest.json` of a results directory: the run's inputs and their hashes. Replay runs fill
    the replay fields, native runs the native ones; the others keep their defaults."""

    mode: Source
    """Replay (priced from profiles) or native (decoded on a device)."""
    environment: Environment
    """The session(s) that wrote the run (schemas/environment.py)."""
    windows: WindowsInput
    methods: tuple[str, ...] = field(metadata=rule(expected="a list of configuration labels (strings)"))
    """The configuration labels asked for, in order."""
    traces: Mapping[str, TraceInput] = field(default_factory=dict)
    """Replay: drafter name -> the traces file read for it."""
    profiles: tuple[ProfileInput, ...] = ()
    """Replay: the profiles priced with, one per device@placement."""
    depth_policy: str = ""
    """Replay: how costs are priced between and outside measured depths (pricing.DEPTH_POLICY)."""
    sensitivity: bool = False
    """Replay: the cost fill-in variants were replayed too (`run --sensitivity`)."""
    device: str = ""
    """Native: the device@placement the rows are named by."""
    target: ModelId | None = None
    """Native: the target model file."""
    drafters: tuple[ModelId, ...] = ()
    """Native: every drafter given (`--drafter`, in order; the prompt-lookup drafter's sha256 is its
    fixed identity); each row names its own by `drafter` and `drafter_sha256`."""
    templates: Mapping[str, str] = field(default_factory=dict, metadata=rule(expected=_TEMPLATES))
    """Native: 'target' and each drafter's name -> the chat template its prompts were rendered with."""
    placement: Placement | None = None
    """Native: where each lane ran."""
    placement_profile: ProfileInput | None = None
    """Native: the profile the placement came from (None: the placement was asked directly)."""
    reference: str = ""
    """Native: what outputs were checked against: 'trace' or 'target-only output'."""
    repeats: Repeats | None = field(default=None, metadata=rule(omit=True))
    """Native: --runs/--warmup when not 1/0."""
    energy: EnergyRecord | None = field(default=None, metadata=rule(omit=True))
    """Native: the battery sampling (`--energy-interval`); None: not asked."""

    @property
    def command(self) -> str:
        """The command that started the run, as a shell line to rerun it ("" when argv is unknown)."""
        argv = self.environment.argv
        return shlex.join(["specbench", *argv[1:]]) if argv else ""

    def builds_and_models(self) -> str:
        """The runner build and models the run ran with, on one line for a report's inputs (a
        replay run's come from its profiles' environments); "" when none is recorded."""
        envs = [self.environment] + [p.environment for p in self.profiles if p.environment is not None]
        parts: list[str] = []
        for env in envs:
            if env.runner is not None:
                parts.append(f"runner {env.runner.sha256[:12]} (llama.cpp {env.runner.llama_cpp_commit[:8]})")
            parts += [f"{m.role} {m.name}: {m.desc}, {m.n_params:,} params, {m.size_bytes:,} B, "
                      f"sha256 {m.sha256[:12]}" for m in env.models]
        return "; ".join(dict.fromkeys(parts))


def _profile_input_doc(profile: ProfileInput) -> dict:
    doc = to_dict(profile)
    if profile.device is not None:  # a replay run's entry names its runner build, null when it records none
        doc.setdefault("runner_sha256", None)
    return doc


_HEADER = ("kind", "schema_version")
_COMMON_KEYS = ("mode", ENV_KEY, "windows", "methods")
_MODE_KEYS = {Source.REPLAY: ("traces", "profiles", "depth_policy", "sensitivity"),
              Source.NATIVE: ("device", "target", "drafters", "templates", "placement", "placement_profile",
                              "reference", "repeats", "energy")}
"""The keys of each mode's manifest besides the header and _COMMON_KEYS ..."""
_OPTIONAL = ("repeats", "energy")
"""... all required but these."""
_REPLAY_ENTRY = ("device", "placement")
"""What a replay run's profile entry must name besides what a native run's does."""


def manifest_from_dict(doc: object, path: Path) -> ResultsManifest:
    """A manifest.json document (header included), validated: a wrong key or value is named
    with the file, the key and what was expected."""
    where = Where(path)
    check_header(doc, KIND, VERSIONS, where)
    assert isinstance(doc, dict)  # check_header refuses anything else
    mode = need(doc, "mode", str, where)
    if mode not in MODES:
        raise where.at("mode").fail(" or ".join(repr(m) for m in MODES), mode)
    own = _MODE_KEYS[mode]
    reject_unknown(doc, {*_HEADER, *_COMMON_KEYS, *own}, where)
    if doc.get(ENV_KEY) is None:
        raise where.at(ENV_KEY).fail("a mapping (missing; the session that wrote the run)")
    plans = {p.key: p for p in field_plans(ResultsManifest)}
    for key in _COMMON_KEYS + own:
        if key not in doc and key not in _OPTIONAL:
            raise where.at(key).fail(plans[key].missing)
    entry = doc.get("placement_profile")
    if isinstance(entry, dict):  # a native run's profile: the path, its hash and its warnings
        reject_unknown(entry, {"path", "sha256", "warnings"}, where.at("placement_profile"))
    manifest: ResultsManifest = from_dict(ResultsManifest, {k: v for k, v in doc.items() if k not in _HEADER}, where)
    for key in ("target", "placement") if mode == Source.NATIVE else ():
        if getattr(manifest, key) is None:
            raise where.at(key).fail("a mapping (not null)")
    for i, profile in enumerate(manifest.profiles):
        for key in _REPLAY_ENTRY:
            if getattr(profile, key) is None:
                raise where.at("profiles").at(i).at(key).fail(f"{'a string' if key == 'device' else 'a mapping'} "
                                                              "(missing)")
    models = {"target", *(d.name for d in manifest.drafters)}
    if not set(manifest.templates) <= models:
        raise where.at("templates").fail(_TEMPLATES, dict(manifest.templates))
    return manifest


def manifest_to_dict(manifest: ResultsManifest) -> dict:
    """The manifest.json document, header first (what `manifest_from_dict` reads back)."""
    doc = to_dict(manifest)
    if manifest.profiles:
        doc["profiles"] = [_profile_input_doc(p) for p in manifest.profiles]
    if manifest.placement_profile is not None:
        doc["placement_profile"] = _profile_input_doc(manifest.placement_profile)
    own = _MODE_KEYS[manifest.mode]
    return {"kind": KIND, "schema_version": VERSION, **{k: v for k, v in doc.items() if k in _COMMON_KEYS or k in own}}


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

    def open(self, manifest: ResultsManifest, resume: bool) -> set[tuple[str, str, str, str]]:
        """Start or resume a run; returns the keys of rows already done. A resumed manifest keeps
        its environment's first session and lists this one in `resumes` (schemas/environment.py).
        The directory's writer lock is taken first and held until `finish` or `close`: a second
        process writing it is refused with the holder's pid."""
        existed = set(self.directory.resolve().iterdir()) if self.directory.is_dir() else None
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock = WriterLock(self.directory, "results directory")
        try:
            done = self._open(manifest, resume)
        except BaseException:
            self.close()
            raise
        if self.fresh:
            _CREATED[self.directory.resolve()] = existed
        return done

    def close(self) -> None:
        """Give back the writer lock (the process's end gives it back too)."""
        lock = getattr(self, "_lock", None)
        if lock is not None:
            lock.release()

    def _open(self, manifest: ResultsManifest, resume: bool) -> set[tuple[str, str, str, str]]:
        if self.manifest_path.exists():
            if not resume:
                raise SpecbenchError(f"{self.directory}: results already exist",
                                     hint="pass --resume to continue that run, or choose another --out")
            old = read_manifest(self.manifest_path)
            old_doc, new_doc = manifest_to_dict(old), manifest_to_dict(manifest)
            for key in sorted(set(new_doc) | set(old_doc)):
                if key != ENV_KEY and _asked(key, old_doc.get(key)) != _asked(key, new_doc.get(key)):
                    raise SpecbenchError(f"{self.directory}: cannot resume: manifest field '{key}' differs "
                                         f"({_brief(old_doc.get(key))} before, {_brief(new_doc.get(key))} now)")
            env = resumed_environment(old.environment, manifest.environment, Where(self.manifest_path))
            write_atomic(self.manifest_path, _manifest_text(replace(old, environment=env)))
            frame = self.frame()
            return set(zip(frame["device"], frame["config"], frame["window_id"], frame["cost_fit"], strict=False))
        write_atomic(self.manifest_path, _manifest_text(manifest))
        self.rows_path.touch()
        self.fresh = True
        return set()

    def finish(self, at: str, models: Sequence[LoadedModel] = (), after: Mapping | None = None) -> None:
        """Record the end of this session in the manifest's environment (`Environment.finish`)."""
        manifest = read_manifest(self.manifest_path)
        write_atomic(self.manifest_path,
                     _manifest_text(replace(manifest, environment=manifest.environment.finish(at, models, after))))
        self.close()

    def set_energy(self, energy: EnergyRecord) -> None:
        """Record what this session's battery sampling found (no source, convention, idle draw)."""
        manifest = read_manifest(self.manifest_path)
        write_atomic(self.manifest_path, _manifest_text(replace(manifest, energy=energy)))

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
        # a producer's missing value (energy, category, drafter sha256, decisions) is NaN in a column; the file
        # holds null
        frame = frame.assign(**{c: frame[c].astype(object).where(frame[c].notna(), None) for c in _NULL_FILLED})
        append_jsonl(self.rows_path, frame[list(ROW_FIELDS)].to_dict("records"))

    def frame(self) -> pd.DataFrame:
        """All complete rows, validated: a bad line is named by its number."""
        if not self.rows_path.exists():
            return pd.DataFrame(columns=list(ROW_FIELDS))
        read_manifest(self.manifest_path)  # rows of another format version are not read
        data = self.rows_path.read_bytes()
        complete = data if data.endswith(b"\n") else data[: data.rfind(b"\n") + 1]
        self.cut_line = complete.count(b"\n") + 1 if len(complete) < len(data) else None
        docs = []
        required = set(ROW_FIELDS)  # every key: a file of this version writes them all
        numbers = []
        for number, line in enumerate(complete.decode("utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                doc = json.loads(line)
            except json.JSONDecodeError as exc:
                raise SpecbenchError(f"{self.rows_path}: line {number} is not valid JSON ({exc.msg})") from None
            if not isinstance(doc, dict) or not required <= doc.keys():
                row_from_dict(doc, Where(self.rows_path, f"line {number}"))  # raises, naming the key
            if not doc.keys() <= required:
                reject_unknown(doc, required, Where(self.rows_path, f"line {number}"))
            docs.append(doc)
            numbers.append(number)
        frame = rows_frame(docs)
        for name in COUNT_VECTORS:
            column = frame[name]
            if not column.map(lambda v, k=name: _is(v, k) or (not isinstance(v, list) and pd.isna(v))).all():
                bad_row = int(np.argmax((~column.map(lambda v, k=name: _is(v, k))).to_numpy()))
                row_from_dict(docs[bad_row], Where(self.rows_path, f"row {bad_row + 1}"))
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
            inferred = pd.api.types.infer_dtype(frame[name], skipna=name in NULLABLE)
            if inferred not in _INFERRED[kind] and not (name in NULLABLE and inferred == "empty"):
                bad = ~frame[name].map(lambda v, k=name: _is(v, k))  # the slow path only finds the line
                bad_row = int(np.argmax(bad.to_numpy()))
                row_from_dict(docs[bad_row], Where(self.rows_path, f"row {bad_row + 1}"))
        bad_samples = ~frame[SAMPLES].map(_samples_ok)
        if bad_samples.any():
            bad_row = int(np.argmax(bad_samples.to_numpy()))
            row_from_dict(docs[bad_row], Where(self.rows_path, f"row {bad_row + 1}"))
        _check_ranges(frame, self.rows_path, numbers)
        _check_configs(frame, self.rows_path)
        _check_positions(frame, self.rows_path)
        _check_unique(frame, self.rows_path, numbers)
        return frame

    cut_line: int | None = None
    """After `frame`: the number of a last line an interrupted write cut short (left out), or None."""
    fresh: bool = False
    """After `open`: this run wrote the manifest (the directory held no run)."""

    def rows(self) -> list[WindowResult]:
        return [WindowResult(**doc) for doc in self.frame().to_dict("records")]


def _asked(key: str, value: object) -> object:
    """What a resume compares of a manifest field: of `energy`, only what was asked."""
    if key == "energy" and isinstance(value, dict):
        return {name: value.get(name) for name in ENERGY_ASKED}
    return value


def _brief(value: object) -> str:
    text = repr(value)
    return text if len(text) < 80 else text[:77] + "..."


def _manifest_text(manifest: ResultsManifest) -> str:
    return json.dumps(manifest_to_dict(manifest), indent=2, sort_keys=False) + "\n"


_CREATED: dict[Path, set[Path] | None] = {}
"""Results directories whose manifest this process wrote fresh -> what the directory held before
(None: it did not exist): what `removed_if_refused` may remove."""


@contextmanager
def removed_if_refused(directory: Path) -> Iterator[None]:
    """Around a run into `directory`: when the run is refused (a SpecbenchError) before it wrote a
    row, what it created there is removed, so that the corrected rerun is not refused as a resume
    of it; a run that wrote rows, a resumed one, or an interrupted one keeps everything. Whatever
    the end, the directory's writer lock is given back."""
    key = Path(directory).resolve()
    try:
        yield
    except SpecbenchError:
        before = _CREATED.get(key, ...)
        rows = key / ROWS
        if before is not ... and key.is_dir() and (not rows.exists() or rows.stat().st_size == 0):
            if before is None:
                shutil.rmtree(key, ignore_errors=True)
            else:
                for path in set(key.iterdir()) - before:
                    if path.is_dir():
                        shutil.rmtree(path, ignore_errors=True)
                    else:
                        path.unlink(missing_ok=True)
        raise
    finally:
        _CREATED.pop(key, None)
        WriterLock.drop(key)


def resumed_environment(before: Environment, new: Environment, where: Where) -> Environment:
    """The environment of a resumed run: the old one continued by this session's; the runner
    build and the device must be the ones the run began with (their rows would not compare)."""
    for key, was, now in (("runner", before.runner, new.runner), ("device", before.device, new.device)):
        if isinstance(was, DeviceEnvironment) and isinstance(now, DeviceEnvironment):  # its state may change
            was, now = replace(was, governor=None, snapshot={}), replace(now, governor=None, snapshot={})
        if was is not None and now is not None and was != now:
            raise SpecbenchError(f"{where.path}: cannot resume: manifest field '{ENV_KEY}.{key}' differs "
                                 f"({_brief(was)} before, {_brief(now)} now)",
                                 hint="finish the run with the runner and device it began with, or use another --out")
    return continued(before, new)


def read_manifest(path: Path) -> ResultsManifest:
    """The manifest.json at `path`, validated."""
    return manifest_from_dict(load_json(path), Path(path))


def load_results(directory: Path, notes: list[str] | None = None) -> tuple[ResultsManifest, pd.DataFrame]:
    """A results directory's manifest and rows. Every configuration of a device is kept to the
    windows they all have (a run that did not finish, or a row cut short by an interruption, would
    pool methods over different windows); what was left out is said in `notes`."""
    directory = Path(directory)
    if not (directory / MANIFEST).exists():
        raise SpecbenchError(f"{directory}: not a results directory (no {MANIFEST})",
                             hint="pass the --out directory of `specbench run`")
    results = ResultsDir(directory)
    manifest, frame = read_manifest(results.manifest_path), results.frame()
    said = []
    if results.cut_line is not None:
        said.append(f"warning: {results.rows_path}:{results.cut_line}: a row cut short by an interrupted write "
                    "is left out")
    frame, dropped = same_windows(frame)
    if dropped:
        unfinished = " (the run did not finish)" if manifest.environment.finished is None else ""
        said.append(f"warning: {results.rows_path}: {dropped} window(s) lack a row of some configuration{unfinished}; "
                    "every configuration is pooled over the windows they all have")
    if notes is not None:
        notes += said
    return manifest, frame


def same_windows(frame: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """The rows of the windows every configuration of a (device, cost_fit, source) has, and how
    many (device, cost_fit, source, window) were left out."""
    if frame.empty:
        return frame, 0
    group = ["device", "cost_fit", "source"]
    configs = frame.groupby(group, sort=False)["config"].transform("nunique")
    per_window = frame.groupby([*group, "window_id"], sort=False)["config"].transform("nunique")
    keep = (per_window == configs).to_numpy()
    if keep.all():
        return frame, 0
    dropped = frame.loc[~keep, [*group, "window_id"]].drop_duplicates()
    return frame[keep].reset_index(drop=True), len(dropped)


def profile_warnings(manifests: Sequence[ResultsManifest]) -> pd.DataFrame:
    """The stability warnings of the profiles the runs used, as each manifest copied them (a
    replay run's `profiles[].warnings`, a native run's `placement_profile.warnings`): one row
    per (device, profile, timing), each once."""
    out = []
    for manifest in manifests:
        entries = [(p.device or "?", p) for p in manifest.profiles]
        if manifest.placement_profile is not None:
            entries.append((manifest.device, manifest.placement_profile))
        for device, entry in entries:
            out += [{"device": device, "profile": entry.path, **asdict(w)} for w in entry.warnings]
    columns = ["device", "profile", *(f.name for f in fields(StabilityWarning))]
    return pd.DataFrame(out, columns=columns).drop_duplicates(ignore_index=True)
