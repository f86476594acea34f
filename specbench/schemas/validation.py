"""Validation directories (`specbench validate`): one typed record per file kind.

    <out>/validation.json     kind specbench.validation, schema_version, the run's inputs and settings
    <out>/blocks.jsonl        one BlockRecord per block attempt (voided ones too): its order and drift
    <out>/decodes.jsonl       one DecodeRecord per native decode of a kept block attempt
    <out>/probes.jsonl        one ProbeRecord per reference probe of a block attempt
    <out>/observations.jsonl  one ObservationRecord per (device, configuration, metric, block, window)
    <out>/summary.jsonl       one SummaryRecord per (device, configuration, metric)
    <out>/ops.jsonl           one OpRecord per (device, model, width, depth bin): decode vs profile
    <out>/decomposition.jsonl one DecompositionRecord per (device, AS2D configuration, part of its speedup bias)
    <out>/crossfit.jsonl      one CrossFitRecord per (device, configuration, metric): the summary of the replay
                              priced with ratios measured beside the decodes
    <out>/profiles/           the full profile of each placement, and per block its two refreshes
                              and the profile replay priced it with

A block's records are appended only once the block is done, its BlockRecord last, so an
interrupted validation resumes at the first block without one and no half block is read.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Iterator, Sequence
from dataclasses import MISSING, asdict, dataclass, fields
from enum import Enum
from pathlib import Path
from typing import Protocol, TypeVar

from specbench.errors import SpecbenchError
from specbench.schemas.fileio import (
    StrEnum,
    Where,
    append_jsonl,
    check_header,
    dumps_line,
    iter_jsonl,
    load_json,
    write_atomic,
)

KIND = "specbench.validation"
# Format history (every change of shape bumps VERSION and adds a line; other versions are refused):
# 1 = first version.
# 2 = a DecodeRecord's ops keep the runner's lane timestamps and AS2D's per-op fields (t_us,
#     published, start, accepted, plan_us), and an AS2D decode keeps its `producer` timing record.
# 3 = a ProbeRecord keeps its bursts' samples, a BlockRecord the allowance its decisive window was held to
#     (the void rule weighs a window's move against the probes' scatter); version 2 is read with neither.
# 4 = a DecodeRecord names its repeat within its run (`validate --repeats`), and Na and Nb are separate passes over
#     the block's windows (versions 2 and 3 decoded a window's runs back to back; read as repeat 0).
VERSION = 4
VERSIONS = (2, 3, VERSION)
MANIFEST = "validation.json"


class PairedRun(StrEnum):
    """Which of a block's two native runs of a window a decode belongs to."""

    A = "a"
    """Na: the group's configurations in the block's random order."""
    B = "b"
    """Nb: the same order reversed."""


class Metric(StrEnum):
    """What an observation compares, replay against native."""

    SPEEDUP = "speedup"
    """Over target-only (native: against the target-only decode beside it)."""
    THROUGHPUT = "throughput"
    """Tokens per second."""


@dataclass(frozen=True)
class BlockRecord:
    block: int
    attempt: int
    """0 for the first try; a voided attempt is redone as attempt + 1."""
    device: str
    """device@placement."""
    windows: list[str]
    groups: list[str]
    """The drafter groups in the order their decode jobs ran."""
    methods: dict[str, list[str]]
    """Per group, the configurations in Na's order (Nb ran them reversed)."""
    seed: int
    drift_pct: float
    """The move of the block's decisive window, in percent: of the decode-job windows whose two probes both
    moved from their model's reference (the median of its probes around the refreshes) the same way, the one
    that moved most for its allowance, by the smaller of the two moves (version 2: the largest move of any
    probe from its model's first probe of the block)."""
    drift_series: str
    """Which model and window that was (e.g. "target in decode:<group> after <window>"; version 2: the model
    and series of the probe)."""
    voided: bool
    kept_after_voids: bool
    """Kept although its drift exceeds the allowance: the redo budget was spent."""
    started: str
    wall_s: float
    allowance_pct: float | None = None
    """The move that window's model was allowed: the larger of --probe-threshold and --probe-spreads times the
    scatter of the model's probes in the block (None: version 2, which held every probe to the threshold)."""


