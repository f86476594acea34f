"""Pricing a forward from a profile's measured cells (docs/METHODS.md §4 The device profile and its placement):
seconds per forward by width, interpolated in KV depth, and the co-scheduling slowdowns of two lanes running
together. Costs are interpolated linearly in KV depth between measured depths and held flat outside them
(`DEPTH_POLICY`); a depth outside is flagged as extrapolated (`CostTable.extrapolates`) and
`CostFit.DEPTH_LINEAR` extends the nearest measured segment instead. Widths without a measured co-scheduling
ratio use the median of the measured ratios and are flagged as extrapolated (`RATIO_FITS` the sensitivity
variants). The tables are what a profile file holds (schemas/profiles.py reads and writes them)."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from specbench.errors import MissingCostError
from specbench.schemas.fileio import StrEnum

DEPTH_POLICY = "linear-in-depth, flat outside the measured depths"


class CostFit(StrEnum):
    """A fill-in of what a profile did not measure (a results row's `cost_fit`)."""

    MEDIAN = "median"
    """The median of the measured co-scheduling ratios for an unmeasured width (every table's rows)."""
    MIN = "min"
    """Their minimum (a sensitivity variant)."""
    MAX = "max"
    """Their maximum (a sensitivity variant)."""
    DEPTH_FLAT = "depth-flat"
    """Costs held flat outside the measured depths (DEPTH_POLICY)."""
    DEPTH_LINEAR = "depth-linear"
    """The nearest measured segment extended beyond the measured depths (a sensitivity variant)."""


RATIO_FITS = (CostFit.MEDIAN, CostFit.MIN, CostFit.MAX)
"""Fills of unmeasured co-scheduling widths."""
DEPTH_FITS = (CostFit.DEPTH_FLAT, CostFit.DEPTH_LINEAR)
"""Fills of costs outside the measured depths."""


SERIAL_CLASSES = ("single", "wider")
"""`DecodeRatio`'s width classes, as its fields and a profile's keys name them: width 1, and widths 2 and more."""


@dataclass(frozen=True)
class DecodeRatio:
    """A model's forwards as short native serial decodes (target-only and SD) met them, over the cells' price for
    the same forwards (docs/METHODS.md §4.4 Overheads, "Serial decodes"): pooled, and per width class where the
    class had CLASS_FORWARDS forwards. The cells time one model's forwards back to back on random tokens; a decode
    interleaves two models on its own tokens, and on this project's host its forwards ran 0.83-1.20 x the cells
    of a validation block's refreshes, by model, width class and block."""

    realised: float
    """Pooled: the decodes' time over the cells' price for the same forwards."""
    forwards: int
    single: float | None = None
    """Width 1 alone (None: fewer than CLASS_FORWARDS such forwards)."""
    single_forwards: int = 0
    wider: float | None = None
    """Widths 2 and more, pooled (None: fewer than CLASS_FORWARDS)."""
    wider_forwards: int = 0
    host: HostWork | None = None
    """The host work after each forward in the same decodes (None: not measured; nothing is priced for it)."""

    def at(self, width: int) -> float:
        """The ratio priced at `width`: its class's, else the pooled one."""
        by_class = self.single if width == 1 else self.wider
        return self.realised if by_class is None else by_class

    def host_at(self, width: int) -> float:
        """Seconds of host work priced after a forward of `width`: its class's, else the pooled one, else 0."""
        return 0.0 if self.host is None else self.host.at(width)


@dataclass(frozen=True)
class HostWork:
    """Seconds a serial decode spent after a model's forward before the next forward began, or the decode ended
    (docs/METHODS.md §4.4 Overheads, "Serial decodes"): reading its logits and choosing the greedy token over every
    row it verified, rolling the KV cache back, mapping a draft into the other vocabulary. A forward's `us` times the
    forward alone, so without it a method's time is the sum of its forwards."""

    seconds: float
    """Mean over every timed forward."""
    forwards: int
    single: float | None = None
    """After width-1 forwards alone (None: fewer than CLASS_FORWARDS such forwards)."""
    single_forwards: int = 0
    wider: float | None = None
    """After forwards of widths 2 and more (None: fewer than CLASS_FORWARDS)."""
    wider_forwards: int = 0

    def at(self, width: int) -> float:
        by_class = self.single if width == 1 else self.wider
        return self.seconds if by_class is None else by_class


SerialForward = tuple[int, float, float, float | None]
"""(width, depth, microseconds, host microseconds after it or None) of one forward in a serial decode."""


def decode_ratio(forwards: Sequence[SerialForward], cells: CostTable) -> DecodeRatio | None:
    """The ratio `forwards` (of one model in serial decodes) met against `cells`' own price (their `decode` ratio
    left out), over the forwards of widths the cells measured, with the host work after them (`HostWork`, over
    those whose host time was timed); None without one."""
    cells = replace(cells, decode=None)
    sums = {True: [0.0, 0.0, 0], False: [0.0, 0.0, 0]}  # single-token? -> [time, price, forwards]
    hosts: dict[bool, list[float]] = {True: [], False: []}
    for width, depth, us, host_us in forwards:
        if width not in cells.seconds:
            continue  # a width the profile does not price needs no ratio
        acc = sums[width == 1]
        acc[0] += us
        acc[1] += 1e6 * cells.cost(width, depth)
        acc[2] += 1
        if host_us is not None:
            hosts[width == 1].append(host_us / 1e6)
    time, price, n = (sum(acc[i] for acc in sums.values()) for i in range(3))
    if n == 0 or price <= 0:
        return None

    def by_class(single: bool) -> tuple[float | None, int]:
        t, p, k = sums[single]
        return (t / p if k >= CLASS_FORWARDS and p > 0 else None), int(k)

    return DecodeRatio(time / price, int(n), *by_class(True), *by_class(False), host=host_work(hosts))


def timed_forwards(ops: Sequence[Mapping], decode_us: float) -> list[tuple[str, SerialForward]]:
    """(model, forward) of each op of a serial decode's op log, in order, the host work after it being the time
    from its end to the next op's start (`t_us` on the decode clock), or to the decode's end (`decode_us`) after
    the last; None for every op where the runner recorded no starts."""
    timed = all("t_us" in op for op in ops)
    out = []
    for i, op in enumerate(ops):
        host = None
        if timed:
            follows = float(ops[i + 1]["t_us"]) if i + 1 < len(ops) else decode_us
            host = max(follows - float(op["t_us"]) - float(op["us"]), 0.0)  # clocks a microsecond apart
        out.append((str(op["model"]), (int(op["width"]), float(op["depth"]), float(op["us"]), host)))
    return out


def host_work(hosts: Mapping[bool, Sequence[float]]) -> HostWork | None:
    """`HostWork` from the seconds after each forward, by whether it was width 1; None with none."""
    every = [*hosts[True], *hosts[False]]
    if not every:
        return None

    def by_class(single: bool) -> tuple[float | None, int]:
        mine = hosts[single]
        return (sum(mine) / len(mine) if len(mine) >= CLASS_FORWARDS else None), len(mine)

    return HostWork(sum(every) / len(every), len(every), *by_class(True), *by_class(False))


@dataclass(frozen=True)
class CostTable:
    """Seconds per forward of `width` tokens at KV depth, for one model on one processor."""

    depths: np.ndarray
    """Measured KV depths, increasing."""
    seconds: Mapping[int, np.ndarray]
    """width -> seconds at each measured depth."""
    label: str = "cost table"
    """Names the table in errors, e.g. 'profile pixel.yaml target'."""
    depth_fit: CostFit = CostFit.DEPTH_FLAT
    """One of DEPTH_FITS: depth-flat (DEPTH_POLICY) or depth-linear (the sensitivity variant)."""
    spread: Mapping[int, np.ndarray] | None = None
    """width -> standard deviation (seconds) of the timed samples at each depth (None: not recorded)."""
    repetitions: Mapping[int, np.ndarray] | None = None
    """width -> timed samples behind each depth's median (None: not recorded)."""
    achieved_precision: Mapping[int, np.ndarray] | None = None
    """width -> half-width of each depth's median's ~95% interval / the median (None: not recorded;
    docs/METHODS.md §4.2 Forward costs: CT, CD and the all-rows table)."""
    precision: float | None = None
    """The relative half-width the cells were measured to (None: a fixed count of repetitions)."""
    decode: DecodeRatio | None = None
    """The model's forwards as short native serial decodes met them, over these cells' price: every price is the
    cell times its width class's ratio (None: not measured; the cells are priced as they are)."""

    def widths(self) -> list[int]:
        return sorted(self.seconds)

    def require(self, width: int) -> np.ndarray:
        """The priced seconds of `width` at each measured depth: its cells, times the decodes' ratio."""
        costs = self.seconds.get(int(width))
        if costs is None:
            raise MissingCostError(f"{self.label}: no measured cost for width {width} "
                                   f"(measured widths: {width_ranges(self.widths())})",
                                   hint="profile the device with a larger --max-width")
        return costs if self.decode is None else costs * self.decode.at(int(width))

    def host(self, width: int) -> float:
        """Seconds of host work a decode spends after a forward of `width` (`HostWork`; 0 where not measured)."""
        return 0.0 if self.decode is None else self.decode.host_at(int(width))

    def price(self, width: int, depth: float) -> float:
        """What a forward costs a decode: the forward (`cost`) and the host work after it (`host`)."""
        return self.cost(width, depth) + self.host(width)

    def hosts(self, widths: np.ndarray) -> np.ndarray:
        """Vectorised `host`."""
        widths = np.asarray(widths, dtype=np.int64)
        if self.decode is None or self.decode.host is None:
            return np.zeros(len(widths))
        return np.where(widths == 1, self.host(1), self.host(2))

    def prices(self, widths: np.ndarray, depths: np.ndarray) -> np.ndarray:
        """Vectorised `price`, the same sums."""
        return self.costs(widths, depths) + self.hosts(widths)

    def cost(self, width: int, depth: float) -> float:
        costs = self.require(width)
        return float(interp_rows(costs[None, :], self.depths, np.zeros(1, dtype=np.int64), np.array([float(depth)]),
                                 self.depth_fit == CostFit.DEPTH_LINEAR)[0])

    def extrapolates(self, depths):
        """True where a depth lies outside the measured depths (a price the profile did not measure)."""
        depths = np.asarray(depths, dtype=np.float64)
        return (depths < self.depths[0]) | (depths > self.depths[-1])

    def matrix(self, max_width: int) -> np.ndarray:
        """[max_width + 1, n_depths] costs; NaN rows for widths not measured."""
        out = np.full((max_width + 1, len(self.depths)), np.nan)
        for width in self.seconds:
            if width <= max_width:
                out[width] = self.require(width)
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
                           self.depth_fit == CostFit.DEPTH_LINEAR)


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


