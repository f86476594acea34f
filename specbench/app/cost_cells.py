"""The cost cells a set of configurations needs a profile to hold: the widths each configuration's replay prices
(`study.check_costs` requires each), widened to what the traces ask of a cross-vocabulary drafter, as one
sweep of a device in one placement (`demo`, `validate`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from specbench.core.methods.base import Model
from specbench.core.methods.configs import As2dConfig, MethodConfig, SdConfig, SpecAsrConfig, TargetConfig
from specbench.core.repetitions import DEFAULT_MAX_REPETITIONS, MIN_REPETITIONS
from specbench.core.replay.reference import decode_serial
from specbench.errors import SpecbenchError
from specbench.schemas.placement import Placement
from specbench.schemas.traces import TraceFile, load_trace_file
from specbench.schemas.windows import Window
from specbench.world.profiling import SweepPlan


def needed_widths(config: MethodConfig, lookup: bool = False) -> tuple[int, int]:
    """(largest target width, largest drafter forward) a configuration can use; `lookup`: its
    drafter is the prompt-lookup drafter, whose one op a round has width 1."""
    if isinstance(config, TargetConfig):
        return 1, 0
    if isinstance(config, SdConfig):
        return config.width, 1 if lookup else 2
    if isinstance(config, SpecAsrConfig):
        return config.k_max + 1, max(config.k_max, 2)
    return config.budget + 1, 1


def sweep_plan(configs: Sequence[MethodConfig], placement: Placement, depths: tuple[int, ...],
               precision: float | None = None, max_repetitions: int = DEFAULT_MAX_REPETITIONS,
               traced: dict[str, int] | None = None, repetitions: int = MIN_REPETITIONS,
               encoder: bool = True) -> SweepPlan:
    """Exactly the cells the configurations' replay prices (`study.check_costs` requires each): target
    widths 1..the largest any configuration uses; per drafter, its own configurations' drafter widths,
    widened to `traced` (`traced_drafter_widths`); the all-rows table only for SpecASR's drafters;
    co-scheduled widths 1..B + 1 per AS2D drafter; at `depths`, in one placement. Each cell takes
    `repetitions` forwards, or (with `precision`) as many as its median needs (at least `repetitions`), up to
    `max_repetitions`. `encoder`: time each Whisper model's encoder too (`audio_prefill_s`, which no replay
    prices)."""
    target_max = max(needed_widths(c)[0] for c in configs)
    drafter_max: dict[str, int] = dict(traced or {})
    as2d_max: dict[str, int] = {}
    for c in configs:
        name = getattr(c, "drafter", None)
        if name:
            drafter_max[name] = max(drafter_max.get(name, 1), needed_widths(c)[1])
        if isinstance(c, As2dConfig) and name:
            as2d_max[name] = max(as2d_max.get(name, 1), needed_widths(c)[0])
    specasr = frozenset(c.drafter for c in configs if isinstance(c, SpecAsrConfig) and c.drafter)
    return SweepPlan(tuple(range(1, target_max + 1)), tuple(range(1, max(drafter_max.values(), default=1) + 1)),
                     depths, placement, repetitions, cosched_widths={name: tuple(range(1, w + 1))
                                                                     for name, w in as2d_max.items()},
                     all_rows=specasr, precision=precision, max_repetitions=max_repetitions,
                     drafter_widths_of={name: tuple(range(1, w + 1)) for name, w in drafter_max.items()},
                     encoder=encoder)


def traced_drafter_widths(traces_dir: Path, windows: Sequence[Window],
                          configs: Sequence[MethodConfig]) -> dict[str, int]:
    """Per drafter, the widest drafter forward the serial methods' replay prices on these traces: a
    drafter with another vocabulary re-ingests the committed text retokenized, as wide as the text
    needs, which `needed_widths` cannot bound. A window replay refuses is left to the replay to name."""
    widest: dict[str, int] = {}
    files: dict[str, TraceFile] = {}
    for config in configs:
        name = getattr(config, "drafter", None)
        if not name or not isinstance(config, SdConfig | SpecAsrConfig):
            continue
        if name not in files:
            files[name] = load_trace_file(traces_dir / f"{name}.jsonl")
        for window in windows:
            trace = files[name].windows.get(window.window_id)
            if trace is None:
                continue
            try:
                ops = decode_serial(replace(config, drafter=None), trace, window.cap, name).ops
            except SpecbenchError:
                continue
            widths = [op.width for op in ops if op.model is Model.DRAFTER]
            widest[name] = max([widest.get(name, 1), *widths])
    return widest