OP_KEYS = ("model", "width", "depth", "us", "t_us", "published", "start", "accepted", "plan_us")
"""The keys of a runner op a DecodeRecord keeps (specbench/native/README.md, `decode`)."""
PRODUCER_KEYS = ("step", "steps", "stop", "published", "publish_us", "publish_count", "publish_step",
                 "step_start_us", "step_us", "started_us", "publish_cost_us")
"""The keys of an AS2D decode's `producer` record a DecodeRecord keeps: its timing and the step that
made each token (the tokens themselves are the trace's)."""


@dataclass(frozen=True)
class DecodeRecord:
    block: int
    attempt: int
    device: str
    group: str
    run: PairedRun
    slot: int
    config: str
    window_id: str
    tokens: int
    decode_s: float
    lossless: bool
    ops: list[dict]
    """The runner's op log, each op's OP_KEYS it reports: model, width, depth, us; for AS2D also
    t_us (the forward's start on the decode clock), published, start, accepted, plan_us."""
    producer: dict | None = None
    """AS2D: the producer's timing record, its PRODUCER_KEYS (publication times, counts and steps,
    each drafter step's start and end on the decode clock), so that the lanes' overlap and the
    publication times can be recovered; None for the serial methods."""
    repeat: int = 0
    """Which of the run's `--repeats` passes over the block's windows decoded it (0 first)."""


def decode_series(group: str, run: PairedRun, repeat: int) -> str:
    """The probe series of one decode pass: 'decode:<group> <run><repeat>' ('decode:smollm2 a0')."""
    return f"decode:{group} {run.value}{repeat}"


def series_pass(series: str) -> tuple[PairedRun, int] | None:
    """The (run, repeat) a `decode_series` names; None for a refresh's series, or a decode job's written before
    Na and Nb were passes of their own ('decode:<group>', one job for both runs)."""
    if not series.startswith("decode:") or " " not in series:
        return None
    tag = series.rsplit(" ", 1)[1]
    return PairedRun(tag[0]), int(tag[1:])


@dataclass(frozen=True)
class ProbeRecord:
    block: int
    attempt: int
    device: str
    series: str
    """refresh:<drafter> (a probe job beside a refresh) or `decode_series` (inside a decode job)."""
    where: str
    window_id: str | None
    drafter: str | None
    target_us: float
    drafter_us: float | None
    run_queue_wait_us: int
    """Cumulative run-queue wait of the runner's threads (-1: no schedstat)."""
    steal_ticks: int
    """Cumulative steal of /proc/stat (-1: none)."""
    cpu_khz: list[int]
    t_us: int
    target_samples_us: list[float] | None = None
    """The target's burst: every timed forward behind `target_us` (None: version 2, not kept)."""
    drafter_samples_us: list[float] | None = None
    """The drafter's burst behind `drafter_us`."""


@dataclass(frozen=True)
class ObservationRecord:
    """One (device, configuration, metric, block, window): replay's value and the two native runs'
    (core/fidelity.py)."""

    device: str
    config: str
    metric: Metric
    block: int
    window_id: str
    replay: float
    native_a: float
    native_b: float


