"""How fast is the runner's target-only Whisper decode against whisper.cpp's own greedy decoding?

The runner's `decode` job with the `target` method on a converted Whisper model (its whisper.cpp
engine: whisper.cpp 1.8.5's src/whisper.cpp with specbench's edits, compiled against llama.cpp's
ggml) against `whisper-cli -m MODEL -f WAV -t THREADS -bs 1 -nf -nt` (whisper.cpp 1.8.5 with its
own ggml 0.13.1, the same CMake ggml flags; greedy, beam size 1, no temperature fallback, no
timestamps, flash attention on as in both defaults), the same threads, the same audio. Target:
>= 0.97x whisper-cli's rate per decoded token.

What each side's clock covers (N = the transcript's tokens including <|endoftext|>; both sides
run N - 1 single-token decoder forwards and choose N tokens):

* runner, `decode_s` (the decode clock, docs/METHODS.md §1.3 Two clocks): from the end of the
  prefill (the log-mel spectrogram + encoder, then the task prompt <|startoftranscript|> <|en|>
  <|transcribe|> <|notimestamps|> in one decoder forward) to the last token's commit: the argmax
  of y[0] from the prefill's logits, then N - 1 times one forward (whisper_decode_with_state)
  and a host argmax over the logits of the text tokens and <|endoftext|>. Rate = (N - 1) /
  decode_s. Its forwards alone: the sum of the result's per-forward `ops` times.
* whisper-cli, parsed from its whisper_print_timings lines on stderr: `decode time` is the time
  inside whisper_decode_internal of its calls with one token (N - 1 "runs": the forwards, with the
  copy of the logits out); `sample time` is its greedy sampler: whisper_process_logits on the
  logits after the prompt and after each forward, and at each step whisper_sample_token and the
  decoder's bookkeeping. Rate = decode runs / (decode time + sample time); forwards alone: decode
  runs / decode time. Not counted: model load, `mel time`, `encode time`, and `batchd time` (the
  task prompt: a call of 2..15 tokens counts there, its "runs" are tokens; `prompt time` counts
  calls of 16 tokens and more and stays 0).

whisper.cpp's sampler does more than the runner's argmax: it copies the logits, applies
Whisper's logit filters (at the first step <|endoftext|> and the blank are suppressed; the
timestamp tokens, <|notimestamps|>, <|startoftranscript|>, <|nospeech|>, <|startoflm|>, the task
and language tokens and <|startofprev|> always), a log-softmax over the whole vocabulary, the
timestamps' logsumexp against the best text token, a softmax, and in whisper_sample_token the
timestamp probability sums beside the argmax (over the probabilities: the same token). So
the first row ("forwards + sampling") charges whisper-cli for that extra work, and the second
row ("forwards alone") is the like-for-like forward; both carry the 0.97 target, so the verdict
does not rest on the heavier sampler. Oddities of the printout: greedy decoding never counts a
sample run (n_sample grows only in beam search), so `sample time` says "1 runs" whatever N is;
the final step's sampling (the one that picks <|endoftext|>) leaves the loop before its time is
added; and the no-speech probability after the prompt (a softmax over the vocabulary) is in no
timer. whisper.cpp runs no warm-up forward; the runner warms each model with one untimed forward.

The two sides must do the same work: an untimed first round decodes every clip on both sides
and keeps only the clips where both prompt the decoder with as many task tokens, print the same
text, and the runner's N - 1 equals whisper-cli's decode runs (a clip that differs is named and
left out; none left is an error). Every timed round checks the same again. Both prompt an
English-only model (tiny.en) with <|startoftranscript|> <|notimestamps|> alone.

Informational: the encoder, as the runner's `audio_prefill_us` (whisper_pcm_to_mel +
whisper_encode) against whisper-cli's `mel time` + `encode time` (the same two calls).

Each round runs one runner job over the clips and one whisper-cli per clip, alternating which
side goes first (runner, tool, tool, runner, ...). Rates pool the clips of a round (their tokens
over their times); the table reports each side's median over rounds and, as the ratio, the
median over rounds of that round's runner / whisper-cli rate. The load average and the cores
other processes kept busy are printed and flagged as in bench/runner_overhead.py. Exit status
0 whatever the verdicts (a benchmark, not a test).

    python bench/whisper_speed.py [--model whisper-base|whisper-tiny.en|whisper-base-q8_0]
        [--threads 2] [--rounds 9] [--speech-set] [--json]

Needs the runner and whisper-cli (`scripts/build-runner` and `scripts/build-runner --whisper`,
or `make runners`) and the cached Whisper model (`make demo-model`); `--speech-set` decodes the
speech set's windows (docs/SPEECH.md) instead of whisper.cpp's samples/jfk.wav.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import struct
import sys
import tempfile
import time
import wave
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.hostload import cpu_seconds, others_cores
from bench.runner_overhead import (
    BenchError,
    Row,
    emit,
    paired_row,
    print_load,
    print_rows,
    print_verdict,
    run_tool_streams,
)
from specbench.errors import SpecbenchError
from specbench.world.build import whisper_source
from specbench.world.demo_models import demo_model
from specbench.world.runner import build_manifest, run_job, runner_path

MODELS = ("whisper-base", "whisper-tiny.en", "whisper-base-q8_0")
TARGET = 0.97
CAP = 220
"""Tokens the runner may choose per clip: whisper.cpp's greedy loop samples at most n_text_ctx / 2 - 4 = 220."""
RUNNER_TIMEOUT_S = 900


