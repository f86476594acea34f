"""Device cost profiles (docs/METHODS.md §4 The device profile and its placement): measured forward costs and
co-scheduling slowdowns.

YAML layout (`kind: specbench.profile`, `schema_version: 7`), one `DeviceProfile`:

    environment: {...}   # schemas/environment.py: specbench, command, times, runner build, models, device
    device: {name, serial, model, soc, abi, ...}   # what the device says about itself
    placement: {name, target: {processor, cpus, threads}, drafter: {...}}   # docs/METHODS.md §4.1 Placement
    pinning: {lanes: {target: {cpus, read_back, threads}, drafter: {...}}}   # the runner's CPU sets, read back
    runner: {sha256, version, protocol, llama_cpp_commit, flags, path}   # a profile without `environment` (optional)
    snapshot: {before: {...}, after: {...}}   # device state before/after measuring (optional)
    target:  {model: {name, sha256}, processor, threads,
              costs: {depths: [...], seconds: {width: [per depth]}, spread: {width: [per depth]},
                      repetitions: {width: [per depth]}, achieved_precision: {width: [per depth]}, precision,
                      decode?: {realised, forwards,   # the model's forwards in serial decodes over the cells
                                single?: {realised, forwards}, wider?: {realised, forwards},   # per width class
                                host?: {seconds, forwards, single?: {seconds, forwards},   # host work after each
                                        wider?: {seconds, forwards}}}}}                    # forward, by class
    drafters:
      - {name, model: {...}, processor, threads, costs: {...}, costs_all_rows: {...},   # last row / every row
         cosched: {depths: [...], precision?,   # measured widths; precision: what the cells were measured to
                   ratios: {width: {rho_target: [..], rho_drafter: [..], repetitions?: [..],
                                    achieved_precision?: [..]}},   # per depth
                   decode?: {realised, priced, forwards,   # the target's ratio a native AS2D decode met
                             single?: {realised, forwards}, verify?: {realised, forwards},   # per width class
                             producer?: {realised, priced, forwards},   # the producer's ratio beside the target
                             below_one?: {realised?, single?, verify?, producer?}}}}   # measured below 1, priced as 1
    overheads: {producer_startup_s, publish_s, align_s}
    notes: how it was measured (free text, optional)
    warnings: [{model, table, width, depth, median_s, spread_pct, samples, precision?, achieved_precision?,
                ratio?, ratio_low?, ratio_high?}]
              # unstable timings, cells that stopped at the maximum short of the precision, and
              # co-scheduling ratios below 1 beyond their interval after a re-measurement (optional)

A drafter whose costs come from elsewhere (docs/METHODS.md §4.7 Declared drafter costs) carries `declared: {source,
fraction_of_target}` instead of `costs` (each forward of n tokens costs that fraction of the
target's CT(n, depth) in this profile), or `declared: {source}` beside a `costs` table another
harness measured. Replay prices them like measured costs; results and reports name them.

Costs are seconds per forward (core/pricing.py prices them), interpolated linearly in KV depth between measured depths
and held flat outside them (`DEPTH_POLICY`); a depth outside is flagged as extrapolated
(`CostTable.extrapolates`) and `with_depth_fit(CostFit.DEPTH_LINEAR)` gives the sensitivity variant that
extends the nearest measured segment instead. A width the profile lacks is an error. Widths
without a measured co-scheduling ratio use the median of the measured ratios and are
flagged as extrapolated; `with_ratio_fit("min"|"max")` gives the sensitivity variants.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from specbench.core.cosched import RHO_SLACK, reaches_one
from specbench.core.pricing import (
    CLASS_FORWARDS,
    DECODE_CLASSES,
    DEPTH_FITS,
    PRODUCER_CLASSES,
    RATIO_FITS,
    SERIAL_CLASSES,
    AfterProducer,
    CoSchedule,
    CostFit,
    CostTable,
    DecodeContention,
    DecodeRatio,
    HostWork,
    width_ranges,
)
from specbench.core.samples import UNSTABLE_SPREAD_PCT
from specbench.errors import MissingCostError, SpecbenchError
from specbench.schemas.environment import KEY as ENV_KEY
from specbench.schemas.environment import Environment, RunnerBuild, environment_to_dict, manifest_environment
from specbench.schemas.fileio import (
    Where,
    check_header,
    dump_yaml,
    from_dict,
    load_yaml,
    need,
    reject_unknown,
    rule,
    to_dict,
    write_atomic,
)
from specbench.schemas.placement import UNRECORDED_PLACEMENT, Placement, device_label, placement_from_dict

KIND = "specbench.profile"
# Format history (every change of shape bumps VERSION and adds a line; other versions are refused):
# 1 = first version.
# 2 = `placement` (required) and `pinning`: every table is measured in that placement; the
#     optional `environment` block holds the runner build (then no top-level `runner`), the
#     optional `warnings` the timings spread > 10% of their median.
# 3 = a cost table's `repetitions` is a count per cell ({width: [per depth]}) beside
#     `achieved_precision` per cell and the requested `precision` (absent: a fixed count); a warning
#     may carry `precision` and `achieved_precision` (a cell that hit the maximum short of it).
# 4 = co-scheduling ratios measured to the profile's precision: `cosched.precision`, and per width
#     `repetitions` and `achieved_precision` per depth; a warning may carry `ratio`, `ratio_low` and
#     `ratio_high` (a ratio below 1 beyond its interval, or short of 1 as the profile records it, after
#     a re-measurement of its cell).
# 5 = `cosched.decode` (optional): the target's co-scheduling ratio a short native AS2D decode realised,
#     priced in place of the cells' `rho_target`, and the one the cells price for the same forwards;
#     optionally per width class (`single`: width 1, `verify`: wider), each priced for its widths, and
#     `below_one`: what the decodes measured where it fell below 1 and is priced as 1; optionally `producer`,
#     the producer's ratio the same decodes realised, priced in place of the cells' `rho_drafter` (a reader
#     without it refuses the key rather than price the cells).
# 6 = a cost table's `decode` (optional): its model's forwards as short native serial decodes met them over the
#     cells' price, pooled (`realised`, `forwards`) and per width class (`single`: width 1, `wider`: wider), each
#     priced for its widths as a factor on the cells (a reader without it refuses the key rather than price the
#     cells alone).
# 7 = a cost table's `decode` may hold `host` (optional): the host work after each forward in the same decodes,
#     seconds per forward pooled (`seconds`, `forwards`) and per width class, priced after each forward (a reader
#     without it refuses the key rather than price the forwards alone).
VERSION = 7
VERSIONS = (VERSION,)


@dataclass(frozen=True)
class DeclaredCost:
    """Drafter costs this profile did not measure: where they come from, in the user's words."""

    source: str = field(metadata=rule(check=str.strip, expected="a non-empty text naming where the costs come from"))
    """Free text: what the cost is and where it was measured or derived, e.g. 'one decoder block + LM head'."""
    fraction_of_target: float | None = field(default=None, metadata=rule(
        low=0, above=True, omit=True, expected="a number > 0 (the share of the target's CT(n, depth))"))
    """Each drafter forward of n tokens costs this fraction of the target's CT(n, depth); None: a
    declared table (`costs`) measured by another harness."""

    @property
    def note(self) -> str:
        """How reports name it."""
        how = (f"{self.fraction_of_target:g} x the target's CT(n, depth)" if self.fraction_of_target is not None
               else "a table measured elsewhere")
        return f"{how}; source: {self.source}"