@dataclass(frozen=True)
class SummaryRecord:
    """One (device, configuration, metric)'s fidelity (core/fidelity.py `fidelity_stats`): the statistics in
    log space (percent), their intervals over blocks (None with fewer than two blocks), the bounds and the
    verdict."""

    device: str
    config: str
    metric: Metric
    blocks: int
    observations: int
    f0_pct: float
    """The floor: the RMS of ln Na − ln Nb."""
    f0_low: float | None
    f0_high: float | None
    """The floor's 90% interval."""
    f1_pct: float
    """The RMS of replay against each single run."""
    f1_low: float | None
    f1_high: float | None
    excess_pct: float
    """The excess error E = sqrt(max(0, F1² − F0²/2))."""
    excess_upper_pct: float | None
    """The upper 95% bound of E (one-sided)."""
    bias: float
    """Geometric mean of replay / native."""
    bias_low: float | None
    bias_high: float | None
    """The 90% interval of the bias."""
    bias_bound_pct: float
    error_bound_pct: float
    verdict: str
    """core/fidelity.py `verdict`: the equivalence test against the two bounds, in words."""
    past_allowance: int = 0
    """Of `blocks`, those kept although their drift exceeded its allowance (the redo budget, --max-voids, was
    spent): the verdict names them, since the void rule judged them disturbed."""
    blocks_needed: int | None = None
    """With two or more blocks, the fewest that would show both bounds at the measured bias, E and the blocks'
    spread (core/fidelity.py `blocks_needed`; None: none would, or one block); the verdict names it when not
    shown."""


@dataclass(frozen=True)
class CrossFitRecord(SummaryRecord):
    """A SummaryRecord of the replay that prices each half of a block's windows with the ratios the other half's
    native decodes met (core/crossfit.py): the model's error without the drift between refreshes and decodes."""


@dataclass(frozen=True)
class OpRecord:
    device: str
    config: str
    model: str
    width: int
    depth_from: int
    forwards: int
    decode_mean_us: float
    decode_median_us: float
    profile_us: float
    decode_over_profile: float


@dataclass(frozen=True)
class DecompositionRecord:
    """One part of an AS2D configuration's speedup bias (core/decomposition.py): total = contention x
    publication x remains."""

    device: str
    config: str
    part: str
    """total, contention, publication or remains (core.decomposition.Part)."""
    blocks: int
    observations: int
    """The (block, window) observations decomposed."""
    left_out: int
    """Speedup observations of the configuration whose native lanes could not be read back (not decomposed)."""
    factor: float
    """Geometric mean of this part's ratio over the observations."""
    factor_low: float | None
    factor_high: float | None
    """Its 90% Student t interval over the blocks' means (None with one block)."""
    replay_bias: float | None
    """The bias (replay over native) of the replay with the substitutions up to this part; None for remains."""
    replay_low: float | None
    replay_high: float | None
    rho_priced: float | None
    """contention: the target's co-scheduling ratio the profile prices for the native forwards that ran wholly
    beside the producer (the blocks' mean, weighted by those forwards); None on the other parts or without any."""
    rho_realised: float | None
    """contention: the ratio those forwards realised, each block's pooled over its runs, the blocks' mean weighted
    by forwards."""
    excess_pct: float | None = None
    """The excess error E of the replay with the substitutions up to this part (a per-run substitution judged
    against its own run; core.decomposition.excess_errors); None for remains, or a file written before it."""
    excess_upper_pct: float | None = None
    """Its one-sided 95% upper bound (Student t over the blocks' means; None with one block)."""


FILES = {BlockRecord: "blocks.jsonl", DecodeRecord: "decodes.jsonl", ProbeRecord: "probes.jsonl",
         ObservationRecord: "observations.jsonl", SummaryRecord: "summary.jsonl", OpRecord: "ops.jsonl",
         DecompositionRecord: "decomposition.jsonl", CrossFitRecord: "crossfit.jsonl"}
Record = TypeVar("Record", BlockRecord, DecodeRecord, ProbeRecord, ObservationRecord, SummaryRecord, OpRecord,
                 DecompositionRecord, CrossFitRecord)


class Attempted(Protocol):
    """A record written by one attempt at one block of one device (blocks, decodes, probes)."""

    @property
    def device(self) -> str: ...
    @property
    def block(self) -> int: ...
    @property
    def attempt(self) -> int: ...


AttemptRecord = TypeVar("AttemptRecord", bound=Attempted)


def record_path(directory: Path, kind: type) -> Path:
    return Path(directory) / FILES[kind]