CLASS_FORWARDS = 8
"""Forwards a width class (single-token steps, verifications) needs for its own ratio."""
DECODE_CLASSES = ("single", "verify")
"""`DecodeContention`'s width classes, as its fields and a profile's keys name them: single-token forwards, and
verifications (width 2 and more)."""
PRODUCER_CLASSES = ("producer_single", "producer_verify")
"""The producer's ratio in AS2D decodes by the target forward it ran beside: a single-token step (width 1) or a
verification (width 2 and more); named apart from the target's classes in a profile's `cosched.decode`."""


def pace_slices(count: int) -> tuple[np.ndarray, np.ndarray]:
    """(nodes, weights): the midpoints (in probability) of `count` equally likely slices of a standard normal, each
    weighted 1/count."""
    nodes = np.array([statistics.NormalDist().inv_cdf((k + 0.5) / count) for k in range(count)])
    return nodes, np.full(count, 1.0 / count)


PACE_NODE_COUNT = 15
"""Nodes of the pace scatter's mean (`DecodeContention.pace_sigma`)."""
PACE_NODES, PACE_WEIGHTS = pace_slices(PACE_NODE_COUNT)
"""AS2D's replay under the producer's pace scatter σ: the producer's timeline scaled by exp(σ z) at these z, the
midpoints (in probability) of PACE_NODE_COUNT equally likely slices of a standard normal, each weighted 1/count. A
window's time is a step function of the producer's pace (a batch lands before or after a forward boundary), which a
Gauss-Hermite rule, exact for polynomials, weighs in coarse lumps (its 7 nodes put 0.24 on each of z = ±1.15); equal
slices move by 1/count as an edge crosses a node. The middle node is z = 0, the timeline as priced."""
PACE_MIDDLE = PACE_NODE_COUNT // 2
PACE_NODES[PACE_MIDDLE] = 0.0  # exactly: the middle node is the timeline as priced, bit for bit
PRODUCER_FIELDS = ("producer", "producer_priced", "producer_forwards", "producer_single", "producer_single_forwards",
                   "producer_verify", "producer_verify_forwards", "pace_sigma", "pace_pairs")