@dataclass(frozen=True)
class ModelId:
    """A model file as profiles, traces and manifests name it."""

    name: str
    """The model's name (the target's file stem, a drafter's --drafter NAME)."""
    sha256: str | None = field(default=None, metadata=rule(omit=True))
    """sha256 of the GGUF file (None: a hand-written profile that does not name the file)."""


_SECONDS = rule(low=0, expected="seconds: finite and >= 0")


@dataclass(frozen=True)
class Overheads:
    producer_startup_s: float = field(default=0.0, metadata=_SECONDS)
    """From the decode clock's start until the producer's first step begins."""
    publish_s: float = field(default=0.0, metadata=_SECONDS)
    """Producer-lane time to publish one batch."""
    align_s: float = field(default=0.0, metadata=_SECONDS)
    """Target-lane time for one realignment search."""
    producer_step_s: float | None = field(default=None, metadata=rule(low=0, omit=True,
                                                                    expected="seconds: finite and >= 0"))
    """Producer-lane host work of one producer step besides its forward and publishing: the greedy choice
    over the drafter's vocabulary, the text mapping of a cross-vocabulary draft, the stream's copy (None: not
    measured, as in profiles made before it was; priced as 0)."""


@dataclass(frozen=True)
class DrafterProfile:
    name: str
    """The drafter's name, as methods and traces name it."""
    model: ModelId
    processor: str
    """`cpu` or a ggml device name."""
    costs: CostTable
    """Forwards that keep the last row's logits (an AR step, an SD catch-up ingest)."""
    cosched: CoSchedule | None
    all_rows_costs: CostTable | None = None
    """Forwards that keep a logits row per token (SpecASR's recycling ingest reads them all)."""
    declared: DeclaredCost | None = None
    """Costs declared, not measured on this device (None: measured by `specbench profile`)."""
    threads: int | None = None
    """Threads its forwards ran with (None: not recorded)."""
    overheads: Overheads | None = None
    """AS2D's non-model costs measured with this drafter as the producer (None: the profile's, measured with its
    first drafter)."""

    def with_tables(self, change: Callable[[CostTable], CostTable]) -> DrafterProfile:
        """The same entry with `change` applied to its cost table and its all-rows table."""
        return replace(self, costs=change(self.costs),
                       all_rows_costs=None if self.all_rows_costs is None else change(self.all_rows_costs))

    def ingest_costs(self) -> CostTable:
        """The table a forward with a row per token is priced from; a profile without one (the
        table is optional) prices it like a last-row forward, slightly cheaper."""
        return self.all_rows_costs or self.costs


@dataclass(frozen=True)
class DeviceInfo:
    """The device a profile was measured on, as it described itself (`Device.describe`)."""

    name: str
    facts: Mapping[str, object] = field(default_factory=dict, metadata=rule(rest=True))
    """Everything else it said: kind, model, soc, abi, serial, cores, clusters..., as given."""


@dataclass(frozen=True)
class Snapshots:
    """The device's state (`Device.snapshot`) before the first and after the last measurement."""

    before: Mapping[str, object]
    after: Mapping[str, object]


_CPUS = rule(low=0, expected="a list of CPU numbers (integers >= 0)")


@dataclass(frozen=True)
class LanePinning:
    """One lane's CPU set as asked and as the runner read it back from the kernel."""

    cpus: tuple[int, ...] = field(metadata=_CPUS)
    """CPUs the lane was pinned to."""
    read_back: tuple[int, ...] = field(metadata=_CPUS)
    """CPUs its threads could run on, read back."""
    threads: int = field(metadata=rule(low=1))


_OMIT = rule(omit=True)


@dataclass(frozen=True)
class RunnerRecord:
    """The runner build of a profile that has no `environment` block (the key `runner`)."""

    sha256: str
    """sha256 of the runner binary."""
    version: str | None = field(default=None, metadata=_OMIT)
    protocol: int | None = field(default=None, metadata=_OMIT)
    llama_cpp_commit: str | None = field(default=None, metadata=_OMIT)
    flags: tuple[str, ...] | None = field(default=None, metadata=rule(omit=True,
                                                                      expected="a list of CMake flags (strings)"))
    """CMake flags of the build."""
    path: str | None = field(default=None, metadata=_OMIT)
    """Where the binary was on the host that measured."""


_FRACTION = rule(low=0, omit=True, expected="a fraction >= 0")
DECODE_TABLE = "cosched decode"
"""A warning's table for a `cosched.decode` ratio below 1, followed by its key (realised, single, verify)."""


def cosched_ratio_table(ratio: str) -> str:
    """A warning's table for a co-scheduling cell's ratio (rho_target or rho_drafter) below 1 beyond its interval
    after a re-measurement."""
    return f"cosched {ratio}"


