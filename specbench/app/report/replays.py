"""What a report replays again from a run's inputs: the sensitivity variants the results lack
and the horizon sweep."""

from __future__ import annotations

import pandas as pd

from specbench.app.parallel_replay import replay_study_in_processes
from specbench.app.report.inputs import LoadedResults, first_profile, inputs_of, replay_manifests, replayed_methods
from specbench.app.report.rows import configs_of
from specbench.core import metrics
from specbench.errors import SpecbenchError
from specbench.schemas.results import Source


def add_sensitivity(loaded: LoadedResults, progress=None) -> None:
    """Replay the cost fill-in variants the results lack (study.SENSITIVITY_FITS: min and max
    co-scheduling ratios for AS2D, depths extended linearly for every method) from the manifests' inputs."""
    from specbench.app.study import SENSITIVITY_FITS, fit_configs

    frame = loaded.frame
    missing_fits = [fit for fit in SENSITIVITY_FITS if not (frame["cost_fit"] == fit).any()]
    if not missing_fits:
        return
    manifests = replay_manifests(loaded)
    if not manifests:
        raise SpecbenchError("--sensitivity needs rows from a replay run")
    extra = []
    for manifest in manifests:
        configs = list(configs_of(frame[frame["source"] == Source.REPLAY], replayed_methods(manifest)).values())
        if not any(fit_configs(configs, fit) for fit in missing_fits):
            continue
        inputs = inputs_of(manifest, option="--sensitivity")
        subset = set(frame["window_id"])
        inputs.windows[:] = [w for w in inputs.windows if w.window_id in subset]
        for fit in missing_fits:
            todo = fit_configs(configs, fit)
            if todo:
                extra.append(replay_study_in_processes(inputs.windows, inputs.traces, inputs.profiles, todo, progress,
                                                       None, fit))
    if extra:
        loaded.frame = pd.concat([frame, *extra], ignore_index=True)


def horizon_tables(loaded: LoadedResults) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """The horizon sweep of every traced drafter on the first device, from the first replay run's inputs:
    (summary, per-depth acceptance, notes naming the horizons left out). Windows that diverged
    natively on that device leave the sweep (§7.6 Divergent windows), and so does every K the profile's target widths
    or a drafter's traced rows cannot price."""
    from specbench.core.replay.horizon import HORIZONS, horizon_sweep

    manifests = replay_manifests(loaded)
    if not manifests:
        raise SpecbenchError("--horizon needs a replay run (it replays SD at K = 3..12 from the run's traces)")
    inputs = inputs_of(manifests[0], [first_profile(manifests[0])], option="--horizon")
    profile = inputs.profiles[0]
    diverged = metrics.split_divergent(loaded.frame)[1]
    dropped = set(diverged.loc[diverged["device"] == profile.name, "window_id"])
    windows = [w for w in inputs.windows if w.window_id not in dropped]
    notes = [f"{len(dropped)} window(s) that diverged natively on {profile.name} left out"] if dropped else []
    widths = set(profile.target_costs.widths())
    parts = []
    for name in sorted(inputs.traces):
        drafts = next(iter(inputs.traces[name].windows.values())).drafts
        k_max = None if drafts is None or drafts.lookup is not None else drafts.k_max
        horizons = [k for k in HORIZONS if k + 1 in widths and (k_max is None or k <= k_max)]
        if len(horizons) < len(HORIZONS):
            notes.append(f"{name}: K = {', '.join(str(k) for k in HORIZONS if k not in horizons)} left out "
                         f"(the profile measures target widths {min(widths)}..{max(widths)}"
                         + (f"; the trace holds {k_max} drafts per row" if k_max is not None else "") + ")")
        if horizons:
            parts.append(horizon_sweep(windows, inputs.traces, profile, name, horizons))
    if not parts:
        raise SpecbenchError(f"--horizon: no K in {HORIZONS[0]}..{HORIZONS[-1]} can be priced: " + "; ".join(notes),
                             hint="profile wider target widths (--max-width) or trace with a larger --k-max")
    return (pd.concat([p[0] for p in parts], ignore_index=True), pd.concat([p[1] for p in parts], ignore_index=True),
            notes)
