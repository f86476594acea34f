"""A study's replay spread over processes: the pieces of `core.replay.bulk` in a fork pool.

The rows are the ones `bulk.replay_study` returns, in the same order; only the wall time differs.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
from collections.abc import Iterator, Mapping, Sequence

import pandas as pd

from specbench.core.methods.configs import MethodConfig, SdConfig, TargetConfig
from specbench.core.pricing import CostFit
from specbench.core.replay.bulk import Progress, Task, fit_profile, run_task, study_rows, study_tasks
from specbench.schemas.profiles import DeviceProfile
from specbench.schemas.traces import TraceFile
from specbench.schemas.windows import Window

Study = tuple[Sequence[Window], Mapping[str, TraceFile], Sequence[DeviceProfile], Sequence[MethodConfig]]
_STUDY: Study | None = None  # the study, inherited by forked workers instead of pickled


def replay_study_in_processes(windows: Sequence[Window], traces: Mapping[str, TraceFile],
                              profiles: Sequence[DeviceProfile], configs: Sequence[MethodConfig],
                              progress: Progress | None = None, workers: int | None = None,
                              cost_fit: str = CostFit.MEDIAN) -> pd.DataFrame:
    """`bulk.replay_study` with its pieces in `workers` forked processes (default: one per CPU;
    one worker, or a platform without fork, runs them here), the heaviest pieces first."""
    global _STUDY
    profiles = [fit_profile(p, cost_fit) for p in profiles]
    tasks = study_tasks(profiles, configs)
    workers = min(workers or os.cpu_count() or 1, len(tasks))
    frames: list[pd.DataFrame | None] = [None] * len(tasks)
    _STUDY = (windows, traces, profiles, configs)
    done: Iterator[tuple[int, pd.DataFrame]]
    try:
        if workers <= 1 or "fork" not in mp.get_all_start_methods():
            done = ((i, _run(task)) for i, (task, _) in enumerate(tasks))
            _collect(done, frames, tasks, len(windows), progress)
        else:
            with mp.get_context("fork").Pool(workers, initializer=_default_terminate) as pool:
                order = sorted(range(len(tasks)), key=lambda i: -_weight(*tasks[i]))
                done = pool.imap_unordered(_indexed, [(i, tasks[i][0]) for i in order])
                _collect(done, frames, tasks, len(windows), progress)
    finally:
        _STUDY = None
    return study_rows(frames, cost_fit)


def _default_terminate() -> None:
    """A worker dies at SIGTERM, as `Pool.terminate` expects: the CLI's handler (SIGTERM raises
    KeyboardInterrupt) is inherited through fork, and a worker interrupted while it holds the task
    queue's lock leaves the others waiting for it forever."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _weight(task: Task, size: int) -> int:
    """Rough cost of a task of `size` (`study_tasks`), per window, so the pool starts the longest
    first and the workers finish together: an AS2D device (its configurations simulated in time)
    outweighs a serial configuration; SD runs on arrays, other serial methods (SpecASR,
    cross-vocabulary, lookup) through their decision procedure, target-only is a single pass."""
    kind, what = task
    if kind == "as2d":
        return 3 * size
    if isinstance(what, TargetConfig):
        return 1
    return 4 if isinstance(what, SdConfig) else 12


def _collect(done, frames: list, tasks: list, n_windows: int, progress: Progress | None) -> None:
    for index, frame in done:
        frames[index] = frame
        if progress:
            progress(tasks[index][1] * n_windows)


def _run(task: Task) -> pd.DataFrame:
    if _STUDY is None:
        raise RuntimeError("no study to replay: tasks run inside replay_study_in_processes only")
    windows, traces, profiles, configs = _STUDY
    return run_task(windows, traces, profiles, configs, task)


def _indexed(item: tuple[int, Task]) -> tuple[int, pd.DataFrame]:
    return item[0], _run(item[1])