"""`DecodeContention`'s fields that hold the producer's ratios and pace scatter, measured together."""


@dataclass(frozen=True)
class AfterProducer:
    """The target's forwards in native AS2D decodes that began after the producer's last step (docs/METHODS.md §4.3
    Co-scheduling ratios, "After the producer"): their time, the host work after each included, against their solo
    work (the price times the target-only decodes' speed beside them), by width. Replay runs the target alone at this
    ratio once the producer is done. It is a decode ratio, not a slowdown: a verification there ran 0.94-0.97 x its
    solo work on this project's host in `split`, where a serial decode's wider forwards (mostly SD's widest) and
    their host work (an SD verification rolls the drafter back too) set the price."""

    widths: Mapping[int, tuple[float, float, int]]
    """width -> (seconds, solo seconds, forwards), summed over the decodes: every width that ran there."""

    def ratio(self, keep: Callable[[int], bool]) -> tuple[float, int] | None:
        """(time over solo work, forwards) pooled over the widths `keep` takes (None: none ran)."""
        sums = [v for w, v in self.widths.items() if keep(w)]
        seconds, solo, forwards = (sum(v[i] for v in sums) for i in range(3))
        return (seconds / solo, int(forwards)) if forwards and solo > 0 else None

    def at(self, width: int) -> float:
        """The ratio priced at `width`: its own where it had CLASS_FORWARDS forwards, else its class's (width 1, or
        widths 2 and more pooled), else every width's pooled."""
        for keep in (lambda w: w == width, lambda w: (w == 1) == (width == 1)):
            pooled = self.ratio(keep)
            if pooled is not None and pooled[1] >= CLASS_FORWARDS:
                return pooled[0]
        every = self.ratio(lambda w: True)
        return 1.0 if every is None else every[0]


