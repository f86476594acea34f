"""Does replay predict what this host measures? `specbench validate` on the demo pair and Gemma.

On this host as the device, with the demo pair (target SmolLM2-135M F16, drafter the shipped
Q4_1 file) and Gemma 3 270M as a cross-vocabulary drafter: traces the windows once (timing
free, kept in --out), then runs the validation's blocks in both placements (docs/METHODS.md
§7.9 Validation: does replay predict the device?) and prints its tables: per placement × configuration the floor F0,
replay's error F1, the excess error E and the bias b with cluster-bootstrap intervals over blocks, for the
speedup over target-only and for tokens/s, the blocks (voids included), the probes and the
sweep-vs-decode comparison per forward. The host must be idle: the cores other processes
keep busy are sampled before and during the run and printed.

    python bench/fidelity.py [--windows 24] [--cap 32] [--block-windows 4] [--max-blocks 6] [--out DIR]
                             [--placement split --placement shared] [--precision 0.02 --max-repetitions 15] [--resume]
    python bench/fidelity.py --speech --placement split|shared [--windows 24] ...   # Whisper base with tiny.en

Builds the runner and derives the models on first use (cached). Exit status 0 whatever the
figures (a benchmark, not a test).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.hostload import cpu_seconds, idle_check, others_cores
from specbench.app.demo import SPEECH_SUITE, demo_models, suite_windows, trace_threads
from specbench.app.validate import Validation, ValidationPlan, resolve_configs
from specbench.app.validation_report import validation_figures, validation_tables
from specbench.core.methods.configs import SpecAsrConfig, parse_method_specs
from specbench.render.tables import render
from specbench.schemas.placement import resolve_on
from specbench.schemas.traces import load_trace_dir
from specbench.schemas.windows import make_text_window, save_windows
from specbench.world.devices.local import LocalDevice
from specbench.world.runner import find_runner
from specbench.world.tracing import trace_windows

K_MAX = {"smollm2": 16, "gemma3": 4} | SPEECH_SUITE.trace_k_max
"""Drafts per trace row of each drafter."""
CONFIGS = ("sd:W=5,drafter=smollm2", "specasr:k_max=8,tau=0.5,drafter=smollm2", "as2d:B=3,drafter=smollm2",
           "sd:W=5,drafter=gemma3", "as2d:B=3,drafter=gemma3")
SPEECH_CONFIGS = ("sd:W=5,drafter=tiny.en", "as2d:B=3,drafter=tiny.en")
"""--speech: the configurations the speech demo runs natively (Whisper base verifying tiny.en's drafts)."""
TASKS = (  # tasks whose answers run to the cap, so that each window's time is long enough to measure
    ("Continue this story in a few sentences.", "continue"),
    ("Explain this sentence to a child, in detail.", "explain"),
    ("Repeat this sentence exactly, three times.", "repeat"),
    ("Translate this sentence into French.", "translate"),
)
TEXTS = (
    "The quick brown fox jumps over the lazy dog near the quiet river bank.",
    "Our train leaves at seven in the morning from platform four.",
    "The team met on Monday to review the budget and agreed to hire two engineers.",
    "I am reading a book about the history of the sea and the ships that crossed it.",
    "Maria planted tomatoes, beans and herbs in her small garden behind the house.",
    "The museum opens at nine and closes early on Sundays during the winter months.",
    "A small bakery on the corner sells fresh bread every morning before sunrise.",
    "The children built a sand castle while their parents watched the waves.",
)


def note(message: str) -> None:
    print(f"fidelity: {message}", file=sys.stderr, flush=True)


def make_windows(count: int, cap: int) -> list:
    out = []
    for i in range(count):
        instruction, task = TASKS[i % len(TASKS)]
        text = TEXTS[(i // len(TASKS)) % len(TEXTS)]
        out.append(make_text_window(f"{task}-{i:02d}", text, instruction, cap, f"fidelity-{task}", "dev"))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=24)
    parser.add_argument("--cap", type=int, default=32)
    parser.add_argument("--block-windows", type=int, default=4)
    parser.add_argument("--min-blocks", type=int, default=2)
    parser.add_argument("--max-blocks", type=int, default=6)
    parser.add_argument("--placement", action="append", default=None, help="split and/or shared (default: both)")
    parser.add_argument("--method", action="append", default=None,
                        help=f"default: {' '.join(CONFIGS)}; with --speech {' '.join(SPEECH_CONFIGS)}")
    parser.add_argument("--speech", action="store_true",
                        help="the speech demo's Whisper pair on its recorded windows (the first --windows of them; "
                             "--cap is the windows' own): one placement per run, traced with its lanes' threads")
    parser.add_argument("--probe-threshold", type=float, default=5.0)
    parser.add_argument("--probe-spreads", type=float, default=3.0)
    parser.add_argument("--max-voids", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=1, help="decodes of each window and slot in each of Na, Nb")
    parser.add_argument("--cooldown", type=float, default=30.0)
    parser.add_argument("--precision", type=float, default=None,
                        help="profile cells to this precision, as `profile --precision` (default: a fixed 5 forwards)")
    parser.add_argument("--max-repetitions", type=int, default=15, help="with --precision: most forwards per cell")
    parser.add_argument("--out", type=Path, default=None, help="keep everything here (default: a temp dir)")
    parser.add_argument("--resume", action="store_true", help="continue the validation in --out")
    args = parser.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="specbench-fidelity-"))
    out.mkdir(parents=True, exist_ok=True)
    if (out / "validation" / "validation.json").exists() and not args.resume:
        parser.error(f"{out}/validation exists: pass --resume or another --out")
    started, since = time.monotonic(), cpu_seconds()
    idle_before = idle_check()
    note(f"other processes kept {idle_before:.2f} cores busy before the run (load {os.getloadavg()[0]:.2f})")

    device = LocalDevice(runner=find_runner(build=True, on_build_line=note))
    if args.speech and len(args.placement or []) != 1:
        parser.error("--speech: name one --placement (its traces are made with that placement's lanes' threads)")
    target, drafters = demo_models(SPEECH_SUITE) if args.speech else demo_models()
    drafters = {d.name: d for d in drafters}
    configs = parse_method_specs(list(args.method or (SPEECH_CONFIGS if args.speech else CONFIGS)))
    windows = suite_windows(SPEECH_SUITE)[:args.windows] if args.speech else make_windows(args.windows, args.cap)
    windows_path = out / "windows.jsonl"
    save_windows(windows_path, windows)
    traces_dir = out / "traces"
    used = {c.drafter for c in configs if getattr(c, "drafter", None)}
    placements = [resolve_on(device, p) for p in (args.placement or ["split", "shared"])]
    # Whisper's decisions depend on the thread count: traced as the one placement's lanes decode
    threads = trace_threads(placements[0]) if args.speech else None
    for name in sorted(used):
        specasr = [c for c in configs if isinstance(c, SpecAsrConfig) and c.drafter == name]
        note(f"tracing {len(windows)} windows with {name} (kept: an existing trace resumes)")
        trace_windows(device, windows, target, drafters[name], traces_dir, K_MAX[name], resume=True, threads=threads,
                      specasr=specasr)
    traces = load_trace_dir(traces_dir)
    plan = ValidationPlan(device, windows, windows_path, traces_dir, target,
                          {name: drafters[name] for name in sorted(used)}, resolve_configs(configs, traces),
                          placements, block_windows=args.block_windows, min_blocks=args.min_blocks,
                          max_blocks=args.max_blocks, probe_threshold_pct=args.probe_threshold,
                          probe_spreads=args.probe_spreads,
                          max_voids=args.max_voids, cooldown_s=args.cooldown, precision=args.precision,
                          max_repetitions=args.max_repetitions, repeats=args.repeats)
    validation = out / "validation"
    Validation(plan, validation, note).run()
    tables = validation_tables(validation)
    validation_figures(validation, validation / "figures")
    busy = others_cores(since, time.monotonic() - started)
    print(render(tables, "md"))
    summary = {"windows": len(windows), "cap": None if args.speech else args.cap, "block_windows": args.block_windows,
               "others_cores_before": round(idle_before, 3), "others_cores_during": round(busy, 3),
               "wall_s": round(time.monotonic() - started, 1), "out": str(out)}
    print(json.dumps(summary))
    note(f"done in {summary['wall_s']:.0f} s; other processes kept {busy:.2f} cores busy; everything is in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