@dataclass(frozen=True)
class StabilityWarning:
    """A timing of the profile whose samples spread more than UNSTABLE_SPREAD_PCT of their median
    (docs/METHODS.md §4.6 Stability warnings), as `pyperf check` warns."""

    model: str
    """The model's name (the target's file stem or the drafter's name)."""
    table: str
    """CT (target), CD (drafter, last-row logits), CD_all (drafter, every row), or a co-scheduling
    measurement: cosched target_alone | target_together | drafter_alone | drafter_together."""
    width: int
    """Forward width (tokens); for co-scheduling, the target's width."""
    depth: int
    """KV depth."""
    median_s: float
    spread_pct: float
    """100 x standard deviation / median of the samples."""
    samples: int
    precision: float | None = field(default=None, metadata=_FRACTION)
    """The precision the cell was measured to, when it stopped at the maximum count short of it
    (None: a spread warning only)."""
    achieved_precision: float | None = field(default=None, metadata=_FRACTION)
    """What the cell reached instead (with `precision`)."""
    ratio: float | None = field(default=None, metadata=_OMIT)
    """A co-scheduling ratio below 1 beyond its interval after its cell was measured again (table
    `cosched rho_target` or `cosched rho_drafter`; median_s, spread_pct and samples are of the lane's
    together samples), or a `cosched.decode` ratio below 1 (table `cosched decode realised|single|verify|producer`,
    samples its forwards, no interval); None: not such a warning."""
    ratio_low: float | None = field(default=None, metadata=_OMIT)
    """Lower end of the ratio's ~95% interval (with `ratio`)."""
    ratio_high: float | None = field(default=None, metadata=_OMIT)
    """Upper end of the ratio's ~95% interval (with `ratio`): below 1, or a skewed interval's end at or above 1
    around a ratio that the profile's record of it, ratio × (1 + the cell's achieved precision), keeps below 1
    (core/cosched.reaches_one)."""

    def short_of_precision(self) -> bool:
        """The cell hit the maximum count without reaching the precision."""
        return self.precision is not None and self.achieved_precision is not None

    def unstable(self) -> bool:
        return self.spread_pct > UNSTABLE_SPREAD_PCT

    def message(self) -> str:
        if self.table == f"{DECODE_TABLE} producer":
            return (f"{self.table} of {self.model}: the producer's ratio its AS2D decodes realised is {self.ratio:.3f} "
                    f"over {self.samples} forwards, below 1 (a lane faster beside the other: its forwards ran faster "
                    "than the profile's drafter cells); priced as 1")
        if self.table.startswith(DECODE_TABLE):
            return (f"{self.table} of {self.model}: the target's ratio its AS2D decodes realised is {self.ratio:.3f} "
                    f"over {self.samples} forwards, below 1 (a lane faster beside the other: too few forwards, or "
                    "the target-only decodes that scale its solo work ran slow); priced as 1")
        if self.ratio is not None:
            assert self.ratio_high is not None
            below = ("below 1 beyond its interval" if self.ratio_high < 1 else
                     "below 1, short of 1 as the profile records it (a skewed interval)")
            return (f"{self.table} of {self.model} w={self.width} d={self.depth} is {self.ratio:.3f} "
                    f"[{self.ratio_low:.3f}, {self.ratio_high:.3f}], {below} after a re-measurement (a lane "
                    f"faster beside the other; priced as measured, over {self.samples} samples)")
        spread = (f"spread {self.spread_pct:.1f}% of the median {self.median_s * 1e3:.3f} ms over {self.samples} "
                  f"samples (> {UNSTABLE_SPREAD_PCT:g}%)")
        if not self.short_of_precision():
            return f"unstable {self.table} of {self.model} at width {self.width}, depth {self.depth}: {spread}"
        assert self.precision is not None and self.achieved_precision is not None
        text = (f"{self.table} of {self.model} w={self.width} d={self.depth}: {self.samples} repetitions, "
                f"±{100 * self.achieved_precision:.1f}% > {100 * self.precision:g}% (the maximum, short of the "
                "precision)")
        return f"{text}; {spread}" if self.unstable() else text


WARNING_HINT = ("quiet the device (other processes, thermal state) and profile again, with more --max-repetitions "
                "or a looser --precision")


def warnings_doc(warnings: Sequence[StabilityWarning]) -> list[dict]:
    """The profile's (and a results manifest's) `warnings` list; a spread warning carries no precision keys."""
    return [to_dict(w) for w in warnings]


def warnings_from_doc(doc: object, where: Where) -> tuple[StabilityWarning, ...]:
    """A `warnings` list (of a profile or a results manifest's profile entry), validated."""
    if not isinstance(doc, list):
        raise where.fail("a list of stability warnings", doc)
    return tuple(_warning(entry, where.at(i)) for i, entry in enumerate(doc))


def _warning(entry: Any, where: Where) -> StabilityWarning:
    w: StabilityWarning = from_dict(StabilityWarning, entry, where)
    pair = ("precision", "achieved_precision")
    if (w.precision is None) != (w.achieved_precision is None):
        raise where.fail("both `precision` and `achieved_precision` or neither", [k for k in pair if k in entry])
    ratio = (w.ratio, w.ratio_low, w.ratio_high)
    if w.table.startswith(DECODE_TABLE):  # a decode's ratio has no interval
        if w.ratio is None or not 0 < w.ratio < 1 or w.ratio_low is not None or w.ratio_high is not None:
            raise where.at("ratio").fail("a ratio in (0, 1) and no interval (a decode's ratio below 1)", w.ratio)
        return w
    if any(v is None for v in ratio) and any(v is not None for v in ratio):
        raise where.fail("all of `ratio`, `ratio_low`, `ratio_high` or none",
                         [k for k in ("ratio", "ratio_low", "ratio_high") if k in entry])
    if w.ratio is not None and not 0 < w.ratio < 1:
        raise where.at("ratio").fail("a ratio in (0, 1) (a co-scheduling ratio below 1)", w.ratio)
    if w.ratio_low is not None and w.ratio_high is not None and not 0 < w.ratio_low <= w.ratio_high:
        raise where.at("ratio_high").fail("0 < ratio_low <= ratio_high (the ratio's interval)",
                                          [w.ratio_low, w.ratio_high])
    return w


