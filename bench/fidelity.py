"""Does replay predict what the device measures? Replay vs native throughput, per placement.

On this host as the device, with the demo pair (target SmolLM2-135M F16, drafter the shipped
Q4_1 file), Gemma 3 270M as a cross-vocabulary drafter and `pld`, prompt lookup with no model:

1. traces >= 24 windows of several tasks with both drafters (timing-free, once);
2. for each of R interleaved rounds and each placement (split, shared): profiles the host,
   then runs every configuration natively on every window; rounds alternate the
   placement order, so drift between them hits both;
3. replays every configuration through the median of the R profiles of its placement,
   and compares with the median over the R native runs of each window's decode time.

Prints per placement x configuration the mean and max absolute error of replay vs native
throughput (per window, as the report's fidelity table does, which is printed too), and
the noise floor: the same error between two native runs of the same configuration
(median of the odd rounds vs median of the even rounds, and round 1 vs round 2). A second
error pairs each round's replay with the same round's native run (host drift between rounds
then hits both) and takes, per window, the median over rounds. Also
prints, measured, each configuration's native speedup against its placement's target-only
and against the fastest target-only in either placement. The host must be idle: the cores
other processes keep busy are sampled before and during the run and printed.

    python bench/fidelity.py [--rounds 3] [--windows 24] [--cap 40] [--out DIR] [--keep]

Builds the runner and derives the models on first use (cached). Exit status 0 whatever the
figures (a benchmark, not a test). About 30 minutes on an idle 2-core host with the
defaults.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import pandas as pd  # noqa: E402

from bench.hostload import cpu_seconds, idle_check, others_cores  # noqa: E402
from specbench.app.demo import demo_models, sweep_plan  # noqa: E402
from specbench.app.study import load_inputs, run_replay  # noqa: E402
from specbench.core import metrics  # noqa: E402
from specbench.core.methods import parse_method_specs  # noqa: E402
from specbench.core.methods.specasr import SpecAsrConfig  # noqa: E402
from specbench.core.methods.target import TargetConfig  # noqa: E402
from specbench.render.tables import Table, render  # noqa: E402
from specbench.schemas.fileio import dump_yaml, load_yaml, write_atomic  # noqa: E402
from specbench.schemas.placement import NAMED as PLACEMENTS  # noqa: E402
from specbench.schemas.placement import device_of, resolve_on
from specbench.schemas.profiles import load_profile  # noqa: E402
from specbench.schemas.results import load_results  # noqa: E402
from specbench.schemas.traces import load_trace_dir  # noqa: E402
from specbench.schemas.windows import make_text_window, save_windows  # noqa: E402
from specbench.world.devices.local import LocalDevice  # noqa: E402
from specbench.world.model_files import LOOKUP_DRAFTER  # noqa: E402
from specbench.world.native_run import NativePlan, profile_ref, run_native  # noqa: E402
from specbench.world.profiling import median_profile, profile_device, write_profile  # noqa: E402
from specbench.world.runner import find_runner  # noqa: E402
from specbench.world.tracing import trace_windows  # noqa: E402

K_MAX = {"smollm2": 16, "gemma3": 4, LOOKUP_DRAFTER.name: 16}
"""Drafts per trace row of each drafter."""
CONFIGS = ("target", "sd:W=5|8,drafter=smollm2", "specasr:k_max=8,tau=0.5,drafter=smollm2",
           "as2d:B=3|7,drafter=smollm2", "sd:W=5,drafter=gemma3", "as2d:B=3,drafter=gemma3",
           f"sd:W=5|8,drafter={LOOKUP_DRAFTER.name}")
DEPTHS = (0, 64, 128)
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


def runs_of(directories: list[Path]) -> pd.DataFrame:
    return pd.concat([load_results(d)[1] for d in directories], ignore_index=True)


def per_window_median(frame: pd.DataFrame) -> pd.DataFrame:
    """One native row per (device, config, window): the median decode time over its runs."""
    keys = ["device", "method", "config", "window_id"]
    live = frame[frame["lossless"] & (frame["tokens"] > 0)]
    grouped = live.groupby(keys, sort=False)
    out = grouped.first().reset_index()
    out["decode_s"] = grouped["decode_s"].median().to_numpy()
    return out


def abs_errors(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """Per (device, config): mean and max |a - b| / b of per-window throughput, in percent."""
    keys = ["device", "config", "window_id"]
    a, b = a.set_index(keys), b.set_index(keys)
    both = a.index.intersection(b.index)
    tps_a, tps_b = a.loc[both, "tokens"] / a.loc[both, "decode_s"], b.loc[both, "tokens"] / b.loc[both, "decode_s"]
    err = (100 * (tps_a - tps_b).abs() / tps_b).rename("err").reset_index()
    return err.groupby(["device", "config"], sort=False)["err"].agg(["mean", "max", "size"]).reset_index()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--windows", type=int, default=24)
    parser.add_argument("--cap", type=int, default=40)
    parser.add_argument("--out", type=Path, default=None, help="keep everything here (default: a temp dir)")
    parser.add_argument("--analyze-only", action="store_true",
                        help="only compute the tables from the profiles and native runs already in --out")
    args = parser.parse_args(argv)
    if args.rounds < 2 or args.windows < 1:
        parser.error("--rounds >= 2 (the noise floor compares runs) and --windows >= 1")
    out = args.out or Path(tempfile.mkdtemp(prefix="specbench-fidelity-"))
    out.mkdir(parents=True, exist_ok=True)
    started, since = time.monotonic(), cpu_seconds()
    idle_before = idle_check()
    note(f"other processes kept {idle_before:.2f} cores busy before the run (load {os.getloadavg()[0]:.2f})")

    runner = find_runner(build=True, on_build_line=note)
    device = LocalDevice(runner=runner)
    target, demo_drafters = demo_models()  # the demo's files, each with its chat template
    drafters = {d.name: d for d in [*demo_drafters, LOOKUP_DRAFTER]}  # pld last: its sweep adds one target width
    configs = parse_method_specs(list(CONFIGS))
    windows = make_windows(args.windows, args.cap)
    windows_path = out / "windows.jsonl"
    save_windows(windows_path, windows)
    traces = out / "traces"
    if not traces.exists():
        for name, drafter in drafters.items():
            specasr = [c for c in configs if isinstance(c, SpecAsrConfig) and c.drafter == name]
            note(f"tracing {len(windows)} windows with {name}")
            trace_windows(device, windows, target, drafter, traces, K_MAX[name], specasr=specasr)

    traced = load_trace_dir(traces)
    references = {name: {w.window_id: traced[name].windows[w.window_id].y.tolist() for w in windows} for name in drafters}
    placements = {name: resolve_on(device, name) for name in PLACEMENTS}
    profile_docs: dict[str, list[dict]] = {name: [] for name in PLACEMENTS}
    native_dirs: dict[int, list[Path]] = {}
    for r in range(args.rounds):
        if args.analyze_only:
            for name in PLACEMENTS:
                profile_docs[name].append(load_yaml(out / "profiles" / f"round{r}-{name}.yaml"))
            native_dirs[r] = sorted((out / "native").glob(f"round{r}-*"))
            continue
        order = list(PLACEMENTS) if r % 2 == 0 else list(reversed(PLACEMENTS))
        for name in order:
            placement = placements[name]
            path = out / "profiles" / f"round{r}-{name}.yaml"
            path.parent.mkdir(parents=True, exist_ok=True)
            note(f"round {r + 1}/{args.rounds}: profiling ({name})")
            plan = sweep_plan(configs, placement, DEPTHS)
            write_profile(path, profile_device(device, target, list(drafters.values()), plan))
            profile_docs[name].append(load_yaml(path))
            profile = load_profile(path)
            for d_name, drafter in drafters.items():
                mine = [c for c in configs if getattr(c, "drafter", None) == d_name or
                        (d_name == "smollm2" and isinstance(c, TargetConfig))]
                plan = NativePlan(device, windows, target, drafter, mine, placement, references[d_name],
                                  str(windows_path), profile_ref(profile))
                where = out / "native" / f"round{r}-{name}-{d_name}"
                shutil.rmtree(where, ignore_errors=True)
                note(f"round {r + 1}/{args.rounds}: native {name}, {d_name} ({len(mine)} configurations)")
                run_native(plan, where, resume=False)
                native_dirs.setdefault(r, []).append(where)
    busy = others_cores(since, time.monotonic() - started)

    medians = []
    for name in PLACEMENTS:
        path = out / "profiles" / f"median-{name}.yaml"
        write_atomic(path, dump_yaml(median_profile(profile_docs[name])))
        medians.append(path)
    replay_dir = out / "replay"
    shutil.rmtree(replay_dir, ignore_errors=True)
    inputs = load_inputs(windows_path, traces, medians, None)
    run_replay(inputs, configs, medians, replay_dir, False, False)
    replay = load_results(replay_dir)[1]
    runs = {r: runs_of(dirs) for r, dirs in native_dirs.items()}
    native_all = pd.concat(list(runs.values()), ignore_index=True)
    native = per_window_median(native_all)
    odd = per_window_median(pd.concat([runs[r] for r in runs if r % 2 == 0], ignore_index=True))
    even = per_window_median(pd.concat([runs[r] for r in runs if r % 2 == 1], ignore_index=True))

    # Per round: that round's profile replayed against that round's native runs, so host drift
    # between rounds (minutes apart) hits both sides; per window the median over rounds.
    paired = []
    for r, dirs in native_dirs.items():
        round_profiles = [out / "profiles" / f"round{r}-{name}.yaml" for name in PLACEMENTS]
        round_dir = out / "replay-rounds" / f"round{r}"
        shutil.rmtree(round_dir, ignore_errors=True)
        run_replay(load_inputs(windows_path, traces, round_profiles, None), configs, round_profiles, round_dir, False,
                   False)
        keys = ["device", "config", "window_id"]
        rep = load_results(round_dir)[1].set_index(keys)
        nat = per_window_median(runs_of(dirs)).set_index(keys)
        both = rep.index.intersection(nat.index)
        paired.append(((rep.loc[both, "tokens"] / rep.loc[both, "decode_s"]) /
                       (nat.loc[both, "tokens"] / nat.loc[both, "decode_s"])).rename(f"r{r}"))
    ratios = pd.concat(paired, axis=1).median(axis=1)
    per_round = (100 * (ratios - 1).abs()).rename("err").reset_index().groupby(["device", "config"], sort=False)[
        "err"].agg(["mean", "max"]).reset_index().rename(columns={"mean": "paired_mean_err_pct",
                                                                  "max": "paired_max_err_pct"})

    fidelity = abs_errors(replay, native)
    halves = abs_errors(odd, even)
    first_two = abs_errors(per_window_median(runs[0]), per_window_median(runs[1]))
    table = fidelity.merge(halves, on=["device", "config"], suffixes=("", "_floor_halves"))
    table = table.merge(first_two, on=["device", "config"], suffixes=("", "_floor_runs"))
    table = table.rename(columns={"mean": "replay_mean_err_pct", "max": "replay_max_err_pct", "size": "windows",
                                  "mean_floor_halves": "floor_halves_mean_pct", "max_floor_halves": "floor_halves_max",
                                  "mean_floor_runs": "floor_runs_mean_pct", "max_floor_runs": "floor_runs_max"})
    table = table.merge(per_round, on=["device", "config"])
    table = table[["device", "config", "windows", "replay_mean_err_pct", "replay_max_err_pct", "paired_mean_err_pct",
                   "paired_max_err_pct", "floor_halves_mean_pct", "floor_runs_mean_pct"]]
    pooled = metrics.pooled(native)
    pooled_replay = metrics.pooled(replay).set_index(["device", "config"])["tokens_per_s"]
    pooled["replay_tokens_per_s"] = [pooled_replay.get((d, c), float("nan"))
                                     for d, c in zip(pooled["device"], pooled["config"])]
    pooled["replay_over_native"] = pooled["replay_tokens_per_s"] / pooled["tokens_per_s"]
    tables = [
        Table("Replay vs native (median profile of each placement; native = per-window median over rounds)",
              "per window |replay - native| / native, mean and max per device@placement x configuration; "
              "paired: per window the median over rounds of (that round's replay / that round's native); "
              "floors: the same error between native runs (odd vs even rounds' medians; round 1 vs round 2)",
              table, {c: ".2f" for c in table.columns if c.endswith("pct") or c.endswith("err_pct")}),
        Table("The tool's own replay-fidelity table", "report.metrics.replay_fidelity on the same rows",
              metrics.replay_fidelity(pd.concat([replay, native.assign(source="native")], ignore_index=True)),
              {"mean_abs_error_pct": ".2f", "max_abs_error_pct": ".2f"}),
        Table("Measured (native) pooled throughput and speedups",
              metrics.ORDER["pooled"] + "; " + metrics.ORDER["placements"],
              pooled[["device", "config", "windows", "tokens_per_s", "speedup", "speedup_vs_best_target",
                      "replay_tokens_per_s", "replay_over_native"]],
              {"tokens_per_s": ".2f", "speedup": ".3f", "speedup_vs_best_target": ".3f",
               "replay_tokens_per_s": ".2f", "replay_over_native": ".3f"}),
    ]
    print(render(tables, "md"))
    summary = {"rounds": args.rounds, "windows": len(windows), "cap": args.cap,
               "others_cores_before": round(idle_before, 3), "others_cores_during": round(busy, 3),
               "wall_s": round(time.monotonic() - started, 1), "out": str(out),
               "devices": sorted({device_of(d) for d in native["device"]})}
    print(json.dumps(summary))
    (out / "fidelity.md").write_text(render(tables, "md") + "\n" + json.dumps(summary) + "\n")
    note(f"done in {summary['wall_s']:.0f} s; other processes kept {busy:.2f} cores busy during the run; "
         f"everything is in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