def note(msg: str) -> None:
    print(f"whisper_speed: {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------
# whisper-cli's printout
# ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CliTimings:
    """whisper_print_timings of one whisper-cli run (whisper.cpp 1.8.5), in its own units."""
    mel_ms: float
    """The log-mel spectrogram."""
    encode_ms: float
    """The encoder's forwards (one per 30 s window)."""
    sample_ms: float
    """Greedy sampling: logit filters, log-softmax, softmax and token choice, after the prompt and each forward."""
    decode_ms: float
    """Decoder calls with one token (text generation)."""
    decode_runs: int
    """How many such calls: the forwards after the task prompt."""
    batchd_ms: float
    """Decoder calls of 2..15 tokens: here the task prompt."""
    batchd_tokens: int
    """Tokens in those calls (the printout's "runs")."""
    prompt_ms: float
    """Decoder calls of 16 tokens or more."""
    fallbacks: int
    """Temperature fallbacks (p + h); 0 with -nf."""


TIMING = re.compile(r"whisper_print_timings:\s+(\w+) time =\s*([\d.]+) ms(?: /\s*(\d+) runs)?")
FALLBACKS = re.compile(r"whisper_print_timings:\s+fallbacks =\s*(\d+) p /\s*(\d+) h")


def parse_timings(text: str) -> CliTimings:
    """The timings in whisper-cli's stderr; BenchError naming the missing line if one is absent."""
    found = {m.group(1): (float(m.group(2)), int(m.group(3) or 0)) for m in TIMING.finditer(text)}
    missing = [k for k in ("mel", "sample", "encode", "decode", "batchd", "prompt") if k not in found]
    fb = FALLBACKS.search(text)
    if missing or not fb:
        what = ", ".join(f"'{k} time'" for k in missing) or "'fallbacks'"
        raise BenchError(f"whisper-cli printed no {what} line in whisper_print_timings: {text[-300:]!r}")
    return CliTimings(mel_ms=found["mel"][0], encode_ms=found["encode"][0], sample_ms=found["sample"][0],
                      decode_ms=found["decode"][0], decode_runs=found["decode"][1], batchd_ms=found["batchd"][0],
                      batchd_tokens=found["batchd"][1], prompt_ms=found["prompt"][0],
                      fallbacks=int(fb.group(1)) + int(fb.group(2)))


# ---------------------------------------------------------------------------------------
# Clips and the two sides
# ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Clip:
    id: str
    runner_audio: dict
    """The runner's audio object: {"path": raw 16 kHz mono samples, "format": "s16" | "f32"}."""
    wav: Path
    """The same samples as a WAV file for whisper-cli."""


@dataclass(frozen=True)
class Setup:
    runner: Path
    cli: Path
    model: Path
    threads: int
    clips: list[Clip]


@dataclass(frozen=True)
class Decoded:
    """One clip decoded by one side."""
    text: str
    tokens: int
    """Tokens chosen after the prefill's first (N - 1): the runner's len(tokens) - 1, whisper-cli's decode runs."""
    decode_s: float
    """Forwards + sampling (the runner's decode clock; whisper-cli's decode + sample time)."""
    forward_s: float
    """The forwards alone."""
    encoder_s: float
    """Log-mel spectrogram + encoder."""
    prompt_tokens: int
    """The decoder's task prompt (the runner's n_prompt; whisper-cli's batchd runs, which count tokens)."""


def jfk_clip(tmp: Path) -> Clip:
    wav = whisper_source() / "samples" / "jfk.wav"
    with wave.open(str(wav)) as w:
        if (w.getframerate(), w.getnchannels(), w.getsampwidth()) != (16000, 1, 2):
            raise BenchError(f"{wav}: expected 16 kHz mono 16-bit PCM, got {w.getframerate()} Hz, "
                             f"{w.getnchannels()} channels, {8 * w.getsampwidth()}-bit")
        raw = tmp / "jfk.s16"
        raw.write_bytes(w.readframes(w.getnframes()))
    return Clip("jfk", {"path": str(raw), "format": "s16"}, wav)


def float_wav(samples_f32: bytes, out: Path) -> Path:
    """A WAV file (IEEE float, 16 kHz mono) of raw little-endian float32 samples, byte for byte."""
    fmt = struct.pack("<HHIIHHH", 3, 1, 16000, 16000 * 4, 4, 32, 0)
    fact = struct.pack("<I", len(samples_f32) // 4)
    body = (b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"fact" + struct.pack("<I", len(fact)) + fact
            + b"data" + struct.pack("<I", len(samples_f32)) + samples_f32)
    out.write_bytes(b"RIFF" + struct.pack("<I", len(body)) + body)
    return out


def speech_set_clips(tmp: Path) -> list[Clip]:
    """The speech set's windows (docs/SPEECH.md): the samples the runner gets (world/tracing.window_pcm) as
    float32, and the same floats in a WAV for whisper-cli."""
    from specbench.schemas.windows import load_windows
    from specbench.world.speech_clips import speech_windows
    from specbench.world.tracing import window_pcm

    clips = []
    for window in load_windows(speech_windows(download=False)):
        pcm = window_pcm(window)
        wav = float_wav(pcm.read_bytes(), tmp / f"{window.window_id}.wav")
        clips.append(Clip(window.window_id, {"path": str(pcm), "format": "f32"}, wav))
    return clips


def runner_side(s: Setup, clips: list[Clip]) -> dict[str, Decoded]:
    job = {"mode": "decode", "threads": s.threads, "target": {"path": str(s.model)}, "methods": [{"name": "target"}],
           "windows": [{"id": c.id, "audio": c.runner_audio, "prompt_text": "", "cap": CAP} for c in clips]}
    out: dict[str, Decoded] = {}
    for res in run_job(s.runner, job, timeout_s=RUNNER_TIMEOUT_S).results:
        if res.get("kind") != "decode":
            continue
        if res["stop_reason"] != "eos":
            raise BenchError(f"clip '{res['window_id']}': the runner stopped at its cap of {CAP} tokens, not at "
                             "<|endoftext|>")
        out[res["window_id"]] = Decoded(text=res["text"].strip(), tokens=len(res["tokens"]) - 1,
                                        decode_s=res["decode_s"], forward_s=sum(op["us"] for op in res["ops"]) * 1e-6,
                                        encoder_s=res["audio_prefill_us"] * 1e-6, prompt_tokens=res["n_prompt"])
    return out


def cli_argv(s: Setup, clip: Clip) -> list[str]:
    return [str(s.cli), "-m", str(s.model), "-f", str(clip.wav), "-t", str(s.threads), "-bs", "1", "-nf", "-nt"]


def cli_side(s: Setup, clips: list[Clip]) -> dict[str, Decoded]:
    out = {}
    for clip in clips:
        stdout, stderr = run_tool_streams(cli_argv(s, clip))
        t = parse_timings(stderr)
        if t.fallbacks:
            raise BenchError(f"clip '{clip.id}': whisper-cli fell back to sampling {t.fallbacks} times despite -nf")
        # -nt: stdout holds the transcript alone, one line per segment.
        text = " ".join(line.strip() for line in stdout.splitlines() if line.strip())
        out[clip.id] = Decoded(text=text, tokens=t.decode_runs, decode_s=(t.decode_ms + t.sample_ms) * 1e-3,
                               forward_s=t.decode_ms * 1e-3, encoder_s=(t.mel_ms + t.encode_ms) * 1e-3,
                               prompt_tokens=t.batchd_tokens)
    return out


def mismatches(runner: dict[str, Decoded], cli: dict[str, Decoded]) -> dict[str, str]:
    """{clip: why} for each clip the two sides did not decode alike: the same task prompt length, the same text,
    and the runner's N - 1 = whisper-cli's decode runs."""
    why = {}
    for clip in sorted(set(runner) | set(cli)):
        r, c = runner.get(clip), cli.get(clip)
        if r is None or c is None:
            why[clip] = f"decoded by {'whisper-cli' if r is None else 'the runner'} only"
        elif r.prompt_tokens != c.prompt_tokens:
            why[clip] = (f"the runner's task prompt has {r.prompt_tokens} tokens, whisper-cli's {c.prompt_tokens} "
                         f"(its batchd runs)")
        elif r.text != c.text:
            why[clip] = f"the runner decoded {r.text!r}, whisper-cli {c.text!r}"
        elif r.tokens != c.tokens:
            why[clip] = f"the runner chose {r.tokens} tokens after its first, whisper-cli ran {c.tokens} decodes"
    return why


# ---------------------------------------------------------------------------------------
# Rounds, medians, table
# ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Pooled:
    """One side's clips of one round, summed."""
    tokens: int
    decode_s: float
    forward_s: float
    encoder_s: float

    @staticmethod
    def of(decoded: dict[str, Decoded]) -> Pooled:
        runs = decoded.values()
        return Pooled(sum(d.tokens for d in runs), sum(d.decode_s for d in runs), sum(d.forward_s for d in runs),
                      sum(d.encoder_s for d in runs))


def measure(s: Setup, rounds: int) -> tuple[list[Row], dict]:
    got: dict[str, list[Pooled]] = {"runner": [], "tool": []}
    sides = [("runner", runner_side), ("tool", cli_side)]
    for r in range(rounds):
        # Alternate who goes first so slow drift in the machine's load hits both sides.
        decoded = {side: fn(s, s.clips) for side, fn in (sides if r % 2 == 0 else sides[::-1])}
        differ = mismatches(decoded["runner"], decoded["tool"])
        if differ:
            clip, why = next(iter(differ.items()))
            raise BenchError(f"round {r + 1}: clip '{clip}' decoded differently from the untimed first round: {why}")
        for side in got:
            got[side].append(Pooled.of(decoded[side]))
        run, tool = got["runner"][-1], got["tool"][-1]
        note(f"round {r + 1}/{rounds}: {run.tokens / run.decode_s:.1f} vs {tool.tokens / tool.decode_s:.1f} t/s, "
             f"load {os.getloadavg()[0]:.2f}")

    tokens = got["runner"][0].tokens
    rate = lambda side, clock: [p.tokens / getattr(p, clock) for p in got[side]]  # noqa: E731
    rows = [paired_row(f"forwards + sampling, {tokens} tokens", "whisper-cli decode + sample time",
                       rate("runner", "decode_s"), rate("tool", "decode_s"), TARGET),
            paired_row(f"forwards alone, {tokens} tokens", "whisper-cli decode time",
                       rate("runner", "forward_s"), rate("tool", "forward_s"), TARGET)]
    def ms_per_token(side: str) -> float:
        return statistics.median((p.decode_s - p.forward_s) / p.tokens * 1e3 for p in got[side])

    details = {
        "sampling_ms_per_token": {"runner": ms_per_token("runner"), "whisper-cli": ms_per_token("tool")},
        "encoder_ms": {"runner": statistics.median(p.encoder_s * 1e3 for p in got["runner"]),
                       "whisper-cli": statistics.median(p.encoder_s * 1e3 for p in got["tool"]),
                       "ratio": statistics.median(t.encoder_s / r.encoder_s
                                                  for r, t in zip(got["runner"], got["tool"], strict=True))},
        "samples": {side: [asdict(p) for p in pooled] for side, pooled in got.items()},
    }
    return rows, details


def print_table(rows: list[Row], header: dict, details: dict) -> None:
    print(f"runner vs whisper-cli (greedy) on {header['model']} — {header['threads']} threads, {header['rounds']} "
          f"interleaved rounds, {len(header['clips'])} clip(s): {', '.join(header['clips'])}; rates: medians over "
          "rounds (decoded tokens/s); ratio: median over rounds of runner / whisper-cli")
    print(f"whisper.cpp {header['whisper_cpp_version']}; runner on llama.cpp {header['llama_cpp_commit'][:12]}'s "
          f"ggml, whisper-cli on its own; flags {' '.join(header['flags'])}")
    print_rows(rows, "whisper-cli t/s")
    sampling = details["sampling_ms_per_token"]
    print(f"sampling per token (forwards + sampling minus forwards): runner {sampling['runner']:.3f} ms (argmax), "
          f"whisper-cli {sampling['whisper-cli']:.3f} ms (logit filters, log-softmax, softmax, timestamp sums)")
    enc = details["encoder_ms"]
    print(f"encoder (mel + encoder, informational): runner {enc['runner']:.1f} ms, "
          f"whisper-cli {enc['whisper-cli']:.1f} ms per round; whisper-cli / runner time {enc['ratio']:.3f} "
          "(median over rounds)")
    same = details["same_output"]
    left = {clip: why for clip, why in same.items() if why}
    print(f"same work: {len(same) - len(left)} of {len(same)} clip(s) decoded to the same text and token count on "
          "both sides" + "".join(f"; left out '{clip}': {why}" for clip, why in left.items()))
    print_load(header["load"], header["threads"])
    print_verdict(rows)


def prepare(args: argparse.Namespace, tmp: Path) -> tuple[Setup, dict[str, str]]:
    runner = runner_path()
    if not runner.exists():
        raise BenchError(f"native runner not found: {runner} (build it with scripts/build-runner)")
    cli = runner.parent / "whisper-cli"
    if not cli.exists():
        raise BenchError(f"whisper-cli not found: {cli} (build it with scripts/build-runner --whisper)")
    try:
        model = demo_model(args.model, download=False)
    except SpecbenchError as exc:
        raise BenchError(f"{exc.args[0]}; fetch it with `make demo-model`") from None
    clips = speech_set_clips(tmp) if args.speech_set else [jfk_clip(tmp)]
    setup = Setup(runner, cli, model, args.threads, clips)
    # One untimed round: both sides decode every clip; the clips decoded alike are the ones timed.
    note(f"untimed first round over {len(clips)} clip(s)")
    differ = mismatches(runner_side(setup, clips), cli_side(setup, clips))
    kept = [c for c in clips if c.id not in differ]
    for clip, why in differ.items():
        note(f"left out clip '{clip}': {why}")
    if not kept:
        clip, why = next(iter(differ.items()))
        raise BenchError(f"no clip decoded alike on both sides (task prompt, text, token count): "
                         f"'{clip}': {why}" + (f"; and {len(differ) - 1} more" if len(differ) > 1 else ""))
    return Setup(runner, cli, model, args.threads, kept), {c.id: differ.get(c.id, "") for c in clips}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     epilog="Ratios are runner / whisper-cli, measured in the same run.")
    parser.add_argument("--model", default="whisper-base", choices=MODELS,
                        help="cached Whisper model (default whisper-base)")
    parser.add_argument("--threads", type=int, default=2, help="threads for both sides (default 2)")
    parser.add_argument("--rounds", type=int, default=9, help="interleaved repetitions (default 9)")
    parser.add_argument("--speech-set", action="store_true",
                        help="decode the speech set's windows (docs/SPEECH.md) instead of samples/jfk.wav")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of the table")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.threads < 1:
        parser.error(f"--rounds and --threads must be >= 1, got --rounds {args.rounds} --threads {args.threads}")
    load_start = os.getloadavg()[0]
    try:
        with tempfile.TemporaryDirectory(prefix="whisper_speed-") as tmp:
            setup, same_output = prepare(args, Path(tmp))
            started, since = time.time(), cpu_seconds()
            rows, details = measure(setup, args.rounds)
            others = others_cores(since, time.time() - started)
    except (BenchError, SpecbenchError) as exc:
        print(f"whisper_speed: error: {exc}", file=sys.stderr)
        return 1
    manifest = build_manifest(setup.runner)
    header = {"model": setup.model.name, "model_path": str(setup.model), "threads": setup.threads,
              "rounds": args.rounds, "clips": [c.id for c in setup.clips],
              "whisper_cpp_version": manifest.get("whisper_cpp_version", "?"),
              "llama_cpp_commit": manifest.get("llama_cpp_commit", "?"), "flags": manifest.get("flags", []),
              "runner": str(setup.runner), "whisper_cli": str(setup.cli), "cap": CAP,
              "wall_s": round(time.time() - started, 1),
              "load": {"start": load_start, "end": os.getloadavg()[0], "others_cores": round(others, 3)}}
    details = {**details, "same_output": same_output}
    emit("specbench.bench.whisper_speed", rows, header, details, args.json, print_table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
