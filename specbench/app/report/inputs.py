"""What a report reads: results directories checked to be comparable, the windows' reference
texts, budget files, and everything else taken from the runs' manifests (the one place that
reads a manifest's keys)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from specbench.core import text_metrics
from specbench.core.methods.configs import As2dConfig
from specbench.errors import SpecbenchError
from specbench.schemas.budgets import load_budget
from specbench.schemas.divergences import load_explanations
from specbench.schemas.fileio import file_sha256
from specbench.schemas.results import ROWS, ResultsManifest, Source, load_results, profile_warnings
from specbench.schemas.timeline import TIMELINE
from specbench.schemas.windows import load_windows


@dataclass
class LoadedResults:
    """The rows of one or more results directories, with their manifests and what loading them noted."""

    manifests: list[ResultsManifest]
    """Each directory's manifest.json, in the order of `directories`."""
    frame: pd.DataFrame
    """Every row of every directory (re-replayed sensitivity rows are appended by add_sensitivity)."""
    directories: list[Path]
    """The results directories, as given."""
    notes: list[str] = field(default_factory=list)
    """Overrides the user asked for (recorded in every output)."""
    references: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    """window_id -> (window_sha256, reference text or None), for WER/CER; loaded only when rows have text."""
    text_notes: list[str] = field(default_factory=list)
    """Why reference texts are missing, if they are (for stderr)."""
    explanations: dict[tuple[str, str, str], str] = field(default_factory=dict)
    """(device, window_id, config) -> the explanation of its divergence (the directories' divergences.jsonl)."""


def _identity(manifest: ResultsManifest) -> dict[str, str]:
    """The fields two runs must share to be compared, as field -> value."""
    fields = {"windows.digest": manifest.windows.digest}
    targets = {t.target.sha256 for t in manifest.traces.values()}
    if manifest.target is not None:
        targets.add(manifest.target.sha256)
    if targets:
        fields["target model sha256"] = ",".join(sorted(str(t) for t in targets))
    for profile in manifest.profiles:
        fields[f"profile of {profile.device}"] = profile.sha256
        if profile.runner_sha256:
            fields[f"runner build of {profile.device}"] = profile.runner_sha256
    return fields


def load_many(directories: Sequence[Path], allow_mixed: bool = False, windows: Path | None = None) -> LoadedResults:
    """Rows of several results directories; comparing unlike runs is refused (or recorded).

    When rows carry answer texts, the windows' reference texts are read from `windows`, or
    else from the windows file each manifest names (when it is still there)."""
    manifests, frames = [], []
    notes: list[str] = []
    for directory in directories:
        manifest, frame = load_results(directory, notes)
        if frame.empty:
            raise SpecbenchError(f"{Path(directory) / ROWS}: no result rows to report (the run wrote none)",
                                 hint="run it again with --resume, or report another directory")
        lossless = frame[frame["lossless"].astype(bool)]
        silent = [d for d, tokens in lossless.groupby("device", sort=False)["tokens"].sum().items() if tokens == 0]
        if silent:
            raise SpecbenchError(f"{Path(directory) / ROWS}: every window of {silent[0]} committed no token after "
                                 "the prefill; there is no throughput to report")
        manifests.append(manifest)
        frames.append(frame)
    seen: dict[str, tuple[str, Path]] = {}
    for directory, manifest in zip(directories, manifests, strict=False):
        for name, value in _identity(manifest).items():
            if name not in seen:
                seen[name] = (value, directory)
                continue
            first, where = seen[name]
            if first != value:
                message = f"field '{name}' differs: {first} ({where}) vs {value} ({directory})"
                if not allow_mixed:
                    raise SpecbenchError(f"refusing to compare unlike runs: {message}",
                                         hint="compare runs of the same windows, models, runner and profile, "
                                              "or pass --allow-mixed (recorded in the report)")
                notes.append(f"--allow-mixed: {message}")
    frame = pd.concat(frames, ignore_index=True)
    shas = frame.groupby("window_id")["window_sha256"].nunique()
    if (shas > 1).any() and not allow_mixed:
        window = shas[shas > 1].index[0]
        values = sorted(frame.loc[frame["window_id"] == window, "window_sha256"].unique())
        raise SpecbenchError(f"refusing to compare unlike runs: window '{window}' has window_sha256 {values[0]} "
                             f"and {values[1]}", hint="the window changed between runs")
    keys = ["device", "config", "window_id", "cost_fit", "source"]
    if frame.duplicated(keys).any() and all((Path(d) / TIMELINE).exists() for d in directories):
        # sustained runs of one phone (with and without cool-down) are compared by their timelines
        notes.append(f"sustained runs of the same windows: the per-window tables show {directories[0]}'s rows")
        frame = frame[~frame.duplicated(keys)].reset_index(drop=True)
    if frame.duplicated(keys).any():  # each directory's own rows are unique (ResultsDir.frame)
        dup = frame[frame.duplicated(keys)].iloc[0]
        holders = [str(d) for d, f in zip(directories, frames, strict=False)
                   if ((f["device"] == dup["device"]) & (f["config"] == dup["config"])
                       & (f["window_id"] == dup["window_id"])).any()]
        raise SpecbenchError(f"window '{dup['window_id']}' of {dup['config']} on {dup['device']} appears in more "
                             f"than one results directory ({', '.join(holders)})",
                             hint="report each run of a device once")
    loaded = LoadedResults(manifests, frame, list(directories), notes)
    for directory in directories:
        loaded.explanations |= load_explanations(directory)
    if text_metrics.has_text(frame):
        loaded.references, loaded.text_notes = _references(manifests, windows)
    return loaded


