"""The runner's jobs, typed (specbench/native/README.md, Protocol): one record per mode, written as the JSON
object the runner reads by `to_dict`. A key left at its default is left out, so that a runner without it
still serves the job; the model objects, methods and windows inside are the runner's own objects
(`model_files.model_job`, `decode_run.method_job`, `tracing.Prompts.runner_window`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from specbench.schemas.fileio import rule, to_dict

_OMIT = rule(omit=True)


@dataclass(frozen=True)
class Probe:
    """A reference probe: after one untimed forward, `repetitions` width-1 forwards per model, their median."""

    repetitions: int


@dataclass(frozen=True)
class RunnerJob:
    """What every job is: a mode, and its keys."""

    mode: ClassVar[str]

    def to_dict(self) -> dict:
        """The job as the runner reads it: `mode` first, then every key not at its default."""
        return {"mode": self.mode} | to_dict(self)


@dataclass(frozen=True)
class DecodeJob(RunnerJob):
    """`decode`: the methods run for real on the windows (native/README.md, `decode`)."""

    mode: ClassVar[str] = "decode"
    target: dict
    """The target's model object, with its lane."""
    methods: list[dict]
    """The methods, in the order each window runs them."""
    windows: list[dict]
    drafter: dict | None = field(default=None, metadata=_OMIT)
    """The drafter's model object (None: target-only)."""
    warmup: bool | None = field(default=None, metadata=_OMIT)
    """One untimed forward per model before the first window (None: the runner's default, true)."""
    runs: int | None = field(default=None, metadata=_OMIT)
    """Timed decodes of every method per window (None: the runner's default, 1)."""
    warmup_runs: int | None = field(default=None, metadata=_OMIT)
    """Untimed decodes of every method on the first window first (None: the runner's default, 0)."""
    alternate: bool = field(default=False, metadata=_OMIT)
    """Every second run takes the methods in reverse order."""
    probe: Probe | None = field(default=None, metadata=_OMIT)
    """A reference probe before a window's first decode and after each window."""
    reuse_audio_prefill: bool = field(default=False, metadata=_OMIT)
    """A Whisper model encodes each window once for all its decodes (none of them times it)."""
    energy: dict | None = field(default=None, metadata=_OMIT)
    """Battery sampling (`native_energy.EnergySettings.job`)."""
    pace: dict | None = field(default=None, metadata=_OMIT)
    """A paced stream instead of one decode per window: its duration and arrival gaps."""


@dataclass(frozen=True)
class ProbeJob(RunnerJob):
    """`probe`: one reference probe of the target (and the drafter) on its own (native/README.md, `probe`)."""

    mode: ClassVar[str] = "probe"
    target: dict
    probe: Probe
    where: str
    """Where in a validation block the probe ran, echoed in its result."""
    drafter: dict | None = field(default=None, metadata=_OMIT)


@dataclass(frozen=True)
class SweepJob(RunnerJob):
    """`sweep`: the cost tables, every (model, width, depth) cell timed (native/README.md, `sweep`)."""

    mode: ClassVar[str] = "sweep"
    target: dict
    widths: list[int]
    """Target widths (empty with a drafter: the drafter's tables only)."""
    depths: list[int]
    warmup: int
    """Untimed forwards of every width per model and depth."""
    seed: int
    """Of the random tokens the forwards read."""
    repetitions: int | None = field(default=None, metadata=_OMIT)
    """A fixed count of timed forwards per cell (None: to `precision`)."""
    precision: float | None = field(default=None, metadata=_OMIT)
    """Each cell timed until its median is known to this fraction (None: a fixed count)."""
    min_repetitions: int | None = field(default=None, metadata=_OMIT)
    max_repetitions: int | None = field(default=None, metadata=_OMIT)
    drafter: dict | None = field(default=None, metadata=_OMIT)
    drafter_widths: list[int] | None = field(default=None, metadata=_OMIT)
    drafter_logits: str | None = field(default=None, metadata=_OMIT)
    """`last` (a row of logits) or `all` (a row per token: SpecASR's ingest)."""
    encoder: bool | None = field(default=None, metadata=_OMIT)
    """False: a Whisper model's encoder is not timed again (None: the runner's default, timed)."""


@dataclass(frozen=True)
class CoschedJob(RunnerJob):
    """`cosched`: the two lanes alone and together, per (width, depth) cell (native/README.md, `cosched`)."""

    mode: ClassVar[str] = "cosched"
    target: dict
    drafter: dict
    warmup: int
    cells: list[list[int]]
    """[target width, depth] of each cell measured."""
    repetitions: int
    """Target forwards per side and cell."""
    seed: int


@dataclass(frozen=True)
class TokenizeJob(RunnerJob):
    """`tokenize`: texts into the model's tokens, through its chat template or as they are."""

    mode: ClassVar[str] = "tokenize"
    model: dict
    """{"path": the model on the device}."""
    texts: list[str]
    chat: bool
    """Each text as a user message through the chat template (False: the text itself)."""
    template: str | None = field(default=None, metadata=_OMIT)
    """A llama.cpp built-in template ("": the model's own)."""
    system: str | None = field(default=None, metadata=_OMIT)
    """The system message before each text."""
    add_special: bool | None = field(default=None, metadata=_OMIT)
    parse_special: bool | None = field(default=None, metadata=_OMIT)


@dataclass(frozen=True)
class TraceJob(RunnerJob):
    """`trace`: what the target and the drafter decide on each window, no timing (native/README.md, `trace`)."""

    mode: ClassVar[str] = "trace"
    target: dict
    drafter: dict
    k_max: int
    """Drafts per trace row."""
    producer: bool
    """Record AS2D's producer stream too."""
    windows: list[dict]
    specasr: list[dict] | None = field(default=None, metadata=_OMIT)
    """SpecASR's configurations ({k_max, tau}) whose recycling answers the trace records."""
    threads: int | None = field(default=None, metadata=_OMIT)


@dataclass(frozen=True)
class DivergenceJob(RunnerJob):
    """`divergence`: the margins at each differing position, width 1 against the decode's forwards."""

    mode: ClassVar[str] = "divergence"
    target: dict
    windows: list[dict]
    cases: list[dict]
    """{window_id, position, got, forwards} per divergence."""
    n_ctx: int | None = field(default=None, metadata=_OMIT)
    """The decode's context size (None: sized from the job)."""