@dataclass(frozen=True)
class DeviceProfile:
    device: DeviceInfo
    target_model: ModelId
    target_processor: str
    """`cpu` or a ggml device name."""
    target_costs: CostTable
    drafters: Mapping[str, DrafterProfile]
    overheads: Overheads = field(default_factory=Overheads)
    placement: Placement = UNRECORDED_PLACEMENT
    """Where each lane ran while every table was measured (docs/METHODS.md §4.1 Placement; synthetic
    profiles built in memory record none)."""
    pinning: Mapping[str, LanePinning] = field(default_factory=dict)
    """Lane name -> its CPU set read back by the runner (empty: not recorded)."""
    snapshot: Snapshots | None = None
    """The device's state around the measurement (None: not recorded)."""
    recorded_runner: RunnerRecord | None = None
    """The top-level `runner` of a profile without an environment block."""
    target_threads: int | None = None
    """Threads the target's forwards ran with (None: not recorded)."""
    notes: str = ""
    """How it was measured, in words."""
    warnings: tuple[StabilityWarning, ...] = ()
    """Timings that spread more than UNSTABLE_SPREAD_PCT (found when profiling)."""
    environment: Environment | None = None
    """Who measured it with which runner build and models, when (None: a hand-written or imported profile)."""
    audio_prefill_s: Mapping[str, float] = field(default_factory=dict)
    """Models that hear audio themselves (Whisper): 'target' or the drafter's name -> the median seconds of its
    encoder over one window (the audio prefill, which the decode clock excludes); empty: none measured."""
    path: Path | None = None
    """The file it was loaded from (None: built in memory)."""

    @property
    def runner(self) -> RunnerBuild | RunnerRecord | None:
        """The runner build that measured it: the environment's, else the top-level record."""
        if self.environment is not None and self.environment.runner is not None:
            return self.environment.runner
        return self.recorded_runner

    @property
    def name(self) -> str:
        """The device in this profile's placement, as result rows name it (e.g. local@split)."""
        return device_label(self.device.name, self.placement)

    def drafter(self, name: str | None) -> DrafterProfile:
        if name is None:
            if len(self.drafters) == 1:
                return next(iter(self.drafters.values()))
            raise SpecbenchError(f"profile {self.path or self.name}: several drafters "
                                 f"({', '.join(sorted(self.drafters))}); name one with drafter=NAME")
        if name not in self.drafters:
            raise SpecbenchError(f"profile {self.path or self.name}: no drafter '{name}' "
                                 f"(profiled: {', '.join(sorted(self.drafters)) or 'none'})")
        return self.drafters[name]

    def overheads_of(self, drafter: str | None) -> Overheads:
        """AS2D's overheads with `drafter` producing: its own when measured, else the profile's."""
        if drafter is None or drafter not in self.drafters:
            return self.overheads
        return self.drafters[drafter].overheads or self.overheads

    def cosched(self, drafter: str | None) -> CoSchedule:
        profile = self.drafter(drafter)
        if profile.cosched is None:
            raise MissingCostError(f"profile {self.path or self.name}: drafter '{profile.name}' has no co-scheduling "
                                   "measurements; AS2D replay needs them",
                                   hint="run `specbench profile` with co-scheduling enabled")
        return profile.cosched

    def declared_costs(self) -> dict[str, str]:
        """drafter name -> how its declared costs are described (drafters measured here are absent)."""
        return {name: d.declared.note for name, d in sorted(self.drafters.items()) if d.declared is not None}

    def with_ratio_fit(self, fit: str) -> DeviceProfile:
        """The same profile with unmeasured co-scheduling widths filled by `fit`."""
        if fit not in RATIO_FITS:
            raise SpecbenchError(f"unknown ratio fit '{fit}'. Available: {', '.join(RATIO_FITS)}")
        ratio_fit = CostFit(fit)
        drafters = {name: replace(d, cosched=None if d.cosched is None else replace(d.cosched, fit=ratio_fit))
                    for name, d in self.drafters.items()}
        return replace(self, drafters=drafters)

    def with_depth_fit(self, fit: str) -> DeviceProfile:
        """The same profile with every cost table priced outside its measured depths by `fit`."""
        if fit not in DEPTH_FITS:
            raise SpecbenchError(f"unknown depth fit '{fit}'. Available: {', '.join(DEPTH_FITS)}")
        depth_fit = CostFit(fit)
        return self.with_tables(lambda table: replace(table, depth_fit=depth_fit))

    def with_tables(self, target: Callable[[CostTable], CostTable],
                    drafter: Callable[[CostTable], CostTable] | None = None) -> DeviceProfile:
        """The same profile with `target` applied to the target's cost table and `drafter` (default: `target`) to
        every drafter's tables (`DrafterProfile.with_tables`)."""
        drafters = {name: d.with_tables(drafter or target) for name, d in self.drafters.items()}
        return replace(self, target_costs=target(self.target_costs), drafters=drafters)


def _depths(doc: dict, where: Where) -> list[int]:
    depths = need(doc, "depths", list, where)
    if not depths or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in depths) \
            or sorted(set(depths)) != depths:
        raise where.at("depths").fail("a non-empty increasing list of KV depths (integers >= 0)", depths)
    return depths


MAX_FORWARD_S = 3600.0
"""The most seconds a profile's forward may cost: an hour for one forward is a broken clock or file."""
MAX_RHO = 100.0
"""The largest co-scheduling ratio a profile may hold: a lane slowed a hundredfold is no sharing but a stall."""
MAX_DECODE_RATIO = 10_000.0
"""The most a cost table's decode ratio may be: a decode's host work per forward (sampling over the vocabulary,
and the preemptions a loaded host adds) can dwarf a tiny model's forward (ratios of 120–150 measured on the test
suite's sub-millisecond fixtures under load), so only a broken clock or file goes past this."""


def _per_depth(values: object, n: int, where: Where, expected: str, least: float = 0.0,
               strict: bool = True, most: float = math.inf) -> np.ndarray:
    """`n` finite numbers, each > `least` (or >= with strict=False) and <= `most`, or an error
    naming the first value out of range."""
    if not isinstance(values, list) or len(values) != n:
        raise where.fail(f"{n} {expected} (one per depth)", values)
    for i, v in enumerate(values):
        number = isinstance(v, (int, float)) and not isinstance(v, bool)
        if not number or not math.isfinite(v) or (v <= least if strict else v < least) or v > most:
            bound = f"> {least:g}" if strict else f">= {least:g}"
            bound += f" and <= {most:g}" if math.isfinite(most) else ""
            raise where.at(i).fail(f"{expected}: finite and {bound}", v)
    return np.asarray(values, dtype=np.float64)


def _per_width(doc: dict, key: str, widths: Sequence[int], n: int, where: Where, expected: str, least: float,
               strict: bool) -> dict[int, np.ndarray] | None:
    """An optional {width: [per depth]} block of a cost table, for exactly the table's widths."""
    block = need(doc, key, dict, where, None)
    if block is None:
        return None
    out = {_width_key(k, where.at(key)): _per_depth(v, n, where.at(key).at(str(k)), expected, least, strict)
           for k, v in block.items()}
    if sorted(out) != sorted(widths):
        raise where.at(key).fail(f"the widths of `seconds` ({width_ranges(sorted(widths))})", width_ranges(sorted(out)))
    return out


