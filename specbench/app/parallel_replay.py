"""A study's replay spread over processes: the pieces of `core.replay.bulk` in a fork pool.

The rows are the ones `bulk.replay_study` returns, in the same order; only the wall time differs.
Forked workers inherit the study instead of receiving a pickled copy (a paper-sized study pickles
to over 100 MB). Two hazards of a pool are handled: a worker that dies (a signal, the OOM killer)
ends the replay with an error instead of leaving it waiting for its piece forever, and a worker
writes through std streams of its own, since a thread of the caller (a progress bar's refresh) may
have held the inherited ones' locks at the fork.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool

import pandas as pd

from specbench.core.methods.configs import MethodConfig, SdConfig, TargetConfig
from specbench.core.pricing import CostFit
from specbench.core.replay.bulk import Progress, Task, fit_profile, run_task, study_rows, study_tasks
from specbench.errors import SpecbenchError
from specbench.schemas.profiles import DeviceProfile
from specbench.schemas.traces import TraceFile
from specbench.schemas.windows import Window

Study = tuple[Sequence[Window], Mapping[str, TraceFile], Sequence[DeviceProfile], Sequence[MethodConfig]]
_STUDY: Study | None = None  # the study, inherited by forked workers instead of pickled


def replay_study_in_processes(windows: Sequence[Window], traces: Mapping[str, TraceFile],
                              profiles: Sequence[DeviceProfile], configs: Sequence[MethodConfig],
                              progress: Progress | None = None, workers: int | None = None,
                              cost_fit: str = CostFit.MEDIAN) -> pd.DataFrame:
    """`bulk.replay_study` with its pieces in `workers` forked processes, the heaviest pieces
    first. By default one per CPU, or none for a study too small to repay their start
    (`SMALL_STUDY`); one worker, or a platform without fork, runs them here."""
    global _STUDY
    profiles = [fit_profile(p, cost_fit) for p in profiles]
    tasks = study_tasks(profiles, configs)
    if workers is None:
        workers = (os.cpu_count() or 1) if _work(tasks, traces) >= SMALL_STUDY else 1
    workers = min(workers, len(tasks))
    frames: list[pd.DataFrame | None] = [None] * len(tasks)
    _STUDY = (windows, traces, profiles, configs)
    try:
        if workers <= 1 or "fork" not in mp.get_all_start_methods():
            done: Iterator[tuple[int, pd.DataFrame]] = ((i, _run(task)) for i, (task, _) in enumerate(tasks))
            _collect(done, frames, tasks, len(windows), progress)
        else:
            with ProcessPoolExecutor(workers, mp.get_context("fork"), initializer=_start_worker) as pool:
                order = sorted(range(len(tasks)), key=lambda i: -_weight(*tasks[i]))
                pieces = [pool.submit(_indexed, (i, tasks[i][0])) for i in order]
                try:
                    _collect((piece.result() for piece in as_completed(pieces)), frames, tasks, len(windows),
                             progress)
                except BrokenProcessPool:
                    raise SpecbenchError("a replay worker process died (killed by a signal or out of memory) "
                                         "before finishing its piece of the study",
                                         hint="rerun with --workers 1 to replay in one process") from None
                finally:
                    for piece in pieces:
                        piece.cancel()
    finally:
        _STUDY = None
    return study_rows(frames, cost_fit)


SMALL_STUDY = 10_000_000
"""A study whose work (`_work`) is below this replays in the calling process: about 2 s of replay on
this project's 2-core host, where two workers save little (a study of 3.1M took 0.70 s here and
0.60-0.64 s in two workers; docs/MEASUREMENTS.md)."""


def _work(tasks: Sequence[tuple[Task, int]], traces: Mapping[str, TraceFile]) -> int:
    """The study's rough size: its tasks' weights (`_weight`) times the target tokens traced."""
    tokens = max((sum(w.n_tokens for w in trace.windows.values()) for trace in traces.values()), default=0)
    return sum(_weight(*task) for task in tasks) * tokens


def _start_worker() -> None:
    """Give the worker std streams of its own (an inherited one's lock may have been held at the
    fork, and the worker flushes its streams as it exits); and let it die at SIGTERM, as the pool's
    shutdown expects: a handler that raises KeyboardInterrupt (the CLI's) interrupting a worker that
    holds the call queue's lock would leave the others waiting for it forever."""
    sys.stdout = open(1, "w", closefd=False)
    sys.stderr = open(2, "w", closefd=False)
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
