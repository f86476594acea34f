"""timeline.jsonl of a sustained native run (`run --native --sustained`, docs/METHODS.md §6.3 Sustained load): one
`TimelineRecord` per request, its times on the runner's clock and the phone's thermal state after it. It lives
in a results directory and shares its manifest's format version (schemas/results.py's format history).

Light to import (no numpy or pandas): `run --help` lists the paces."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path

from specbench.schemas.fileio import StrEnum, Where, append_jsonl, from_dict, iter_jsonl, rule, to_dict

TIMELINE = "timeline.jsonl"
"""A sustained run's requests, one `TimelineRecord` per line."""


class Pace(StrEnum):
    """How a sustained run's requests arrive (docs/METHODS.md §6.3 Sustained load)."""

    REALTIME = "realtime"
    """As the audio would (a window's span), or at --rate."""
    BACK_TO_BACK = "back-to-back"
    """Each as soon as the previous one ends."""


PACES = tuple(p.value for p in Pace)
_STEP = rule(low=0, ranged=True)
_BY_NAME = rule(expected="a mapping of names to numbers")


@dataclass(frozen=True)
class TimelineRecord:
    """One request of a sustained run (docs/METHODS.md §6.3 Sustained load): when it arrived, started
    and ended on the runner's clock, what it decoded, and the phone's thermal state read from the
    host as its record arrived."""

    device: str
    """device@placement, as the rows name it."""
    config: str
    """The configuration label of the stream the request belongs to (each method runs its own stream)."""
    stream: int = field(metadata=_STEP)
    """The stream's position in the run (0 = first): later streams inherit the earlier ones' heat
    unless the phone cooled down between them (`cooldown`)."""
    pace: Pace
    cooldown: bool
    """The run asked for cool-down between streams (a phone cools before each stream after the first;
    this host never does); False: --no-cooldown, heat carries over from the earlier streams."""
    request: int = field(metadata=_STEP)
    """0-based index in the stream; it decodes window `request mod len(windows)`."""
    window_id: str
    window_sha256: str
    arrival_s: float
    """When the request arrived, seconds after the stream's zero on the runner's monotonic clock."""
    start_s: float
    """When its decode began (>= arrival_s; later when the previous request still ran)."""
    end_s: float
    """When its decode (prefills included) ended."""
    tokens: int = field(metadata=_STEP)
    """Tokens committed after the prefill (0 for a divergent output)."""
    decode_s: float
    """The decode clock of the request (docs/METHODS.md §1.3 Two clocks; 0 for a divergent output)."""
    lossless: bool
    """The output equals the reference (false: a divergence; no throughput is claimed)."""
    thermal_status: int | None
    """`dumpsys thermalservice` status 0..6 after the request (None: not readable on this device)."""
    zones_c: Mapping[str, float] = field(metadata=_BY_NAME)
    """Readable thermal zone temperatures after the request, °C, by `thermal_zoneN:type`."""
    cur_freq_khz: Mapping[str, int] = field(metadata=_BY_NAME)
    """scaling_cur_freq of each CPU policy after the request, kHz (readable ones)."""
    max_freq_khz: Mapping[str, int] = field(metadata=_BY_NAME)
    """scaling_max_freq of each CPU policy after the request, kHz: the cap throttling lowers."""
    snapshot_s: float
    """When the host asked for the snapshot, seconds after the stream's zero on the host's clock (aligned
    at the arrival of the runner's `paced` event): at or after end_s, later still when requests are
    shorter than a snapshot's round trip and snapshots fall behind."""
    snapshot_time: str
    """The snapshot's UTC time (ISO 8601, seconds)."""

    @property
    def queue_s(self) -> float:
        """Seconds the request waited for the previous one to finish."""
        return self.start_s - self.arrival_s

    @property
    def tokens_per_s(self) -> float:
        """The request's throughput on the decode clock (NaN for a divergent output)."""
        return self.tokens / self.decode_s if self.decode_s > 0 else float("nan")


TIMELINE_FIELDS = tuple(f.name for f in fields(TimelineRecord))


def _timeline_record(doc: object, where: Where) -> TimelineRecord:
    record: TimelineRecord = from_dict(TimelineRecord, doc, where)
    if not record.arrival_s <= record.start_s <= record.end_s:
        raise where.at("start_s").out_of_range(record.start_s, f"seconds in [arrival_s, end_s] = "
                                                               f"[{record.arrival_s}, {record.end_s}]")
    return record


def append_timeline(directory: Path, records: Iterable[TimelineRecord]) -> None:
    append_jsonl(Path(directory) / TIMELINE, (to_dict(r) for r in records))


def load_timeline(directory: Path) -> list[TimelineRecord]:
    """A results directory's timeline.jsonl, validated ([] when the run was not sustained)."""
    path = Path(directory) / TIMELINE
    if not path.exists():
        return []
    from specbench.schemas.results import MANIFEST, read_manifest

    read_manifest(Path(directory) / MANIFEST)  # a timeline of another format version is not read
    return [_timeline_record(doc, Where(path, f"line {number}")) for number, doc in iter_jsonl(path)]