def _cost_table(doc: dict, where: Where, label: str) -> CostTable:
    reject_unknown(doc, {"depths", "seconds", "spread", "repetitions", "achieved_precision", "precision", "decode"},
                   where)
    depths = _depths(doc, where)
    seconds_doc = need(doc, "seconds", dict, where)
    if not seconds_doc:
        raise where.at("seconds").fail("at least one width")
    seconds = {_width_key(key, where.at("seconds")): _per_depth(values, len(depths), where.at("seconds").at(str(key)),
                                                               "costs in seconds", most=MAX_FORWARD_S)
               for key, values in seconds_doc.items()}
    spread_doc = need(doc, "spread", dict, where, None)
    spread = None if spread_doc is None else {
        _width_key(key, where.at("spread")): _per_depth(values, len(depths), where.at("spread").at(str(key)),
                                                       "standard deviations in seconds", strict=False)
        for key, values in spread_doc.items()}
    repetitions = _per_width(doc, "repetitions", list(seconds), len(depths), where, "counts of timed samples", 1,
                             False)
    if repetitions is not None and any((v != np.round(v)).any() for v in repetitions.values()):
        raise where.at("repetitions").fail("whole counts of timed samples", doc["repetitions"])
    achieved = _per_width(doc, "achieved_precision", list(seconds), len(depths), where,
                          "relative half-widths of the median's interval", 0, False)
    precision = need(doc, "precision", float, where, None)
    if precision is not None and not 0 < precision < 1:
        raise where.at("precision").fail("a fraction of the median in (0, 1)", precision)
    return CostTable(np.asarray(depths, dtype=np.float64), seconds, label, spread=spread, repetitions=repetitions,
                     achieved_precision=achieved, precision=None if precision is None else float(precision),
                     decode=_serial_decode(doc, where))


def _serial_decode(doc: dict, where: Where) -> DecodeRatio | None:
    """A cost table's `decode: {realised, forwards, single?: {realised, forwards}, wider?: {realised, forwards}}`,
    or None."""
    entry = need(doc, "decode", dict, where, None)
    if entry is None:
        return None
    d_where = where.at("decode")
    reject_unknown(entry, {"realised", "forwards", *SERIAL_CLASSES, "host"}, d_where)
    realised = _decode_ratio(entry, "realised", d_where, MAX_DECODE_RATIO)
    ratio = DecodeRatio(realised, _decode_forwards(entry, d_where, 1),
                        *_class_ratios(entry, SERIAL_CLASSES, d_where, MAX_DECODE_RATIO))
    return replace(ratio, host=_host_work(entry, d_where))


def _host_work(entry: dict, where: Where) -> HostWork | None:
    """A decode's `host: {seconds, forwards, single?: {seconds, forwards}, wider?: {seconds, forwards}}`, or None."""
    host = need(entry, "host", dict, where, None)
    if host is None:
        return None
    h_where = where.at("host")
    reject_unknown(host, {"seconds", "forwards", *SERIAL_CLASSES}, h_where)

    def part(doc: dict, at: Where, least: int) -> tuple[float, int]:
        seconds = need(doc, "seconds", float, at)
        if not 0 <= seconds <= MAX_FORWARD_S:
            raise at.at("seconds").fail(f"seconds in [0, {MAX_FORWARD_S:g}]", seconds)
        return float(seconds), _decode_forwards(doc, at, least)

    classes: list = []
    for name in SERIAL_CLASSES:
        doc = need(host, name, dict, h_where, None)
        if doc is not None:
            reject_unknown(doc, {"seconds", "forwards"}, h_where.at(name))
        classes += [None, 0] if doc is None else list(part(doc, h_where.at(name), CLASS_FORWARDS))
    return HostWork(*part(host, h_where, 1), *classes)


def _class_ratios(entry: dict, names: Sequence[str], where: Where, most: float) -> list:
    """[ratio, forwards] of each width class in `names` (`{realised, forwards}`; an absent class: None, 0), in
    order, as a decode ratio's dataclass takes them."""
    out: list = []
    for name in names:
        part = need(entry, name, dict, where, None)
        if part is None:
            out += [None, 0]
            continue
        reject_unknown(part, {"realised", "forwards"}, where.at(name))
        out += [_decode_ratio(part, "realised", where.at(name), most),
                _decode_forwards(part, where.at(name), CLASS_FORWARDS)]
    return out


def _width_key(key: Any, where: Where) -> int:  # any YAML or JSON key; int() says which are widths
    try:
        width = int(key)  # YAML gives ints, JSON gives strings
    except (TypeError, ValueError):
        raise where.fail("integer widths as keys", key) from None
    if width < 1:
        raise where.fail("widths >= 1", key)
    return width


def _cosched(doc: dict, where: Where) -> CoSchedule:
    """`{depths: [...], precision?, ratios: {width: {rho_target: [per depth], rho_drafter: [...],
    repetitions?: [...], achieved_precision?: [...]}}}`."""
    reject_unknown(doc, {"depths", "ratios", "precision", "decode"}, where)
    depths = _depths(doc, where)
    precision = need(doc, "precision", float, where, None)
    if precision is not None and not 0 < precision < 1:
        raise where.at("precision").fail("a fraction in (0, 1)", precision)
    entries, r_where = need(doc, "ratios", dict, where), where.at("ratios")
    rho_t: dict[int, np.ndarray] = {}
    rho_d: dict[int, np.ndarray] = {}
    reps: dict[int, np.ndarray] = {}
    achieved: dict[int, np.ndarray] = {}
    for key, entry in entries.items():
        width = _width_key(key, r_where)
        e_where = r_where.at(str(key))
        reject_unknown(entry if isinstance(entry, dict) else {},
                       {"rho_target", "rho_drafter", "repetitions", "achieved_precision"}, e_where)
        for name, out in (("rho_target", rho_t), ("rho_drafter", rho_d)):
            out[width] = _per_depth(need(entry, name, list, e_where), len(depths), e_where.at(name),
                                    "slowdown ratios", most=MAX_RHO)
        if "repetitions" in entry:
            counts = need(entry, "repetitions", list, e_where)
            if len(counts) != len(depths) or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1
                                                     for n in counts):
                raise e_where.at("repetitions").fail(f"{len(depths)} counts >= 1 (one per depth)", counts)
            reps[width] = np.asarray(counts, dtype=np.int64)
        if "achieved_precision" in entry:
            values = need(entry, "achieved_precision", list, e_where)
            if len(values) != len(depths) or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                     and v >= 0 for v in values):
                raise e_where.at("achieved_precision").fail(f"{len(depths)} fractions >= 0 (one per depth; "
                                                            ".inf: no interval)", values)
            achieved[width] = np.asarray(values, dtype=np.float64)
    if not rho_t:
        raise where.fail("at least one measured width")
    for name, got in (("repetitions", reps), ("achieved_precision", achieved)):
        if got and set(got) != set(rho_t):
            raise r_where.fail(f"`{name}` at every measured width or none", sorted(got))
    return CoSchedule(np.asarray(depths, dtype=np.float64), rho_t, rho_d, repetitions=reps or None,
                      achieved_precision=achieved or None, precision=None if precision is None else float(precision),
                      decode=_decode_contention(doc, where))