def _references(manifests: list[ResultsManifest],
                explicit: Path | None) -> tuple[dict[str, tuple[str, str | None]], list[str]]:
    paths = [Path(explicit)] if explicit is not None else []
    notes = []
    if explicit is None:
        for manifest in manifests:
            named = manifest.windows.path
            if not named:
                continue
            if Path(named).exists():
                paths.append(Path(named))
            else:
                notes.append(f"no reference texts from {named} (not found); pass --windows FILE for WER/CER")
        if not paths and not notes:
            notes.append("the results name no windows file; pass --windows FILE for WER/CER")
    references: dict[str, tuple[str, str | None]] = {}
    for path in dict.fromkeys(paths):
        references.update((w.window_id, (w.window_sha256, w.reference)) for w in load_windows(path))
    if paths and not any(ref is not None for _, ref in references.values()):
        notes.append(f"no window in {', '.join(map(str, dict.fromkeys(paths)))} has a reference text; no WER/CER")
    return references, notes


def replay_manifests(loaded: LoadedResults) -> list[ResultsManifest]:
    """The manifests of the replay runs among the loaded ones."""
    return [m for m in loaded.manifests if m.mode == Source.REPLAY]


def replayed_methods(manifest: ResultsManifest) -> list[str]:
    """The configuration labels a replay run replayed, in its order."""
    return list(manifest.methods)


def inputs_of(manifest: ResultsManifest, profiles: Sequence[Path] | None = None, option: str = "this report"):
    """The windows, traces and profiles (`profiles`, default all of the run's) a replay run
    read, loaded again (study.load_inputs); a file that is gone is refused, naming `option`."""
    from specbench.app.study import load_inputs

    windows = Path(manifest.windows.path)
    paths = list(profiles) if profiles is not None else [Path(p.path) for p in manifest.profiles]
    traces = [Path(t.path) for t in manifest.traces.values()]
    missing = [p for p in [windows, *paths, *traces] if not p.exists()]
    if missing:
        raise SpecbenchError(f"{option} replays from the run's inputs; {missing[0]} is gone")
    return load_inputs(windows, traces[0].parent, paths, None)


def first_profile(manifest: ResultsManifest) -> Path:
    """The first profile a replay run names."""
    return Path(manifest.profiles[0].path)


def profile_paths(loaded: LoadedResults) -> dict[str | None, Path]:
    """device@placement -> the profile file its runs name, for those still there (the last run naming it wins);
    None -> the profile a native run took its placement from."""
    paths: dict[str | None, Path] = {}
    for manifest in loaded.manifests:
        for profile in manifest.profiles:
            if Path(profile.path).exists():
                paths[profile.device] = Path(profile.path)
    return paths


def missing_profiles(loaded: LoadedResults) -> dict[str | None, str]:
    """device@placement (None: a native run's) -> the profile path its runs name that is not there."""
    return {p.device: str(p.path) for m in loaded.manifests for p in m.profiles if not Path(p.path).exists()}


def unstable_timings(loaded: LoadedResults) -> pd.DataFrame:
    """The unstable profile timings the runs copied into their manifests (schemas.results.profile_warnings)."""
    return profile_warnings(loaded.manifests)


def declared_costs(loaded: LoadedResults) -> pd.DataFrame:
    """device, drafter, declared: each declared drafter cost the rows were priced with (a
    profile's declared drafter that no row used is left out)."""
    records = []
    rows = loaded.frame[(loaded.frame["source"] == Source.REPLAY) & (loaded.frame["method"] != "target")]
    for manifest in loaded.manifests:
        for profile in manifest.profiles:
            on_device = rows[rows["device"] == profile.device]
            named = set(on_device["drafter"].dropna())
            unnamed = on_device["drafter"].isna().any()  # the only drafter traced
            for drafter, note in profile.declared_costs.items():
                if drafter in named or (unnamed and len(manifest.traces) == 1 and drafter in manifest.traces):
                    records.append({"device": profile.device, "drafter": drafter, "declared": note})
    return pd.DataFrame(records, columns=["device", "drafter", "declared"]).drop_duplicates()


def declared_lines(loaded: LoadedResults) -> list[str]:
    """The declared costs as one sentence each, for figures and bundles."""
    return [f"{r.device}: drafter '{r.drafter}' costs are declared, not measured ({r.declared})"
            for r in declared_costs(loaded).itertuples()]


def input_rows(loaded: LoadedResults) -> list[tuple[str, str, str, str, int, str]]:
    """Per results directory: path, rows sha256, mode, windows digest, configurations, runner build and models."""
    return [(str(path), file_sha256(path / ROWS), manifest.mode, manifest.windows.digest, len(manifest.methods),
             manifest.builds_and_models() or "not recorded")
            for path, manifest in zip(loaded.directories, loaded.manifests, strict=False)]


def commands(loaded: LoadedResults) -> list[str]:
    """The commands that made the runs, as recorded (a run that recorded none is left out)."""
    return [m.command for m in loaded.manifests if m.command]


def selected_budgets(paths: Sequence[Path]) -> dict[str, As2dConfig]:
    """Device -> the AS2D configuration its budget file names (`report --budget`, one file per device)."""
    selected: dict[str, As2dConfig] = {}
    for path in paths:
        device, config = load_budget(path)
        if device in selected:
            raise SpecbenchError(f"--budget {path}: a second budget file for device '{device}'")
        selected[device] = config
    return selected
