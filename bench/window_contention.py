"""Does the window decoded, or the job's shape, move the target's co-scheduling ratio beside the AS2D producer?

Decodes of three kinds, in the order `--order` gives (default P W W P P W), on this host: P = the profile's
overheads job on its passage of prose (`world/overheads.py`: target-only, AS2D, AS2D, target-only per window,
batch 8; `--copies` copies of the 48-token window); W = the same job on the workload's windows (`--windows`: the
ones `workload_selection` takes for the same tokens, or the first `--first N`); V = a validation's decode job on
those windows (`app/validate.py`: every AS2D option, the traced references checked, a warm-up, a probe before the
first window and after each; needs `--traces`); X = W with the AS2D decodes at `--other-budget` (a refresh's B against
the validated configuration's). Each job's AS2D decodes are priced against `--profile`
(`core/decomposition.decode_contention`): the ratio single-token steps and verifications realised. The baseline is
the order's first kind, measured in the same run. A kind run three times or more also gets its pooled ratio's
scatter between jobs, split into what the job's own sample explains (its windows' ratios, even against odd,
within the job) and what is left between jobs (a host or load that moves the contention from one job to the next).

    python bench/window_contention.py --windows W.jsonl --profile P.yaml --target T.gguf \
        --drafter gemma3=G.gguf --template gemma3=gemma --placement shared [--order WVVWWV --traces DIR]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from specbench.core.decomposition import decode_contention
from specbench.core.methods.configs import As2dConfig, TargetConfig
from specbench.schemas.placement import resolve_on
from specbench.schemas.profiles import load_profile
from specbench.schemas.traces import load_trace_dir
from specbench.schemas.windows import load_windows
from specbench.world.decode_run import method_job
from specbench.world.devices.local import LocalDevice
from specbench.world.jobs import DecodeJob, Probe
from specbench.world.model_files import ModelFile, model_job
from specbench.world.overheads import decode_lanes, overheads_job, prompt_tokens, workload_selection, workload_windows
from specbench.world.runner import find_runner


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--windows", type=Path, required=True)
    parser.add_argument("--profile", type=Path, required=True, help="prices the decodes' forwards")
    parser.add_argument("--target", type=Path, required=True)
    parser.add_argument("--drafter", required=True, metavar="NAME=PATH")
    parser.add_argument("--template", default=None, metavar="NAME=TEMPLATE", help="the drafter's chat template")
    parser.add_argument("--placement", default="shared")
    parser.add_argument("--budget", type=int, default=3)
    parser.add_argument("--other-budget", type=int, default=None, metavar="B",
                        help="the AS2D decodes' B in X jobs (W's shape otherwise)")
    parser.add_argument("--copies", type=int, default=3)
    parser.add_argument("--order", default="PWWPPW", help="the jobs' kinds in order: P, W, V and X")
    parser.add_argument("--traces", type=Path, default=None, help="the drafter's traces (V checks references)")
    parser.add_argument("--first", type=int, default=None, metavar="N",
                        help="decode the file's first N windows instead of the ones `workload_selection` takes")
    args = parser.parse_args(argv)
    name, path = args.drafter.split("=", 1)
    template = args.template.split("=", 1)[1] if args.template else None
    profile = load_profile(args.profile)
    device = LocalDevice(runner=find_runner(build=False))
    placement = resolve_on(device, args.placement)
    target_file, drafter_file = ModelFile(args.target.stem, args.target), ModelFile(name, Path(path), template=template)
    target, drafter = model_job(device, target_file, placement.target), model_job(device, drafter_file,
                                                                                  placement.drafter)
    windows = load_windows(args.windows)
    chosen = windows[:args.first] if args.first else workload_selection(windows, args.copies)
    workload = workload_windows(device, target_file, drafter_file, chosen)
    if set(args.order) - set("PWVX") or ("V" in args.order and args.traces is None) \
            or ("X" in args.order and args.other_budget is None):
        parser.error("--order takes P, W, V and X; V needs --traces, X --other-budget")
    jobs = {"P": overheads_job(target, drafter, (prompt_tokens(device, target), prompt_tokens(device, drafter)),
                               budget=args.budget, windows=args.copies),
            "W": overheads_job(target, drafter, budget=args.budget, workload=workload)}
    if "X" in args.order:
        jobs["X"] = overheads_job(target, drafter, budget=args.other_budget, workload=workload)
    if "V" in args.order:
        trace = load_trace_dir(args.traces)[name]
        references = {w.window_id: trace.windows[w.window_id].y.tolist() for w in chosen}
        checked = workload_windows(device, target_file, drafter_file, chosen, references)
        jobs["V"] = DecodeJob(target, [method_job(TargetConfig()), method_job(As2dConfig(budget=args.budget))],
                              checked, drafter, warmup=True, runs=2, warmup_runs=0, alternate=True, probe=Probe(5))

    def contention(results: list[dict]):
        return decode_contention(decode_lanes(results), profile.target_costs, profile.drafter(name).cosched)

    singles: dict[str, list[float]] = {kind: [] for kind in args.order}
    verifies: dict[str, list[float]] = {kind: [] for kind in args.order}
    pooled: dict[str, list[float]] = {kind: [] for kind in args.order}
    halves: dict[str, list[float]] = {kind: [] for kind in args.order}  # ln(even windows' / odd windows')
    print(f"{args.placement}, drafter {name}, B={args.budget}: P = {args.copies} copies of the prose passage, "
          f"W/V = {len(workload)} of {args.windows.name}'s windows")
    for kind in args.order:
        results = device.run_job(jobs[kind].to_dict()).results
        met = contention(results)
        if met is None:
            print(f"{kind}: no forward ran wholly beside the producer")
            continue
        pooled[kind].append(met.realised)
        order = list(dict.fromkeys(r["window_id"] for r in results if r.get("kind") == "decode"))
        even, odd = (contention([r for r in results if r.get("kind") == "decode"
                                 and order.index(r["window_id"]) % 2 == parity]) for parity in (0, 1))
        if even is not None and odd is not None:
            halves[kind].append(math.log(even.realised / odd.realised))
        if met.single is not None:
            singles[kind].append(met.single)
        if met.verify is not None:
            verifies[kind].append(met.verify)
        verify = "-" if met.verify is None else f"{met.verify:.3f}"
        single = "-" if met.single is None else f"{met.single:.3f}"
        print(f"{kind}: single {single} ({met.single_forwards}) verify {verify} ({met.verify_forwards}) "
              f"pooled {met.realised:.3f}, the cells' {met.priced:.3f}", flush=True)
    for kind, values in pooled.items():
        if len(values) >= 3:
            print(scatter(kind, values, halves[kind]))
    base = args.order[0]
    for kind in dict.fromkeys(args.order[1:]):
        if kind == base:
            continue
        for cls, by_kind in (("single-token", singles), ("verification", verifies), ("pooled", pooled)):
            if by_kind[kind] and by_kind[base]:
                ratio = statistics.mean(by_kind[kind]) / statistics.mean(by_kind[base])
                print(f"{cls} ratio, mean {kind} / mean {base}: {ratio:.3f}")
    return 0


def scatter(kind: str, pooled: list[float], halves: list[float]) -> str:
    """A kind's pooled ratios over its jobs: their scatter (sd of the log, in %), the part a job's own sample
    explains (half-samples of one job differ by twice its variance: var = mean(halves²) / 4) and the rest, between
    jobs."""
    logs = [math.log(v) for v in pooled]
    total = statistics.variance(logs)
    within = sum(h * h for h in halves) / len(halves) / 4 if halves else float("nan")
    between = math.sqrt(max(0.0, total - within)) if halves else float("nan")
    return (f"{kind}: {len(pooled)} jobs, pooled ratio mean {statistics.mean(pooled):.3f}, range {min(pooled):.3f}"
            f"..{max(pooled):.3f}, sd {100 * math.sqrt(total):.1f}% = within a job {100 * math.sqrt(within):.1f}% "
            f"(even against odd windows) and between jobs {100 * between:.1f}%")


if __name__ == "__main__":
    sys.exit(main())