def _decode_contention(doc: dict, where: Where) -> DecodeContention | None:
    """`decode: {realised, priced, forwards, single?: {realised, forwards}, verify?: {realised, forwards},
    producer?: {realised, priced, forwards}, producer_single?: {realised, forwards}, producer_verify?: {...},
    pace?: {sigma, pairs}}`, or None."""
    entry = need(doc, "decode", dict, where, None)
    if entry is None:
        return None
    d_where = where.at("decode")
    reject_unknown(entry, {"realised", "priced", "forwards", "below_one", "producer", "pace", "after", *DECODE_CLASSES,
                           *PRODUCER_CLASSES}, d_where)
    ratios = [_decode_ratio(entry, key, d_where) for key in ("realised", "priced")]
    decode = DecodeContention(ratios[0], ratios[1], _decode_forwards(entry, d_where, 1),
                              *_class_ratios(entry, DECODE_CLASSES, d_where, MAX_RHO))
    producer = need(entry, "producer", dict, d_where, None)
    if producer is not None:
        p_where = d_where.at("producer")
        reject_unknown(producer, {"realised", "priced", "forwards"}, p_where)
        decode = replace(decode, producer=_decode_ratio(producer, "realised", p_where),
                         producer_priced=_decode_ratio(producer, "priced", p_where),
                         producer_forwards=_decode_forwards(producer, p_where, CLASS_FORWARDS))
    classes = _class_ratios(entry, PRODUCER_CLASSES, d_where, MAX_RHO)
    if producer is None and any(c is not None for c in classes[::2]):
        raise d_where.fail("`producer` beside `producer_single` or `producer_verify` (measured together)",
                           sorted(k for k in entry if k in PRODUCER_CLASSES))
    fields = [field for name in PRODUCER_CLASSES for field in (name, f"{name}_forwards")]  # as _class_ratios lists
    decode = replace(decode, **dict(zip(fields, classes, strict=True)))
    pace = need(entry, "pace", dict, d_where, None)
    if pace is not None:
        s_where = d_where.at("pace")
        reject_unknown(pace, {"sigma", "pairs"}, s_where)
        sigma, pairs = need(pace, "sigma", float, s_where), need(pace, "pairs", int, s_where)
        if not 0 <= sigma <= MAX_PACE_SIGMA:
            raise s_where.at("sigma").fail(f"a log-scale spread in [0, {MAX_PACE_SIGMA:g}]", sigma)
        if pairs < 2:
            raise s_where.at("pairs").fail("a count >= 2 (degrees of freedom)", pairs)
        decode = replace(decode, pace_sigma=float(sigma), pace_pairs=int(pairs))
    return replace(decode, below_one=_below_one(entry, decode, d_where), after=_after_producer(entry, d_where))


def _after_producer(entry: dict, where: Where) -> AfterProducer | None:
    """`after: {width: {seconds, solo_seconds, forwards}}`, or None."""
    after = need(entry, "after", dict, where, None)
    if after is None:
        return None
    a_where = where.at("after")
    if not after:
        raise a_where.fail("at least one width", after)
    widths = {}
    for key, part in after.items():
        width, w_where = _width_key(key, a_where), a_where.at(str(key))
        reject_unknown(part if isinstance(part, dict) else {}, {"seconds", "solo_seconds", "forwards"}, w_where)
        seconds, solo = (need(part, name, float, w_where) for name in ("seconds", "solo_seconds"))
        for name, value in (("seconds", seconds), ("solo_seconds", solo)):
            if not 0 < value < math.inf:
                raise w_where.at(name).fail("finite seconds > 0", value)
        if not seconds / solo <= MAX_RHO:
            raise w_where.fail(f"seconds over solo_seconds in (0, {MAX_RHO:g}]", seconds / solo)
        widths[width] = (float(seconds), float(solo), _decode_forwards(part, w_where, 1))
    return AfterProducer(dict(sorted(widths.items())))


MAX_PACE_SIGMA = 1.0
"""The largest pace scatter a profile may hold: e^±1 from one decode to the next is a broken clock, not a pace."""


def _below_one(entry: dict, decode: DecodeContention, where: Where) -> dict[str, float]:
    """`below_one: {realised?|single?|verify?|producer?: ratio}`: what the decodes measured below 1 where the entry
    prices 1 (core/decomposition.decode_contention)."""
    below = need(entry, "below_one", dict, where, None) or {}
    b_where = where.at("below_one")
    reject_unknown(below, {"realised", "producer", *DECODE_CLASSES, *PRODUCER_CLASSES}, b_where)
    out = {}
    for key, value in below.items():
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value < 1:
            raise b_where.at(key).fail("a ratio in (0, 1)", value)
        if getattr(decode, key) != 1.0:
            raise b_where.at(key).fail(f"a ratio only where `{key}` prices 1", value)
        out[key] = float(value)
    return out


def _decode_ratio(entry: dict, key: str, where: Where, most: float = MAX_RHO) -> float:
    value = need(entry, key, float, where)
    if not 0 < value <= most:
        raise where.at(key).fail(f"a ratio in (0, {most:g}]", value)
    return float(value)


def _decode_forwards(entry: dict, where: Where, least: int) -> int:
    forwards = need(entry, "forwards", int, where)
    if forwards < least:
        raise where.at("forwards").fail(f"a count >= {least}", forwards)
    return int(forwards)


RHO_SPREADS = 2.0
"""How many of the lanes' measured spreads a ratio may fall below 1 (two: about 95% of the noise)."""


def _check_ratio_floor(cosched: CoSchedule, target: CostTable, drafter: CostTable, warned: set[tuple[str, int, int]],
                       where: Where) -> None:
    """A lane runs no faster beside the other than alone: a ratio below 1 is noise. Both lanes ran
    while it was measured, so its noise is bounded by RHO_SPREADS times the two solo timings'
    measured spreads (standard deviation / median, the largest over depths: the target's at the
    width, the drafter's step), or RHO_SLACK, whichever is larger; or, for a cell measured to a
    precision, by its own recorded interval (relative half-width p: a ratio of at least 1 / (1 + p)
    has an interval that reaches 1). A ratio below both is refused unless the profile warns of it
    (`warned`: (table, width, depth) of this drafter's ratio warnings, the ratios that stayed below 1
    after a re-measurement, priced as measured)."""
    def spread(table: CostTable, width: int) -> float:
        if table.spread is None or width not in table.spread or width not in table.seconds:
            return 0.0
        return float(np.max(table.spread[width] / table.seconds[width]))

    for width in cosched.rho_target:
        least = 1 - max(RHO_SLACK, RHO_SPREADS * (spread(target, width) + spread(drafter, 1)))
        achieved = None if cosched.achieved_precision is None else cosched.achieved_precision[width]
        for name, values in (("rho_target", cosched.rho_target[width]), ("rho_drafter", cosched.rho_drafter[width])):
            for i, value in enumerate(values):
                own = achieved is not None and np.isfinite(achieved[i]) and reaches_one(value, achieved[i])
                if value >= least or own or (cosched_ratio_table(name), width, int(cosched.depths[i])) in warned:
                    continue
                raise where.at("ratios").at(str(width)).at(name).at(i).fail(
                    f"a slowdown ratio >= {least:.3g} (1 minus twice the lanes' measured spread, at least "
                    f"{RHO_SLACK:g}), one whose recorded interval reaches 1, or one the profile warns of",
                    float(value))


