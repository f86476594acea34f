"""Replay a whole study at once: the same numbers as `replay.reference`, computed in bulk.

* Serial methods decide the same on every device, so each (window, configuration) is
  decoded once (`serial`: its operations as arrays) and priced for all devices with
  vectorised lookups.
* AS2D runs in lockstep across all (configuration, window) of a device (`lockstep`).

Results come back as a pandas DataFrame with one row per (device, configuration, window)
and the columns of `results.WindowResult`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

import numpy as np
import pandas as pd

from specbench.core.methods.configs import As2dConfig, MethodConfig, SdConfig, TargetConfig, row_fields
from specbench.core.positions import counts, histograms
from specbench.core.pricing import PACE_MIDDLE, PACE_WEIGHTS, CostFit
from specbench.core.replay.lockstep import LockstepResult, Simulation, simulate_lockstep
from specbench.core.replay.reference import pace_factors, pace_sigma
from specbench.core.replay.serial import sd_ops_many, serial_ops
from specbench.errors import SpecbenchError
from specbench.schemas.profiles import DeviceProfile
from specbench.schemas.results import ROW_FIELDS
from specbench.schemas.traces import TraceFile, WindowTrace
from specbench.schemas.windows import Window

Progress = Callable[[int], None]
"""Called with the number of window replays just finished."""
COST_FITS = (CostFit.MEDIAN, CostFit.MIN, CostFit.MAX, CostFit.DEPTH_LINEAR)
"""Fill-ins of what a profile did not measure (a row's `cost_fit`): median co-scheduling ratio
and depth-flat (every table's rows); min/max ratio; depth-linear (median ratio, costs beyond
the measured depths extended linearly from the nearest two)."""


def fit_profile(profile: DeviceProfile, fit: str) -> DeviceProfile:
    """`profile` priced with the fill-in `fit` (one of COST_FITS)."""
    if fit == CostFit.DEPTH_LINEAR:
        return profile.with_depth_fit(CostFit.DEPTH_LINEAR)
    return profile.with_ratio_fit(fit)


def trace_for(traces: Mapping[str, TraceFile], config: MethodConfig, window_id: str) -> tuple[str, WindowTrace]:
    """The trace a configuration replays: its drafter's, or the only one there is."""
    name = getattr(config, "drafter", None)
    if name is None:
        if isinstance(config, TargetConfig) or len(traces) == 1:
            name = next(iter(traces))
        else:
            raise SpecbenchError(f"{config.label}: several drafters traced ({', '.join(sorted(traces))}); "
                                 "name one with drafter=NAME")
    if name not in traces:
        raise SpecbenchError(f"{config.label}: no traces for drafter '{name}' (traced: {', '.join(sorted(traces))})")
    window = traces[name].windows.get(window_id)
    if window is None:
        raise SpecbenchError(f"{traces[name].path}: no trace for window '{window_id}'")
    return name, window


def _base_columns(profile: DeviceProfile, config: MethodConfig, windows: Sequence[Window],
                  window_traces: Sequence[WindowTrace]) -> dict:
    count = len(windows)
    # object columns: the parameters a method lacks stay None, and its integers stay integers
    fields = {key: pd.Series([value] * count, dtype=object) for key, value in row_fields(config).items()}
    return {"device": [profile.name] * count, **fields, **_window_columns(windows, window_traces),
            "placement": [profile.placement.key] * count}


def _window_columns(windows: Sequence[Window], window_traces: Sequence[WindowTrace]) -> dict:
    """The columns that depend only on the window and its trace."""
    return {"window_id": [w.window_id for w in windows], "window_sha256": [w.window_sha256 for w in windows],
            "dataset": [w.dataset for w in windows], "split": [w.split.value for w in windows],
            "category": pd.Series([w.category for w in windows], dtype=object),
            "tokens": np.array([t.n_tokens - 1 for t in window_traces], dtype=np.int64),
            # every method commits the trace's y, so it answers the trace's text
            "text": [t.text for t in window_traces]}


def replay_serial(windows: Sequence[Window], traces: Mapping[str, TraceFile], profiles: Sequence[DeviceProfile],
                  config: MethodConfig, progress: Progress | None = None) -> pd.DataFrame:
    used = [trace_for(traces, config, w.window_id) for w in windows]
    if isinstance(config, SdConfig) and all(trace.drafts is None or (trace.drafts.cross is None and
                                                                     trace.drafts.lookup is None) for _, trace in used):
        ops = sd_ops_many([trace for _, trace in used], [w.cap for w in windows], config)
    else:
        ops = [serial_ops(config, trace, w.cap, name) for w, (name, trace) in zip(windows, used, strict=False)]
    n = len(ops)
    t_owner = np.repeat(np.arange(n), [len(o.target_width) for o in ops])
    d_owner = np.repeat(np.arange(n), [len(o.drafter_width) for o in ops])
    t_width = np.concatenate([o.target_width for o in ops]) if ops else np.zeros(0, dtype=np.int64)
    t_depth = np.concatenate([o.target_depth for o in ops]).astype(np.float64) if ops else np.zeros(0)
    d_width = np.concatenate([o.drafter_width for o in ops]) if ops else np.zeros(0, dtype=np.int64)
    d_depth = np.concatenate([o.drafter_depth for o in ops]).astype(np.float64) if ops else np.zeros(0)
    d_all_rows = np.concatenate([o.drafter_all_rows if o.drafter_all_rows is not None else
                                 np.zeros(len(o.drafter_width), dtype=bool) for o in ops]) if ops else np.zeros(0, bool)
    t_accepted = np.concatenate([o.target_accepted for o in ops]) if ops else np.zeros(0, dtype=np.int64)
    positions = [pd.Series(c, dtype=object) for c in counts(*histograms(t_owner, t_width - 1, t_accepted, n))]
    frames = []
    for profile in profiles:
        v = np.zeros(n)
        np.add.at(v, t_owner, profile.target_costs.prices(t_width, t_depth))  # in op order, like the scalar sum
        outside = np.bincount(t_owner, weights=profile.target_costs.extrapolates(t_depth), minlength=n)
        d = np.zeros(n)
        if len(d_width):
            drafter = profile.drafter(getattr(config, "drafter", None))
            cost = drafter.costs.prices(d_width, d_depth)
            outside_d = drafter.costs.extrapolates(d_depth)
            if d_all_rows.any():
                cost[d_all_rows] = drafter.ingest_costs().prices(d_width[d_all_rows], d_depth[d_all_rows])
                outside_d[d_all_rows] = drafter.ingest_costs().extrapolates(d_depth[d_all_rows])
            np.add.at(d, d_owner, cost)
            outside += np.bincount(d_owner, weights=outside_d, minlength=n)
        columns = _base_columns(profile, config, windows, [trace for _, trace in used])
        columns["reached_at"], columns["accepted_at"] = positions
        columns.update(decode_s=d + v, target_forwards=[o.target_forwards for o in ops],
                       proposed=[o.proposed for o in ops], accepted=[o.accepted for o in ops],
                       multi_token_forwards=[o.multi_token_forwards for o in ops],
                       drafter_forwards=np.bincount(d_owner, minlength=n), d_s=d, v_s=v, o_s=np.zeros(n),
                       h_s=np.zeros(n), extrapolated=np.zeros(n, dtype=bool), lossless=[o.lossless for o in ops],
                       source=["replay"] * n, cost_fit=["median"] * n, depth_extrapolated=outside > 0)
        frames.append(pd.DataFrame(columns, columns=list(ROW_FIELDS)))
        if progress:
            progress(n)
    return pd.concat(frames, ignore_index=True)


def replay_as2d(windows: Sequence[Window], traces: Mapping[str, TraceFile], profile: DeviceProfile,
                configs: Sequence[As2dConfig], progress: Progress | None = None) -> pd.DataFrame:
    """Every (configuration, window) of AS2D on one device, simulated in lockstep."""
    sims = []
    # configurations of one drafter replay the same traces: their window columns are built once
    drafter_traces: dict[str | None, list[WindowTrace]] = {}
    drafter_columns: dict[str | None, dict[str, pd.Series]] = {}
    for config in configs:
        if config.drafter not in drafter_traces:
            window_traces = drafter_traces[config.drafter] = [trace_for(traces, config, w.window_id)[1]
                                                              for w in windows]
            drafter_columns[config.drafter] = {key: pd.Series(value) for key, value in
                                               _window_columns(windows, window_traces).items()}
        sims += [Simulation(config, i, trace) for i, trace in enumerate(drafter_traces[config.drafter])]
    if not sims:
        return pd.DataFrame(columns=list(ROW_FIELDS))
    result = _expected_lockstep(sims, windows, profile, progress)
    count = len(sims)
    base = {key: pd.concat([drafter_columns[c.drafter][key] for c in configs], ignore_index=True)
            for key in next(iter(drafter_columns.values()))}
    fields = [row_fields(config) for config in configs]
    for key in fields[0]:  # object columns, as in `_base_columns`: one value per configuration, window after window
        values = np.empty(len(configs), dtype=object)
        for i, config_fields in enumerate(fields):
            values[i] = config_fields[key]
        base[key] = pd.Series(np.repeat(values, len(windows)), dtype=object)
    base["device"] = pd.Series([profile.name] * count)
    base["placement"] = pd.Series([profile.placement.key] * count)
    base.update(decode_s=result.decode_s, target_forwards=result.target_forwards, proposed=result.proposed,
                accepted=result.accepted,
                multi_token_forwards=result.multi_token_forwards, drafter_forwards=result.drafter_forwards,
                d_s=result.d_s, v_s=result.v_s, o_s=result.o_s, h_s=result.h_s, extrapolated=result.extrapolated,
                lossless=np.ones(count, dtype=bool), source=np.full(count, "replay"),
                cost_fit=np.full(count, "median"), depth_extrapolated=result.depth_extrapolated,
                reached_at=pd.Series(result.reached_at, dtype=object),
                accepted_at=pd.Series(result.accepted_at, dtype=object))
    return pd.DataFrame(base, columns=list(ROW_FIELDS))


def _expected_lockstep(sims: Sequence[Simulation], windows: Sequence[Window], profile: DeviceProfile,
                       progress: Progress | None) -> LockstepResult:
    """`simulate_lockstep` of `sims`, each priced as `reference.expected_as2d` prices it: where the profile
    measured its drafter's pace scatter, one simulation per pace node with the producer's timeline scaled, their
    times weighted in node order (`reference.expected_timing`, the same operations), the counts the middle
    node's, a flag where any node raised it."""
    nodes: list[Simulation] = []
    firsts: list[int] = []  # per simulation, its first node's index in `nodes`
    for sim in sims:
        firsts.append(len(nodes))
        sigma = pace_sigma(profile, sim.config, sim.trace)
        factors = pace_factors(sigma) if sigma > 0 else [1.0]
        nodes += [replace(sim, producer_scale=float(f)) for f in factors]
    if len(nodes) == len(sims):
        return simulate_lockstep(sims, windows, profile, progress)
    result = simulate_lockstep(nodes, windows, profile, None if progress is None else _per_window(progress, len(sims),
                                                                                                  len(nodes)))
    starts = np.array(firsts)
    spread = np.diff(np.append(starts, len(nodes))) > 1  # the simulations priced over the pace nodes
    middle = np.where(spread, starts + PACE_MIDDLE, starts)
    times = {}
    for name in ("decode_s", "d_s", "v_s", "o_s", "h_s"):
        values = getattr(result, name)
        expected = np.zeros(len(sims))
        for k, weight in enumerate(PACE_WEIGHTS):
            at = np.where(spread, starts + k, starts)
            expected = expected + float(weight) * values[at]
        times[name] = np.where(spread, expected, values[starts])
    flags = {}
    for name in ("extrapolated", "depth_extrapolated"):
        values = getattr(result, name)
        flags[name] = np.array([values[a:b].any() for a, b in zip(starts, np.append(starts[1:], len(nodes)),
                                                                    strict=True)])
    picked = {name: getattr(result, name)[middle] for name in ("target_forwards", "proposed", "accepted",
                                                               "multi_token_forwards", "drafter_forwards")}
    return LockstepResult(**times, **picked, **flags, reached_at=[result.reached_at[i] for i in middle],
                          accepted_at=[result.accepted_at[i] for i in middle])


def _per_window(progress: Progress, windows: int, nodes: int) -> Progress:
    """`progress` told of window replays as their node simulations finish, in proportion."""
    done = [0, 0]  # node simulations finished, window replays reported

    def report(finished: int) -> None:
        done[0] += finished
        whole = done[0] * windows // nodes
        if whole > done[1]:
            progress(whole - done[1])
            done[1] = whole

    return report


Task = tuple[str, MethodConfig | int]  # ("serial", its configuration) or ("as2d", a device's index)
"""An independent piece of a study: ("serial", config) or ("as2d", device index)."""


def study_tasks(profiles: Sequence[DeviceProfile], configs: Sequence[MethodConfig]) -> list[tuple[Task, int]]:
    """The independent pieces of a study with their sizes in window replays: each serial
    configuration (decoded once, priced on every device), and AS2D split by device."""
    n_as2d = sum(isinstance(c, As2dConfig) for c in configs)
    tasks: list[tuple[Task, int]] = [(("serial", c), len(profiles)) for c in configs if not isinstance(c, As2dConfig)]
    if n_as2d:
        tasks += [(("as2d", i), n_as2d) for i in range(len(profiles))]
    return tasks


def run_task(windows: Sequence[Window], traces: Mapping[str, TraceFile], profiles: Sequence[DeviceProfile],
             configs: Sequence[MethodConfig], task: Task) -> pd.DataFrame:
    kind, what = task
    if kind == "serial" and not isinstance(what, int):
        return replay_serial(windows, traces, profiles, what)
    if kind == "as2d" and isinstance(what, int):
        return replay_as2d(windows, traces, profiles[what], [c for c in configs if isinstance(c, As2dConfig)])
    raise ValueError(f"not a study task: {task!r}")


def replay_study(windows: Sequence[Window], traces: Mapping[str, TraceFile], profiles: Sequence[DeviceProfile],
                 configs: Sequence[MethodConfig], progress: Progress | None = None,
                 cost_fit: str = "median") -> pd.DataFrame:
    """All (device, configuration, window) replays of a study, one row each, in task order.
    `cost_fit` (one of COST_FITS) fills what the profile did not measure: median, or a
    sensitivity variant. `app.parallel_replay` runs the same tasks in several processes."""
    profiles = [fit_profile(p, cost_fit) for p in profiles]
    frames = []
    for task, size in study_tasks(profiles, configs):
        frames.append(run_task(windows, traces, profiles, configs, task))
        if progress:
            progress(size * len(windows))
    return study_rows(frames, cost_fit)


def study_rows(frames: Sequence[pd.DataFrame], cost_fit: str) -> pd.DataFrame:
    """The tasks' frames, in task order, as one table of rows."""
    if not frames:
        return pd.DataFrame(columns=list(ROW_FIELDS))
    rows = pd.concat(frames, ignore_index=True)
    rows["cost_fit"] = cost_fit
    return rows