@dataclass(frozen=True)
class DecodeContention:
    """The target's co-scheduling ratio as a short native AS2D decode met it, against the cells' price
    for the same forwards (docs/METHODS.md §4.3 Co-scheduling ratios, "As a decode meets it")."""

    realised: float
    """Pooled over the decodes' target forwards that ran wholly beside the producer: their time over their
    solo work (the profile's price scaled by the target-only decodes beside them)."""
    priced: float
    """The cells' ratio for the same forwards, weighted by their time: what the cells would have priced."""
    forwards: int
    """Target forwards behind both."""
    single: float | None = None
    """The ratio the single-token forwards (width 1) realised alone (None: fewer than CLASS_FORWARDS of them)."""
    single_forwards: int = 0
    verify: float | None = None
    """The ratio the verifications (width 2 and more) realised, pooled (None: fewer than CLASS_FORWARDS)."""
    verify_forwards: int = 0
    below_one: Mapping[str, float] = field(default_factory=dict)
    """What the decodes measured where it fell below 1 (`realised`, `single`, `verify`, `producer`): a lane runs
    no faster beside the other than alone, so such a ratio is noise (few forwards, or the target-only decodes that
    scale the solo work ran slow) and is priced as 1, the least slowdown there is, and warned about."""
    producer: float | None = None
    """The producer's ratio the same decodes realised, pooled over its forwards that overlapped a target forward
    (`decomposition.producer_contention`), priced at every width and depth in place of the cells' `rho_drafter`
    (None: fewer than CLASS_FORWARDS such forwards, or not measured; the cells are priced)."""
    producer_priced: float | None = None
    """The cells' `rho_drafter` for the same forwards, weighted by their overlap."""
    producer_forwards: int = 0
    producer_single: float | None = None
    """The producer's ratio over its forwards that ran mostly beside single-token steps, pooled the same way
    (None: fewer than CLASS_FORWARDS of them)."""
    producer_single_forwards: int = 0
    producer_verify: float | None = None
    """The producer's ratio over its forwards that ran mostly beside verifications (None: fewer than
    CLASS_FORWARDS)."""
    producer_verify_forwards: int = 0
    pace_sigma: float | None = None
    """How far the producer's pace scatters against the target's from one decode of a window to the next: the
    standard deviation of ln(producer forwards' time over their price) less ln(target forwards' time over theirs)
    (`decomposition.pace_scatter`; None: not measured, replay prices one timeline)."""
    pace_pairs: int = 0
    """The degrees of freedom behind `pace_sigma`: decodes less the windows they decoded."""
    after: AfterProducer | None = None
    """The target's ratio alone once the producer is done, by width (None: not measured; replay prices 1)."""

    def target(self, width: int) -> float | None:
        """The target's ratio priced at `width`: its class's (None: the class had too few forwards; the cells'
        ratio at the width is priced, scaled by `calibration`). A single-token step slows more beside the
        producer than a verification does (on this project's host in `shared`: about 2.3–3.0 against 1.6–1.8),
        and which of them dominates a decode depends on its drafts, so the pooled ratio of decodes that were
        nearly all single steps would price a verification as one."""
        return self.single if width == 1 else self.verify

    @property
    def calibration(self) -> float:
        """What the decodes' target forwards realised over what the cells priced for the same forwards."""
        return self.realised / self.priced

    def drafter(self, width: int) -> float | None:
        """The producer's ratio priced beside a target forward of `width`: its class's, else the pooled one (None:
        not measured, the cells' are priced). A drafter forward beside a verification slows more than one beside
        a single-token step (on this project's host in `shared`, Gemma's: 2.62 against 1.96), and a profile's
        decodes (AS2D B=7) hold another mix of the two than a decode at B=3."""
        by_class = self.producer_single if width == 1 else self.producer_verify
        return self.producer if by_class is None else by_class


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
    fit: CostFit = CostFit.MEDIAN
    """How unmeasured widths are filled: median (default), min or max of the measured ratios."""
    repetitions: Mapping[int, np.ndarray] | None = None
    """Per measured width, the target forwards per side behind each depth's ratios (None: not recorded)."""
    achieved_precision: Mapping[int, np.ndarray] | None = None
    """Per measured width, the larger relative half-width of the two ratios' ~95% intervals at each
    depth (core/cosched.py; None: not recorded)."""
    precision: float | None = None
    """The relative half-width the cells were measured to (None: a fixed count of repetitions)."""
    decode: DecodeContention | None = None
    """Both lanes' ratios as a native AS2D decode met them: the target's per width class
    (`DecodeContention.target`) and the producer's, each priced at every depth in place of the cells' (None: not
    measured; the cells are priced)."""

    def _target(self, width: int, values: np.ndarray) -> np.ndarray:
        if self.decode is None:
            return values
        by_class = self.decode.target(width)
        return values * self.decode.calibration if by_class is None else np.full(len(self.depths), by_class)

    def _drafter(self, width: int, values: np.ndarray) -> np.ndarray:
        producer = None if self.decode is None else self.decode.drafter(width)
        return values if producer is None else np.full(len(self.depths), producer)

    def _fill(self, measured: Mapping[int, np.ndarray]) -> np.ndarray:
        values = np.stack(list(measured.values()))
        fills: dict[str, Callable[..., np.ndarray]] = {CostFit.MEDIAN: np.median, CostFit.MIN: np.min,
                                                        CostFit.MAX: np.max}
        return fills[self.fit](values, axis=0)

    def row(self, width: int) -> tuple[np.ndarray, np.ndarray, bool]:
        """(rho_target, rho_drafter, filled) as priced at each measured depth for one target width."""
        if width in self.rho_target and width in self.rho_drafter:
            return (self._target(width, self.rho_target[width]), self._drafter(width, self.rho_drafter[width]),
                    False)
        return (self._target(width, self._fill(self.rho_target)), self._drafter(width, self._fill(self.rho_drafter)),
                True)

    def ratios(self, width: int, depth: float) -> tuple[float, float, bool]:
        """(rho_target, rho_drafter, extrapolated) for one target width at one KV depth."""
        rho_t, rho_d, extrapolated = self.row(width)
        both = interp_rows(np.stack([rho_t, rho_d]), self.depths, np.array([0, 1]), np.full(2, float(depth)))
        return float(both[0]), float(both[1]), extrapolated

    def after(self, width: int) -> float:
        """The target's ratio alone at `width` once the producer is done (`AfterProducer`; 1 where not measured)."""
        return 1.0 if self.decode is None or self.decode.after is None else self.decode.after.at(width)

    def dense(self, max_width: int, max_depth: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """[max_width + 1, max_depth + 1] rho_target and rho_drafter at every integer depth, and
        [max_width + 1] extrapolated flags: the same numbers `ratios` gives, for bulk replay."""
        rows = [self.row(w) for w in range(max_width + 1)]
        depths = np.arange(max_depth + 1, dtype=np.float64)
        widths, at = np.repeat(np.arange(max_width + 1), max_depth + 1), np.tile(depths, max_width + 1)
        out = [interp_rows(np.stack([r[k] for r in rows]), self.depths, widths, at)
               .reshape(max_width + 1, max_depth + 1) for k in (0, 1)]
        return out[0], out[1], np.array([r[2] for r in rows])



def width_ranges(widths: list[int]) -> str:
    """Sorted widths as runs, e.g. '1..7, 9..17' (the method spec's range notation)."""
    runs: list[list[int]] = []
    for w in widths:
        if runs and w == runs[-1][1] + 1:
            runs[-1][1] = w
        else:
            runs.append([w, w])
    return ", ".join(str(a) if a == b else f"{a}..{b}" for a, b in runs) or "none"