def _declared(entry: dict, where: Where) -> DeclaredCost | None:
    """A drafter entry's `declared` block: {source, fraction_of_target} in place of `costs`, or
    {source} beside a `costs` table measured elsewhere."""
    if need(entry, "declared", dict, where, None) is None:
        return None
    declared: DeclaredCost = from_dict(DeclaredCost, entry["declared"], where.at("declared"))
    if declared.fraction_of_target is None:
        if "costs" not in entry:
            raise where.at("costs").fail("a mapping (missing; a declared drafter has `costs` from another harness, "
                                         "or declared.fraction_of_target)")
        return declared
    for key in ("costs", "costs_all_rows"):
        if key in entry:
            raise where.at(key).fail("absent when declared.fraction_of_target gives the costs (one or the other)")
    return declared


def _scaled(table: CostTable, fraction: float, label: str) -> CostTable:
    """`fraction` x every cost of `table`, at its depths and widths."""
    return CostTable(table.depths, {w: fraction * c for w, c in table.seconds.items()}, label)


_TOP_KEYS = frozenset({"kind", "schema_version", "device", "runner", "snapshot", "target", "drafters", "overheads",
                       "audio_prefill_s",
                       "notes", "placement", "pinning", "warnings", ENV_KEY})


def _threads(doc: dict, where: Where) -> int | None:
    threads = need(doc, "threads", int, where, None)
    if threads is not None and threads < 1:
        raise where.at("threads").fail("an integer >= 1", threads)
    return threads


def _pinning(doc: dict, where: Where) -> dict[str, LanePinning]:
    reject_unknown(doc, {"lanes"}, where)
    return {str(lane): from_dict(LanePinning, entry, where.at("lanes").at(str(lane)))
            for lane, entry in need(doc, "lanes", dict, where).items()}


def profile_from_dict(doc: dict, path: Path) -> DeviceProfile:
    where = Where(path)
    check_header(doc, KIND, VERSIONS, where)
    reject_unknown(doc, _TOP_KEYS, where)
    device_doc = need(doc, "device", dict, where)
    device = from_dict(DeviceInfo, device_doc, where.at("device"))
    target = need(doc, "target", dict, where)
    t_where = where.at("target")
    reject_unknown(target, {"model", "processor", "costs", "threads"}, t_where)
    target_costs = _cost_table(need(target, "costs", dict, t_where), t_where.at("costs"), f"profile {path} target")
    drafters: dict[str, DrafterProfile] = {}
    warnings = warnings_from_doc(doc.get("warnings", []), where.at("warnings"))
    for i, entry in enumerate(need(doc, "drafters", list, where, [])):
        d_where = where.at("drafters").at(i)
        reject_unknown(entry, {"name", "model", "processor", "costs", "costs_all_rows", "cosched", "threads",
                               "declared", "overheads"}, d_where)
        name = need(entry, "name", str, d_where)
        if name in drafters:
            raise d_where.at("name").fail("a drafter name not used by another entry", name)
        cosched_doc = need(entry, "cosched", dict, d_where, None)
        all_rows_doc = need(entry, "costs_all_rows", dict, d_where, None)
        label = f"profile {path} drafter '{name}'"
        declared = _declared(entry, d_where)
        all_rows: CostTable | None
        if declared is not None and declared.fraction_of_target is not None:
            costs = _scaled(target_costs, declared.fraction_of_target, f"{label} (declared)")
            all_rows = costs  # a declared step has one price, whichever logits it keeps
        else:
            costs = _cost_table(need(entry, "costs", dict, d_where), d_where.at("costs"), label)
            all_rows = None if all_rows_doc is None else _cost_table(all_rows_doc, d_where.at("costs_all_rows"),
                                                                     f"{label} (all logit rows)")
        cosched = None if cosched_doc is None else _cosched(cosched_doc, d_where.at("cosched"))
        if cosched is not None:
            warned = {(w.table, w.width, w.depth) for w in warnings if w.model == name and w.ratio is not None}
            _check_ratio_floor(cosched, target_costs, costs, warned, d_where.at("cosched"))
        drafters[name] = DrafterProfile(
            name, from_dict(ModelId, need(entry, "model", dict, d_where), d_where.at("model")),
            need(entry, "processor", str, d_where), costs, cosched, all_rows, declared, _threads(entry, d_where),
            None if "overheads" not in entry else from_dict(Overheads, entry["overheads"], d_where.at("overheads")))
    environment = manifest_environment(doc, where)
    runner_doc = need(doc, "runner", dict, where, None)
    if runner_doc is not None and environment is not None and environment.runner is not None:
        raise where.at("runner").fail(f"no top-level runner beside {ENV_KEY}.runner (one record of the build)")
    snapshot_doc = need(doc, "snapshot", dict, where, None)
    snapshot = None if snapshot_doc is None else from_dict(Snapshots, snapshot_doc, where.at("snapshot"))
    pinning_doc = need(doc, "pinning", dict, where, None)
    return DeviceProfile(
        device, from_dict(ModelId, need(target, "model", dict, t_where), t_where.at("model")),
        need(target, "processor", str, t_where), target_costs, drafters,
        from_dict(Overheads, need(doc, "overheads", dict, where, {}), where.at("overheads")),
        placement_from_dict(need(doc, "placement", dict, where), where.at("placement")),
        {} if pinning_doc is None else _pinning(pinning_doc, where.at("pinning")), snapshot,
        None if runner_doc is None else from_dict(RunnerRecord, runner_doc, where.at("runner")),
        _threads(target, t_where),
        need(doc, "notes", str, where, ""), warnings,
        environment, _audio_prefill(need(doc, "audio_prefill_s", dict, where, {}), set(drafters),
                                    where.at("audio_prefill_s")), path)