def append_records(directory: Path, records: Sequence) -> None:
    by_kind: dict[type, list] = {}
    for record in records:
        by_kind.setdefault(type(record), []).append(asdict(record))
    for kind, docs in by_kind.items():
        append_jsonl(record_path(directory, kind), docs)


def write_records(directory: Path, kind: type, records: Sequence) -> None:
    """Replace a derived file (observations, summary, ops) at once."""
    write_atomic(record_path(directory, kind), "".join(dumps_line(asdict(r)) for r in records))


def load_records(directory: Path, kind: type[Record]) -> list[Record]:
    path = record_path(directory, kind)
    if not path.exists():
        return []
    names = {f.name for f in fields(kind)}
    # a field with a default may be absent: version 2 wrote none of those version 3 added
    required = {f.name for f in fields(kind) if f.default is MISSING and f.default_factory is MISSING}
    hints = typing.get_type_hints(kind)
    enums = {name: tp for name, tp in hints.items() if isinstance(tp, type) and issubclass(tp, Enum)}
    out = []
    for line, doc in iter_jsonl(path):
        where = Where(path, f"line {line}")
        if not isinstance(doc, dict) or not required <= set(doc) <= names:
            missing = sorted(required - set(doc)) if isinstance(doc, dict) else []
            raise SpecbenchError(f"{where}: not a {kind.__name__} record"
                                 + (f" (missing '{missing[0]}')" if missing else ""))
        for name, enum in enums.items():
            if name in doc:
                try:
                    doc[name] = enum(doc[name])
                except ValueError:
                    raise where.at(name).fail(" or ".join(repr(m.value) for m in enum), doc[name]) from None
        out.append(kind(**doc))
    return out


def is_validation_dir(directory: Path) -> bool:
    return (Path(directory) / MANIFEST).is_file()


def read_manifest(directory: Path) -> dict:
    path = Path(directory) / MANIFEST
    doc = load_json(path)
    check_header(doc, KIND, VERSIONS, Where(path))
    return doc


STOPPING = ("min_blocks", "max_blocks", "halfwidth_pct")
"""Settings that only say when a validation stops: a resume may change them (more blocks narrow its intervals)."""


def open_validation(directory: Path, manifest: dict, resume: bool) -> None:
    """Start a validation directory, or resume one whose settings are the same (naming the one that differs) but
    for when it stops (STOPPING), which the resume's values replace."""
    directory = Path(directory)
    path = directory / MANIFEST
    doc = {"kind": KIND, "schema_version": VERSIONS[-1]} | manifest
    if path.exists():
        if not resume:
            raise SpecbenchError(f"{directory}: a validation already exists",
                                 hint="pass --resume to continue it, or choose another --out")
        old = read_manifest(directory)
        for key in sorted(set(doc) | set(old)):
            if key != "environment" and key not in STOPPING and old.get(key) != doc.get(key):
                raise SpecbenchError(f"{directory}: cannot resume: validation.json field '{key}' differs "
                                     f"({old.get(key)!r} before, {doc.get(key)!r} now)")
        stopping = {key: doc[key] for key in STOPPING if key in doc}
        if any(old.get(key) != value for key, value in stopping.items()):
            write_atomic(path, json.dumps(old | stopping, indent=2, sort_keys=True) + "\n")
        return
    directory.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(doc, indent=2, sort_keys=True) + "\n")


def kept_attempts(blocks: Sequence[BlockRecord]) -> dict[tuple[str, int], int]:
    """(device, block) -> the attempt that stands (the last one not voided)."""
    return {(b.device, b.block): b.attempt for b in blocks if not b.voided}


def kept(records: Sequence[AttemptRecord], blocks: Sequence[BlockRecord]) -> Iterator[AttemptRecord]:
    """The records of the attempts that stand (a voided or unfinished attempt's are dropped)."""
    stands = kept_attempts(blocks)
    for r in records:
        if stands.get((r.device, r.block)) == r.attempt:
            yield r
