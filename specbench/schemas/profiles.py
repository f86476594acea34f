"""Device cost profiles (docs/METHODS.md §4 The device profile and its placement): measured forward costs and
co-scheduling slowdowns.

YAML layout (`kind: specbench.profile`, `schema_version: 2`):

    environment: {...}                    # schemas/environment.py: specbench, command, times, runner build, models, device
    device: {name, serial, model, soc, abi}
    placement: {name, target: {processor, cpus, threads}, drafter: {...}}   # docs/METHODS.md §4.1 Placement
    pinning: {lanes: [{lane, cpus, read_back}], ...}   # the runner's CPU sets, read back
    runner: {sha256, llama_cpp_commit, flags}   # older profiles; newer ones keep the build in environment.runner
    snapshot: {...}                       # device state before/after measuring
    target:  {model: {name, sha256}, processor, costs: {depths: [...], seconds: {width: [per depth]}}}
    drafters:
      - {name, model: {...}, processor, costs: {...}, costs_all_rows: {...},   # last row / every row
         cosched: {depths: [...], ratios: {width: {rho_target: [..], rho_drafter: [..]}}}}  # measured widths
    overheads: {producer_startup_s, publish_s, align_s}
    warnings: [{model, table, width, depth, median_s, spread_pct, samples}]   # unstable timings (optional)

A drafter whose costs come from elsewhere (docs/METHODS.md §4.7 Declared drafter costs) carries `declared: {source,
fraction_of_target}` instead of `costs` (each forward of n tokens costs that fraction of the
target's CT(n, depth) in this profile), or `declared: {source}` beside a `costs` table another
harness measured. Replay prices them like measured costs; results and reports name them.

Costs are seconds per forward, interpolated linearly in KV depth between measured depths
and held flat outside them (`DEPTH_POLICY`); a depth outside is flagged as extrapolated
(`CostTable.extrapolates`) and `with_depth_fit("linear")` gives the sensitivity variant that
extends the nearest measured segment instead. A width the profile lacks is an error. Widths
without a measured co-scheduling ratio use the median of the measured ratios and are
flagged as extrapolated; `with_ratio_fit("min"|"max")` gives the sensitivity variants.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from specbench.core.samples import UNSTABLE_SPREAD_PCT, spread_pct
from specbench.errors import MissingCostError, SpecbenchError
from specbench.schemas.environment import KEY as ENV_KEY
from specbench.schemas.environment import Environment, environment_to_dict, manifest_environment, runner_dict
from specbench.schemas.fileio import Where, check_header, dump_yaml, load_yaml, need, reject_unknown, write_atomic
from specbench.schemas.placement import UNRECORDED_PLACEMENT, Placement, device_label, placement_from_dict

KIND = "specbench.profile"
# Format history: 1 = first version; 2 = `placement` (required) and `pinning`: every table
# is measured in that placement. Version 1 files load with the placement "unrecorded".
# Version 2 profiles gained the optional `environment` block, which holds the runner build
# (then no top-level `runner`); profiles without it load as before.
# Profiles gained the optional `warnings` (timings spread > 10% of their median) later.
VERSIONS = (1, 2)
DEPTH_POLICY = "linear-in-depth, flat outside the measured depths"
RATIO_FITS = ("median", "min", "max")
DEPTH_FITS = ("flat", "linear")


@dataclass(frozen=True)
class CostTable:
    """Seconds per forward of `width` tokens at KV depth, for one model on one processor."""

    depths: np.ndarray
    """Measured KV depths, increasing."""
    seconds: Mapping[int, np.ndarray]
    """width -> seconds at each measured depth."""
    label: str = "cost table"
    """Names the table in errors, e.g. 'profile pixel.yaml target'."""
    depth_fit: str = "flat"
    """Outside the measured depths: flat (DEPTH_POLICY) or linear (the sensitivity variant)."""

    def widths(self) -> list[int]:
        return sorted(self.seconds)

    def require(self, width: int) -> np.ndarray:
        costs = self.seconds.get(int(width))
        if costs is None:
            raise MissingCostError(f"{self.label}: no measured cost for width {width} "
                                   f"(measured widths: {_ranges(self.widths())})",
                                   hint="profile the device with a larger --max-width")
        return costs

    def cost(self, width: int, depth: float) -> float:
        costs = self.require(width)
        return float(interp_rows(costs[None, :], self.depths, np.zeros(1, dtype=np.int64), np.array([float(depth)]),
                                 self.depth_fit == "linear")[0])

    def extrapolates(self, depths):
        """True where a depth lies outside the measured depths (a price the profile did not measure)."""
        depths = np.asarray(depths, dtype=np.float64)
        return (depths < self.depths[0]) | (depths > self.depths[-1])

    def matrix(self, max_width: int) -> np.ndarray:
        """[max_width + 1, n_depths] costs; NaN rows for widths not measured."""
        out = np.full((max_width + 1, len(self.depths)), np.nan)
        for width, costs in self.seconds.items():
            if width <= max_width:
                out[width] = costs
        return out

    def costs(self, widths: np.ndarray, depths: np.ndarray) -> np.ndarray:
        """Vectorised `cost`; every width must be measured."""
        widths = np.asarray(widths, dtype=np.int64)
        if widths.size == 0:
            return np.zeros(0)
        missing = sorted(set(np.unique(widths).tolist()) - set(self.seconds))
        if missing:
            self.require(missing[0])
        return interp_rows(self.matrix(int(widths.max())), self.depths, widths, np.asarray(depths, dtype=np.float64),
                           self.depth_fit == "linear")


def interp_rows(matrix: np.ndarray, grid: np.ndarray, rows: np.ndarray, x: np.ndarray,
                linear: bool = False) -> np.ndarray:
    """np.interp of `matrix[rows[i]]` at `x[i]` for every i: flat outside the grid, or with
    `linear` the nearest measured segment extended (never below 0 s). One depth: flat."""
    if len(grid) == 1:
        return matrix[rows, 0]
    if not linear:
        x = np.clip(x, grid[0], grid[-1])
    upper = np.clip(np.searchsorted(grid, x, side="right"), 1, len(grid) - 1)
    lower = upper - 1
    frac = (x - grid[lower]) / (grid[upper] - grid[lower])
    out = matrix[rows, lower] * (1.0 - frac) + matrix[rows, upper] * frac
    return np.maximum(out, 0.0) if linear else out


@dataclass(frozen=True)
class CoSchedule:
    """Slowdown of each lane while the other runs: progress at 1/rho of solo speed.

    Measured per target width at the profile's KV depths and interpolated in depth like the
    costs (at the target forward's depth; both lanes sat at that depth while measuring)."""

    depths: np.ndarray
    """Measured KV depths, increasing."""
    rho_target: Mapping[int, np.ndarray]
    """Measured target slowdown per target width, one per depth."""
    rho_drafter: Mapping[int, np.ndarray]
    """Measured drafter (AR step) slowdown while the target runs that width, one per depth."""
    fit: str = "median"
    """How unmeasured widths are filled: median (default), min or max of the measured ratios."""

    def _fill(self, measured: Mapping[int, np.ndarray]) -> np.ndarray:
        values = np.stack(list(measured.values()))
        return {"median": np.median, "min": np.min, "max": np.max}[self.fit](values, axis=0)

    def _row(self, width: int) -> tuple[np.ndarray, np.ndarray, bool]:
        if width in self.rho_target and width in self.rho_drafter:
            return self.rho_target[width], self.rho_drafter[width], False
        return self._fill(self.rho_target), self._fill(self.rho_drafter), True

    def ratios(self, width: int, depth: float) -> tuple[float, float, bool]:
        """(rho_target, rho_drafter, extrapolated) for one target width at one KV depth."""
        rho_t, rho_d, extrapolated = self._row(width)
        both = interp_rows(np.stack([rho_t, rho_d]), self.depths, np.array([0, 1]), np.full(2, float(depth)))
        return float(both[0]), float(both[1]), extrapolated

    def dense(self, max_width: int, max_depth: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """[max_width + 1, max_depth + 1] rho_target and rho_drafter at every integer depth, and
        [max_width + 1] extrapolated flags: the same numbers `ratios` gives, for bulk replay."""
        rows = [self._row(w) for w in range(max_width + 1)]
        depths = np.arange(max_depth + 1, dtype=np.float64)
        widths, at = np.repeat(np.arange(max_width + 1), max_depth + 1), np.tile(depths, max_width + 1)
        out = [interp_rows(np.stack([r[k] for r in rows]), self.depths, widths, at).reshape(max_width + 1, max_depth + 1)
               for k in (0, 1)]
        return out[0], out[1], np.array([r[2] for r in rows])


@dataclass(frozen=True)
class DeclaredCost:
    """Drafter costs this profile did not measure: where they come from, in the user's words."""

    source: str
    """Free text: what the cost is and where it was measured or derived, e.g. 'one decoder block + LM head'."""
    fraction_of_target: float | None = None
    """Each drafter forward of n tokens costs this fraction of the target's CT(n, depth); None: a
    declared table (`costs`) measured by another harness."""

    @property
    def note(self) -> str:
        """How reports name it."""
        how = (f"{self.fraction_of_target:g} x the target's CT(n, depth)" if self.fraction_of_target is not None
               else "a table measured elsewhere")
        return f"{how}; source: {self.source}"


@dataclass(frozen=True)
class DrafterProfile:
    name: str
    model: dict
    processor: str
    costs: CostTable
    """Forwards that keep the last row's logits (an AR step, an SD catch-up ingest)."""
    cosched: CoSchedule | None
    all_rows_costs: CostTable | None = None
    """Forwards that keep a logits row per token (SpecASR's recycling ingest reads them all)."""
    declared: DeclaredCost | None = None
    """Costs declared, not measured on this device (None: measured by `specbench profile`)."""

    def ingest_costs(self) -> CostTable:
        """The table a forward with a row per token is priced from; a profile without one (the
        table is optional) prices it like a last-row forward, slightly cheaper."""
        return self.all_rows_costs or self.costs


@dataclass(frozen=True)
class Overheads:
    producer_startup_s: float = 0.0
    """From the decode clock's start until the producer's first step begins."""
    publish_s: float = 0.0
    """Producer-lane time to publish one batch."""
    align_s: float = 0.0
    """Target-lane time for one realignment search."""


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

    def message(self) -> str:
        return (f"unstable {self.table} of {self.model} at width {self.width}, depth {self.depth}: spread "
                f"{self.spread_pct:.1f}% of the median {self.median_s * 1e3:.3f} ms over {self.samples} samples "
                f"(> {UNSTABLE_SPREAD_PCT:g}%)")


WARNING_HINT = ("quiet the device (other processes, thermal state) and profile again, or with more --repetitions")


def stability_warnings(samples: Sequence[dict]) -> list[StabilityWarning]:
    """The unstable timings among a profile's raw runner records (the `*.samples.jsonl` lines:
    `forward` records with `samples_us`, `cosched` records with `samples`), pure."""
    out = []

    def check(model: str, table: str, record: dict, values: Sequence[float]) -> None:
        if len(values) > 1 and spread_pct(values) > UNSTABLE_SPREAD_PCT:
            out.append(StabilityWarning(model, table, int(record["width"]), int(record["depth"]),
                                        float(np.median(values)) / 1e6, round(spread_pct(values), 3), len(values)))

    for record in samples:
        name = str(record.get("model_name", record.get("model", "?")))
        if record.get("kind") == "forward":
            table = "CT" if record.get("model") == "target" else "CD_all" if record.get("logits") == "all" else "CD"
            check(name, table, record, record.get("samples_us") or [])
        elif record.get("kind") == "cosched":
            for measure, values in (record.get("samples") or {}).items():
                check(name, f"cosched {measure.removesuffix('_us')}", record, values or [])
    return out


def warnings_doc(warnings: Sequence[StabilityWarning]) -> list[dict]:
    """The profile's (and a results manifest's) `warnings` list."""
    return [asdict(w) for w in warnings]


def warnings_from_doc(doc: object, where: Where) -> tuple[StabilityWarning, ...]:
    """A `warnings` list (of a profile or a results manifest's profile entry), validated."""
    if not isinstance(doc, list):
        raise where.fail("a list of stability warnings", doc)
    out = []
    kinds = {"model": str, "table": str, "width": int, "depth": int, "median_s": float, "spread_pct": float,
             "samples": int}
    for i, entry in enumerate(doc):
        w_where = where.at(i)
        reject_unknown(entry if isinstance(entry, dict) else {}, set(kinds), w_where)
        out.append(StabilityWarning(**{k: kind(need(entry, k, kind, w_where)) for k, kind in kinds.items()}))
    return tuple(out)


@dataclass(frozen=True)
class DeviceProfile:
    device: dict
    runner: dict
    target_model: dict
    target_processor: str
    target_costs: CostTable
    drafters: Mapping[str, DrafterProfile]
    overheads: Overheads = field(default_factory=Overheads)
    snapshot: dict = field(default_factory=dict)
    path: Path | None = None
    placement: Placement = UNRECORDED_PLACEMENT
    """Where each lane ran while every table was measured (docs/METHODS.md §4.1 Placement)."""
    pinning: dict = field(default_factory=dict)
    warnings: tuple[StabilityWarning, ...] = ()
    """Timings that spread more than UNSTABLE_SPREAD_PCT (found when profiling; absent in older files)."""
    environment: Environment | None = None
    """Who measured it with which runner build and models, when (None in older profiles)."""

    @property
    def name(self) -> str:
        """The device in this profile's placement, as result rows name it (e.g. local@split)."""
        return device_label(str(self.device.get("name", "device")), self.placement)

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

    def with_ratio_fit(self, fit: str) -> "DeviceProfile":
        """The same profile with unmeasured co-scheduling widths filled by `fit`."""
        if fit not in RATIO_FITS:
            raise SpecbenchError(f"unknown ratio fit '{fit}'. Available: {', '.join(RATIO_FITS)}")
        drafters = {name: replace(d, cosched=None if d.cosched is None else replace(d.cosched, fit=fit))
                    for name, d in self.drafters.items()}
        return replace(self, drafters=drafters)

    def with_depth_fit(self, fit: str) -> "DeviceProfile":
        """The same profile with every cost table priced outside its measured depths by `fit`."""
        if fit not in DEPTH_FITS:
            raise SpecbenchError(f"unknown depth fit '{fit}'. Available: {', '.join(DEPTH_FITS)}")
        drafters = {name: replace(d, costs=replace(d.costs, depth_fit=fit),
                                  all_rows_costs=None if d.all_rows_costs is None else
                                  replace(d.all_rows_costs, depth_fit=fit))
                    for name, d in self.drafters.items()}
        return replace(self, target_costs=replace(self.target_costs, depth_fit=fit), drafters=drafters)


def _ranges(widths: list[int]) -> str:
    """Sorted widths as runs, e.g. '1..7, 9..17' (the method spec's range notation)."""
    runs: list[list[int]] = []
    for w in widths:
        if runs and w == runs[-1][1] + 1:
            runs[-1][1] = w
        else:
            runs.append([w, w])
    return ", ".join(str(a) if a == b else f"{a}..{b}" for a, b in runs) or "none"


def _cost_table(doc: dict, where: Where, label: str) -> CostTable:
    reject_unknown(doc, {"depths", "seconds", "spread", "repetitions"}, where)
    depths_raw = need(doc, "depths", list, where)
    if not depths_raw or not all(isinstance(d, int) and d >= 0 for d in depths_raw) or sorted(set(depths_raw)) != depths_raw:
        raise where.at("depths").fail("a non-empty increasing list of KV depths (integers >= 0)", depths_raw)
    seconds_doc = need(doc, "seconds", dict, where)
    if not seconds_doc:
        raise where.at("seconds").fail("at least one width")
    seconds: dict[int, np.ndarray] = {}
    for key, values in seconds_doc.items():
        width = _width_key(key, where.at("seconds"))
        w_where = where.at("seconds").at(str(key))
        if not isinstance(values, list) or len(values) != len(depths_raw):
            raise w_where.fail(f"{len(depths_raw)} costs in seconds (one per depth)", values)
        array = np.asarray(values, dtype=np.float64)
        if not np.all(np.isfinite(array)) or np.any(array <= 0):
            raise w_where.fail("costs > 0 seconds", values)
        seconds[width] = array
    return CostTable(np.asarray(depths_raw, dtype=np.float64), seconds, label)


def _width_key(key: object, where: Where) -> int:
    try:
        width = int(key)  # YAML gives ints, JSON gives strings
    except (TypeError, ValueError):
        raise where.fail("integer widths as keys", key) from None
    if width < 1:
        raise where.fail("widths >= 1", key)
    return width


def _cosched(doc: dict, where: Where) -> CoSchedule:
    """`{depths: [...], ratios: {width: {rho_target: [per depth], rho_drafter: [...]}}}`; version 1
    profiles hold `{width: {rho_target, rho_drafter}}`, measured at depth 0 only."""
    if "ratios" in doc or "depths" in doc:
        reject_unknown(doc, {"depths", "ratios"}, where)
        depths = need(doc, "depths", list, where)
        if not depths or not all(isinstance(d, int) and d >= 0 for d in depths) or sorted(set(depths)) != depths:
            raise where.at("depths").fail("a non-empty increasing list of KV depths (integers >= 0)", depths)
        entries, r_where = need(doc, "ratios", dict, where), where.at("ratios")
    else:
        depths, entries, r_where = [0], {k: {n: [v] for n, v in e.items()} if isinstance(e, dict) else e
                                         for k, e in doc.items()}, where
    rho_t: dict[int, np.ndarray] = {}
    rho_d: dict[int, np.ndarray] = {}
    for key, entry in entries.items():
        width = _width_key(key, r_where)
        e_where = r_where.at(str(key))
        reject_unknown(entry if isinstance(entry, dict) else {}, {"rho_target", "rho_drafter", "spread"}, e_where)
        for name, out in (("rho_target", rho_t), ("rho_drafter", rho_d)):
            values = need(entry, name, list, e_where)
            array = np.asarray(values, dtype=np.float64) if all(isinstance(v, (int, float)) for v in values) else None
            if array is None or len(array) != len(depths) or not np.all(np.isfinite(array)) or np.any(array <= 0):
                raise e_where.at(name).fail(f"{len(depths)} slowdown ratios > 0 (one per depth)", values)
            out[width] = array
    if not rho_t:
        raise where.fail("at least one measured width")
    return CoSchedule(np.asarray(depths, dtype=np.float64), rho_t, rho_d)


def _declared(entry: dict, where: Where) -> DeclaredCost | None:
    """A drafter entry's `declared` block: {source, fraction_of_target} in place of `costs`, or
    {source} beside a `costs` table measured elsewhere."""
    doc = need(entry, "declared", dict, where, None)
    if doc is None:
        return None
    d_where = where.at("declared")
    reject_unknown(doc, {"source", "fraction_of_target"}, d_where)
    source = need(doc, "source", str, d_where)
    if not source.strip():
        raise d_where.at("source").fail("a non-empty text naming where the costs come from", source)
    fraction = need(doc, "fraction_of_target", float, d_where, None)
    if fraction is None:
        if "costs" not in entry:
            raise where.at("costs").fail("a mapping (missing; a declared drafter has `costs` from another harness, "
                                         "or declared.fraction_of_target)")
        return DeclaredCost(source)
    if not fraction > 0:
        raise d_where.at("fraction_of_target").fail("a number > 0 (the share of the target's CT(n, depth))",
                                                    fraction)
    for key in ("costs", "costs_all_rows"):
        if key in entry:
            raise where.at(key).fail("absent when declared.fraction_of_target gives the costs (one or the other)")
    return DeclaredCost(source, float(fraction))


def _scaled(table: CostTable, fraction: float, label: str) -> CostTable:
    """`fraction` x every cost of `table`, at its depths and widths."""
    return CostTable(table.depths, {w: fraction * c for w, c in table.seconds.items()}, label)


_TOP_KEYS = frozenset({"kind", "schema_version", "device", "runner", "snapshot", "target", "drafters", "overheads",
                       "notes", "placement", "pinning", "warnings", ENV_KEY})


def profile_from_dict(doc: dict, path: Path) -> DeviceProfile:
    where = Where(path)
    check_header(doc, KIND, VERSIONS, where)
    reject_unknown(doc, _TOP_KEYS, where)
    device = need(doc, "device", dict, where)
    need(device, "name", str, where.at("device"))
    target = need(doc, "target", dict, where)
    t_where = where.at("target")
    reject_unknown(target, {"model", "processor", "costs", "threads"}, t_where)
    target_costs = _cost_table(need(target, "costs", dict, t_where), t_where.at("costs"), f"profile {path} target")
    drafters: dict[str, DrafterProfile] = {}
    for i, entry in enumerate(need(doc, "drafters", list, where, [])):
        d_where = where.at("drafters").at(i)
        reject_unknown(entry, {"name", "model", "processor", "costs", "costs_all_rows", "cosched", "threads",
                               "declared"}, d_where)
        name = need(entry, "name", str, d_where)
        if name in drafters:
            raise d_where.at("name").fail("a drafter name not used by another entry", name)
        cosched_doc = need(entry, "cosched", dict, d_where, None)
        all_rows_doc = need(entry, "costs_all_rows", dict, d_where, None)
        label = f"profile {path} drafter '{name}'"
        declared = _declared(entry, d_where)
        if declared is not None and declared.fraction_of_target is not None:
            costs = _scaled(target_costs, declared.fraction_of_target, f"{label} (declared)")
            all_rows = costs  # a declared step has one price, whichever logits it keeps
        else:
            costs = _cost_table(need(entry, "costs", dict, d_where), d_where.at("costs"), label)
            all_rows = None if all_rows_doc is None else _cost_table(all_rows_doc, d_where.at("costs_all_rows"),
                                                                     f"{label} (all logit rows)")
        drafters[name] = DrafterProfile(
            name, need(entry, "model", dict, d_where), need(entry, "processor", str, d_where, "cpu"), costs,
            None if cosched_doc is None else _cosched(cosched_doc, d_where.at("cosched")), all_rows, declared)
    over_doc = need(doc, "overheads", dict, where, {})
    reject_unknown(over_doc, {"producer_startup_s", "publish_s", "align_s"}, where.at("overheads"))
    overheads = Overheads(**{k: float(need(over_doc, k, float, where.at("overheads"))) for k in over_doc})
    for key, value in vars(overheads).items():
        if value < 0:
            raise where.at("overheads").at(key).fail("seconds >= 0", value)
    if doc["schema_version"] >= 2:
        placement = placement_from_dict(need(doc, "placement", dict, where), where.at("placement"))
    else:
        placement = UNRECORDED_PLACEMENT
    environment = manifest_environment(doc, where)
    runner = need(doc, "runner", dict, where, {})
    if environment is not None and environment.runner is not None:
        if runner:
            raise where.at("runner").fail(f"no top-level runner beside {ENV_KEY}.runner (one record of the build)")
        runner = runner_dict(environment.runner)
    return DeviceProfile(device, runner, need(target, "model", dict, t_where),
                         need(target, "processor", str, t_where, "cpu"), target_costs, drafters, overheads,
                         need(doc, "snapshot", dict, where, {}), path, placement,
                         need(doc, "pinning", dict, where, {}),
                         warnings=warnings_from_doc(doc.get("warnings", []), where.at("warnings")),
                         environment=environment)


def load_profile(path: Path) -> DeviceProfile:
    path = Path(path)
    doc = load_yaml(path)
    return profile_from_dict(doc, path)


def _table_doc(table: CostTable) -> dict:
    return {"depths": [int(d) for d in table.depths],
            "seconds": {int(w): [float(c) for c in table.seconds[w]] for w in table.widths()}}


def profile_to_dict(profile: DeviceProfile) -> dict:
    drafters = []
    for d in profile.drafters.values():
        entry = {"name": d.name, "model": d.model, "processor": d.processor}
        if d.declared is None or d.declared.fraction_of_target is None:
            entry["costs"] = _table_doc(d.costs)
            if d.all_rows_costs is not None:
                entry["costs_all_rows"] = _table_doc(d.all_rows_costs)
        if d.declared is not None:
            entry["declared"] = {"source": d.declared.source}
            if d.declared.fraction_of_target is not None:
                entry["declared"]["fraction_of_target"] = d.declared.fraction_of_target
        if d.cosched is not None:
            entry["cosched"] = {"depths": [int(x) for x in d.cosched.depths],
                                "ratios": {int(w): {"rho_target": [float(v) for v in d.cosched.rho_target[w]],
                                                    "rho_drafter": [float(v) for v in d.cosched.rho_drafter[w]]}
                                           for w in sorted(d.cosched.rho_target)}}
        drafters.append(entry)
    head = {"runner": profile.runner} if profile.environment is None else \
        {ENV_KEY: environment_to_dict(profile.environment)}
    return {"kind": KIND, "schema_version": VERSIONS[-1], **head, "device": profile.device,
            "placement": profile.placement.as_dict(), "pinning": profile.pinning, "snapshot": profile.snapshot,
            "target": {"model": profile.target_model, "processor": profile.target_processor,
                       "costs": _table_doc(profile.target_costs)},
            "drafters": drafters, "overheads": vars(profile.overheads)} | (
                {"warnings": warnings_doc(profile.warnings)} if profile.warnings else {})


def save_profile(path: Path, profile: DeviceProfile) -> None:
    write_atomic(Path(path), dump_yaml(profile_to_dict(profile)))
