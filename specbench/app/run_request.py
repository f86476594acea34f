"""`specbench run`'s options as one request: RunRequest, with its --native half (NativeOptions);
app/run.py runs it, app/study.py replays it and app/device_runs.py runs it on devices."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from specbench.app.options import PhoneOptions


@dataclass(frozen=True)
class NativeOptions:
    """`run`'s --native options, as given."""

    native: bool
    """--native: run on a device instead of replaying."""
    device: str | None
    """--device: local or phone serials, comma-separated."""
    target: Path | None
    """--target: the target model file."""
    placement: str | None
    """--placement: split, shared or an explicit placement (None: the profile's, else shared)."""
    target_mmproj: Path | None
    """--target-mmproj: the target's audio projector."""
    drafter_mmproj: tuple[str, ...]
    """--drafter-mmproj [NAME=]PATH, as given: a drafter's audio projector."""
    templates: tuple[str, ...]
    """--template NAME=TEMPLATE, as given."""
    runs: str | None
    """--runs as typed (checked by `repeat_counts`, naming the flag)."""
    warmup: str | None
    """--warmup as typed."""
    sustained: str | None = None
    """--sustained DURATION as typed (checked by `sustained_load`)."""
    pace: str | None = None
    """--pace realtime|back-to-back (None: not given; realtime)."""
    rate: float | None = None
    """--rate: requests per second for windows without an audio duration."""
    no_cooldown: bool = False
    """--no-cooldown: no cool-down between a sustained run's streams."""
    energy_interval_ms: int = 0
    """--energy-interval: milliseconds between battery samples (0: off)."""
    energy_idle_s: float | None = None
    """--energy-idle: seconds of idle draw measured before the first window (None: not given, 5)."""
    energy_convention: str | None = None
    """--energy-convention as typed (None: detected)."""
    energy_paths: str | None = None
    """--energy-paths CURRENT,VOLTAGE,STATUS as typed (None: the battery's usual files)."""
    reuse_encoder: bool = False
    """--reuse-encoder: a Whisper model encodes each window once per job."""

    @property
    def asked(self) -> bool:
        """A native run was asked for (by --native, or by a flag only a native run reads)."""
        return self.native or self.device is not None or self.target is not None


@dataclass(frozen=True)
class RunRequest:
    """`run`'s options, as given."""

    windows: Path
    """WINDOWS: the windows file."""
    traces_dir: Path | None
    """--traces: what replay prices; with --native, the reference outputs and decisions."""
    profile_paths: tuple[Path, ...]
    """--profile, each time given: a device profile (replay), the placement to run in (--native)."""
    method_names: str | None
    """--methods as typed (None: not given)."""
    method_specs: tuple[str, ...]
    """--method, each time given."""
    drafter_specs: tuple[str, ...]
    """--drafter, each time given: NAME (replay) or NAME=PATH (--native)."""
    budget_path: Path | None
    """--budget: a budget file whose configuration replaces the default as2d."""
    split: str | None
    """--split: only windows of this split (None: all)."""
    out: Path | None
    """--out: the results directory (None: results/<profile names>, or results/native-<device>)."""
    resume: bool
    """--resume: continue an interrupted run in `out`."""
    sensitivity: bool
    """--sensitivity: also replay with the cost fill-in variants."""
    workers: int | None
    """--workers: replay processes (None: one per CPU)."""
    native: NativeOptions
    """The --native options."""
    phone: PhoneOptions = PhoneOptions()
    """The phone options (--native on phones)."""
