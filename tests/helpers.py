"""Small builders for hand-worked tests: traces, profiles and windows in a few lines."""

from __future__ import annotations

import numpy as np

from specbench.core.pricing import CoSchedule, CostTable
from specbench.schemas.profiles import DeviceInfo, DeviceProfile, DrafterProfile, ModelId, Overheads
from specbench.schemas.traces import PAD, DraftTable, ProducerStream, WindowTrace
from specbench.schemas.windows import make_text_window


def linear_costs(base: float, per_token: float, max_width: int, label: str, depths=(0,), depth_slope: float = 0.0) -> CostTable:
    """Cost(w, d) = base + per_token * (w - 1) + depth_slope * d, at the given depths."""
    depth_array = np.asarray(depths, dtype=np.float64)
    return CostTable(depth_array, {w: base + per_token * (w - 1) + depth_slope * depth_array
                                   for w in range(1, max_width + 1)}, label)


def make_profile(rho=(1.0, 1.0), measured_widths=range(1, 17), overheads=Overheads(), target_max=17,
                 drafter_max=17, name="hand", depth_slope=0.0) -> DeviceProfile:
    """Target CT(w) = 1 + 0.25 (w-1) s; drafter CD(n) = 0.25 + 0.125 (n-1) s (exact in binary)."""
    cosched = CoSchedule(np.array([0.0]), {w: np.array([rho[0]]) for w in measured_widths},
                         {w: np.array([rho[1]]) for w in measured_widths})
    target = linear_costs(1.0, 0.25, target_max, "hand target", (0, 1024), depth_slope)
    drafter = linear_costs(0.25, 0.125, drafter_max, "hand drafter", (0, 1024), depth_slope)
    return DeviceProfile(DeviceInfo(name), ModelId("t", "0" * 64), "cpu", target,
                         {"drafter": DrafterProfile("drafter", ModelId("d"), "cpu", drafter, cosched)}, overheads)


def make_trace(y, drafts=None, producer=None, producer_conf=None, step=None, steps=None, stop="eos", k_max=16,
               n_prompt=0, recycle=None, window_id="w0", sha="0" * 64, draft_conf=None) -> WindowTrace:
    """`drafts`: list of rows (row t continues y[:t]); `producer`: the stream z."""
    table = None
    if drafts is not None:
        tokens = np.full((len(y), k_max), PAD, dtype=np.int32)
        conf = np.zeros((len(y), k_max))
        for t, row in enumerate(drafts):
            tokens[t, : len(row)] = row
            conf[t, : len(row)] = 0.9 if draft_conf is None else draft_conf[t][: len(row)]
        table = DraftTable(tokens, conf)
    stream = None
    if producer is not None:
        n = len(producer)
        stream = ProducerStream(np.asarray(producer, dtype=np.int32),
                                np.full(n, 0.9) if producer_conf is None else np.asarray(producer_conf, dtype=float),
                                np.arange(n, dtype=np.int32) if step is None else np.asarray(step, dtype=np.int32),
                                n if steps is None else steps, stop)
    return WindowTrace(window_id, sha, np.asarray(y, dtype=np.int32), stop, n_prompt, n_prompt, table, stream,
                       recycle or {})


def perfect_drafts(y, k_max=16):
    """Row t = y[t:t+k_max]: the drafter always agrees with the target."""
    return [list(y[t:t + k_max]) for t in range(len(y))]


def window_for(trace: WindowTrace, cap: int, split="test"):
    window = make_text_window(trace.window_id, "source", "Repeat.", cap, "hand", split)
    return window


def write_study(directory, n_windows=12, n_devices=2, seed=0, dev_fraction=0.5):
    """A small synthetic study on disk: windows.jsonl, traces/, profiles/*.yaml."""
    from pathlib import Path

    from bench.synthetic_study import synthetic_study
    from specbench.schemas.profiles import save_profile
    from specbench.schemas.traces import save_trace_file
    from specbench.schemas.windows import save_windows

    directory = Path(directory)
    study = synthetic_study(n_windows=n_windows, n_devices=n_devices, seed=seed, dev_fraction=dev_fraction)
    save_windows(directory / "windows.jsonl", study.windows)
    for name, trace_file in study.traces.items():
        save_trace_file(directory / "traces" / f"{name}.jsonl", trace_file.target, trace_file.drafter,
                        trace_file.windows.values())
    profile_paths = []
    for profile in study.profiles:
        path = directory / "profiles" / f"{profile.name}.yaml"
        save_profile(path, profile)
        profile_paths.append(path)
    return study, directory / "windows.jsonl", directory / "traces", profile_paths


def results_manifest(environment=None, mode="native", **changes):
    """A small ResultsManifest: a native run (target only, shared placement) or a replay run of
    no profile (`mode="replay"`), over one windows file."""
    from dataclasses import replace

    from specbench.schemas.environment import Environment
    from specbench.schemas.placement import resolve
    from specbench.core.pricing import DEPTH_POLICY
    from specbench.schemas.profiles import ModelId
    from specbench.schemas.results import ResultsManifest, WindowsInput

    common = (environment or Environment("0.1.0", ("specbench", "run"), "2026-12-01T13:00:00.000Z"),
              WindowsInput("windows.jsonl", "hand", 1))
    if mode == "replay":
        manifest = ResultsManifest("replay", *common, (), depth_policy=DEPTH_POLICY)
    else:
        manifest = ResultsManifest("native", *common, ("target",), device="hand@shared", target=ModelId("t", "0" * 64),
                                   templates={"target": "model"}, placement=resolve("shared", [0]), reference="trace")
    return replace(manifest, **changes)