def _audio_prefill(doc: dict, drafters: set[str], where: Where) -> dict[str, float]:
    """`audio_prefill_s`: 'target' or a drafter's name -> seconds, finite and > 0."""
    out = {}
    for key in doc:
        if key != "target" and key not in drafters:
            raise where.at(key).fail("'target' or the name of a drafter of this profile", key)
        value = need(doc, key, float, where)
        if value <= 0:
            raise where.at(key).fail("seconds: finite and > 0", value)
        out[key] = float(value)
    return out


def load_profile(path: Path) -> DeviceProfile:
    path = Path(path)
    doc = load_yaml(path)
    return profile_from_dict(doc, path)


def _numbers(values: np.ndarray) -> list[float]:
    return [float(v) for v in values]


def _table_doc(table: CostTable) -> dict:
    doc: dict = {"depths": [int(d) for d in table.depths],
                 "seconds": {int(w): _numbers(table.seconds[w]) for w in table.widths()}}
    if table.spread is not None:
        doc["spread"] = {int(w): _numbers(table.spread[w]) for w in sorted(table.spread)}
    if table.repetitions is not None:
        doc["repetitions"] = {int(w): [int(n) for n in table.repetitions[w]] for w in sorted(table.repetitions)}
    if table.achieved_precision is not None:
        doc["achieved_precision"] = {int(w): _numbers(table.achieved_precision[w])
                                     for w in sorted(table.achieved_precision)}
    if table.precision is not None:
        doc["precision"] = float(table.precision)
    if table.decode is not None:
        doc["decode"] = {"realised": float(table.decode.realised), "forwards": int(table.decode.forwards),
                         **_classes_doc(table.decode, SERIAL_CLASSES)}
        host = table.decode.host
        if host is not None:
            doc["decode"]["host"] = {"seconds": float(host.seconds), "forwards": int(host.forwards),
                                     **{name: {"seconds": float(getattr(host, name)),
                                               "forwards": int(getattr(host, f"{name}_forwards"))}
                                        for name in SERIAL_CLASSES if getattr(host, name) is not None}}
    return doc


def _classes_doc(decode: DecodeRatio | DecodeContention, names: Sequence[str]) -> dict:
    """`{name: {realised, forwards}}` of each width class in `names` that `decode` measured."""
    return {name: {"realised": float(getattr(decode, name)), "forwards": int(getattr(decode, f"{name}_forwards"))}
            for name in names if getattr(decode, name) is not None}


def _cosched_doc(cosched: CoSchedule) -> dict:
    ratios = {}
    for w in sorted(cosched.rho_target):
        ratios[int(w)] = {"rho_target": _numbers(cosched.rho_target[w]),
                          "rho_drafter": _numbers(cosched.rho_drafter[w])}
        if cosched.repetitions is not None:
            ratios[int(w)]["repetitions"] = [int(n) for n in cosched.repetitions[w]]
        if cosched.achieved_precision is not None:
            ratios[int(w)]["achieved_precision"] = _numbers(cosched.achieved_precision[w])
    doc: dict = {"depths": [int(x) for x in cosched.depths], "ratios": ratios}
    if cosched.precision is not None:
        doc["precision"] = float(cosched.precision)
    if cosched.decode is not None:
        decode = cosched.decode
        doc["decode"] = {"realised": float(decode.realised), "priced": float(decode.priced),
                         "forwards": int(decode.forwards), **_classes_doc(decode, DECODE_CLASSES)}
        if decode.producer is not None:
            assert decode.producer_priced is not None  # measured together (core/decomposition.producer_contention)
            doc["decode"]["producer"] = {"realised": float(decode.producer), "priced": float(decode.producer_priced),
                                         "forwards": int(decode.producer_forwards)}
            doc["decode"].update(_classes_doc(decode, PRODUCER_CLASSES))
        if decode.pace_sigma is not None:
            doc["decode"]["pace"] = {"sigma": float(decode.pace_sigma), "pairs": int(decode.pace_pairs)}
        if decode.below_one:
            doc["decode"]["below_one"] = {k: float(v) for k, v in decode.below_one.items()}
        if decode.after is not None:
            doc["decode"]["after"] = {int(w): {"seconds": float(t), "solo_seconds": float(solo), "forwards": int(n)}
                                      for w, (t, solo, n) in decode.after.widths.items()}
    return doc


def _with_threads(doc: dict, threads: int | None) -> dict:
    return doc if threads is None else doc | {"threads": threads}


def profile_to_dict(profile: DeviceProfile) -> dict:
    """The profile as its YAML document: every field `profile_from_dict` reads, written back."""
    drafters = []
    for d in profile.drafters.values():
        entry: dict = {"name": d.name, "model": to_dict(d.model), "processor": d.processor}
        if d.declared is None or d.declared.fraction_of_target is None:
            entry["costs"] = _table_doc(d.costs)
            if d.all_rows_costs is not None:
                entry["costs_all_rows"] = _table_doc(d.all_rows_costs)
        if d.declared is not None:
            entry["declared"] = to_dict(d.declared)
        if d.cosched is not None:
            entry["cosched"] = _cosched_doc(d.cosched)
        if d.overheads is not None:
            entry["overheads"] = to_dict(d.overheads)
        drafters.append(_with_threads(entry, d.threads))
    doc: dict = {"kind": KIND, "schema_version": VERSION}
    if profile.environment is not None:
        doc[ENV_KEY] = environment_to_dict(profile.environment)
    doc |= {"device": to_dict(profile.device), "placement": to_dict(profile.placement)}
    if profile.pinning:
        doc["pinning"] = {"lanes": {lane: to_dict(p) for lane, p in profile.pinning.items()}}
    if profile.recorded_runner is not None:
        doc["runner"] = to_dict(profile.recorded_runner)
    if profile.snapshot is not None:
        doc["snapshot"] = to_dict(profile.snapshot)
    doc["target"] = _with_threads({"model": to_dict(profile.target_model), "processor": profile.target_processor,
                                   "costs": _table_doc(profile.target_costs)}, profile.target_threads)
    doc |= {"drafters": drafters, "overheads": to_dict(profile.overheads)}
    if profile.audio_prefill_s:
        doc["audio_prefill_s"] = {k: float(v) for k, v in profile.audio_prefill_s.items()}
    if profile.notes:
        doc["notes"] = profile.notes
    if profile.warnings:
        doc["warnings"] = warnings_doc(profile.warnings)
    return doc


def save_profile(path: Path, profile: DeviceProfile) -> None:
    """The one writer of profile files."""
    write_atomic(Path(path), dump_yaml(profile_to_dict(profile)))
