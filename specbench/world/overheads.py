"""AS2D's non-model costs on a device, measured for the profile's `overheads` section, and the
target's co-scheduling ratio as an AS2D decode meets it.

A short native AS2D decode (the same window a few times) gives what the cost model
charges besides forwards: the producer thread's start-up after the decode clock starts,
the producer-lane time to publish one batch, and the target-lane time of one verifier
planning step with a realignment search. Each is the median over the runs (publishing:
the mean per batch, since the runner sums it). A profile without a drafter leaves them
at 0 and says so in its notes.

Target-only and SD decodes of the same window alternate with the AS2D ones (target, AS2D, SD, SD, AS2D,
target per window), so that the target's solo speed in the same minutes is known: with it, the AS2D decodes'
lane timestamps give the co-scheduling ratio the target realised (core/decomposition.py
`decode_contention`). The serial decodes' forwards give each model's decode ratio (core/pricing.py
`decode_ratio`): its forwards as a decode meets them, interleaved with the other model's on real tokens, over the
cells' price.
"""

from __future__ import annotations

import itertools
import os
import statistics
import wave
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from specbench.core.decomposition import NativeLanes
from specbench.core.pricing import SerialForward, timed_forwards
from specbench.core.repetitions import OVERHEADS_WINDOWS
from specbench.errors import SpecbenchError
from specbench.schemas.windows import Window
from specbench.world.devices.base import Device
from specbench.world.dirs import cache_dir
from specbench.world.jobs import DecodeJob, TokenizeJob
from specbench.world.model_files import ModelFile
from specbench.world.tracing import prompts_for

PROMPT_TEXT = ("The old lighthouse keeper climbed the spiral stairs every evening at dusk, counting the steps as his "
               "father had taught him, and when he reached the lamp room he would look out across the harbour")
"""The window both models continue, each in its own tokens: plain prose, so that the producer drafts the whole
decode as it would on a request (a prompt of arbitrary token ids sent Gemma 3 to its end of sequence after 8
steps, leaving the target's ratio to a handful of forwards)."""
CAP = 48
BUDGET = 7
"""The AS2D decodes' B where the profile measured the target that wide (B + 1), else its widest less one."""
SD_WIDTH = 5
"""The SD decodes' W (target forwards up to W wide) where the profile measured the target that wide, else its
widest; the paper-sized configurations verify 4-8 tokens."""
ZERO = {"producer_startup_s": 0.0, "publish_s": 0.0, "align_s": 0.0, "producer_step_s": 0.0}
SPEECH_SAMPLE = "jfk.wav"
"""What Whisper models hear instead of a prompt, shipped in specbench/data: whisper.cpp's own sample (J. F. Kennedy,
1961, public domain; 11 s, 16 kHz mono 16-bit; sha256 59dfb9a4…, as in whisper.cpp's `samples/`). Speech, so that
the producer transcribes for the whole decode as on a request: 10 s of noise drew a few tokens and left the
target's ratio to 8–20 forwards."""
SAMPLE_SECONDS = 11.0
"""SPEECH_SAMPLE's length: a copy of it, in a workload of audio windows, is this much of their speech."""


def bundled_speech_sample() -> Path:
    return Path(str(resources.files("specbench") / "data" / SPEECH_SAMPLE))


def overheads_audio(wav: Path | None = None) -> Path:
    """The Whisper overheads window's samples (raw float32, 16 kHz mono), made once in the specbench cache from
    `wav` (default: the bundled SPEECH_SAMPLE)."""
    path = cache_dir() / "audio" / "overheads-jfk.f32"
    if not path.is_file():
        wav = wav or bundled_speech_sample()
        with wave.open(str(wav)) as handle:
            if (handle.getframerate(), handle.getnchannels(), handle.getsampwidth()) != (16000, 1, 2):
                raise SpecbenchError(f"{wav}: expected 16 kHz mono 16-bit PCM, got {handle.getframerate()} Hz, "
                                     f"{handle.getnchannels()} channels, {8 * handle.getsampwidth()}-bit")
            samples = np.frombuffer(handle.readframes(handle.getnframes()), dtype="<i2") / 32768.0
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.part")
        samples.astype("<f4").tofile(partial)
        os.replace(partial, path)
    return path


def prompt_tokens(device: Device, model: dict) -> list[int]:
    """PROMPT_TEXT in the tokens of `model` (the runner's model object), with its special tokens."""
    job = TokenizeJob({"path": model["path"]}, [PROMPT_TEXT], False)
    tokens = [r["tokens"] for r in device.run_job(job.to_dict()).results if r.get("kind") == "tokens"]
    if len(tokens) != 1 or not tokens[0]:
        raise SpecbenchError(f"the runner returned no tokens for the overheads prompt of {model['path']}")
    return [int(t) for t in tokens[0]]


def overheads_job(target: dict, drafter: dict, prompts: tuple[list[int], list[int]] | None = None,
                  audio: str | None = None, budget: int = BUDGET, windows: int = OVERHEADS_WINDOWS,
                  workload: Sequence[dict] | None = None, as2d: bool = True) -> DecodeJob:
    """`target`/`drafter`: the runner's model objects, with their lanes (the profile's placement);
    `prompts`: PROMPT_TEXT in the target's and in the drafter's tokens (`prompt_tokens`), for text models;
    `audio`: the device path of overheads_audio() for models that hear audio (Whisper, each window encoded
    once per model for all its decodes), else None;
    `budget`: the AS2D decodes' B (their target forwards are up to B + 1 wide); `windows`: copies of the
    window, each decoded twice by each method; `workload`: the runner windows of `workload_selection`'s
    windows to decode instead, each decoded twice by each method (audio windows encoded once per model);
    `as2d`: decode AS2D too (a drafter that no AS2D configuration uses needs only the serial decodes). SD
    decodes at W = `budget` + 1, capped at SD_WIDTH, run beside them where that is 2 or more."""
    methods: list[dict] = [{"name": "target"}]
    if as2d:
        methods.append({"name": "as2d", "budget": budget, "batch": 8})
    if min(budget + 1, SD_WIDTH) >= 2:
        methods.append({"name": "sd", "width": min(budget + 1, SD_WIDTH)})
    if workload:
        return DecodeJob(target, methods, list(workload), drafter, runs=2, alternate=True,
                         reuse_audio_prefill=any("audio" in w for w in workload))
    if audio is not None:
        window = {"audio": {"path": audio, "format": "f32"}, "prompt_text": "", "cap": CAP}
    elif prompts is not None:
        window = {"prompt": prompts[0], "drafter_prompt": prompts[1], "cap": CAP}
    else:
        raise ValueError("overheads_job needs the prompts of text models or the audio of Whisper models")
    # a Whisper model encodes a window once for its six decodes: the decode clock excludes the encoder, and
    # the profile's forwards run without one between them too
    return DecodeJob(target, methods, [window | {"id": f"overheads-{i}"} for i in range(windows)], drafter, runs=2,
                     alternate=True, reuse_audio_prefill=audio is not None)


def workload_selection(windows: Sequence[Window], copies: int = OVERHEADS_WINDOWS,
                       hears_audio: bool = False) -> list[Window]:
    """The workload's windows an overheads job decodes (pure), holding as much as `copies` of the window they
    replace: for text models as many tokens of cap as copies of the prose window (copies x CAP), for models
    that hear audio as many seconds of speech as copies of the speech sample (copies x SAMPLE_SECONDS; a
    speech window stops at its end of text, long before its cap). The fewest windows spread evenly over
    `windows` in their order that reach it, or, when all of them fall short, all of them again and again
    until they do."""
    if not windows:
        return []
    size, wanted = (_speech_seconds, copies * SAMPLE_SECONDS) if hears_audio else (_cap, copies * CAP)
    for count in range(1, len(windows) + 1):
        picked = sorted({round(i * (len(windows) - 1) / max(count - 1, 1)) for i in range(count)})
        if sum(size(windows[i]) for i in picked) >= wanted:
            return [windows[i] for i in picked]
    out: list[Window] = []
    held = 0.0
    for window in itertools.cycle(windows):  # every window holds something
        if held >= wanted:
            break
        out.append(window)
        held += size(window)
    return out


def _cap(window: Window) -> float:
    return window.cap


def _speech_seconds(window: Window) -> float:
    """An audio window's length (a window of a whole file states none: counted as one sample)."""
    return window.input.duration_s or SAMPLE_SECONDS


def workload_windows(device: Device, target: ModelFile, drafter: ModelFile, chosen: Sequence[Window],
                     references: Mapping[str, Sequence[int]] | None = None) -> list[dict]:
    """The runner windows of `chosen` (`workload_selection`'s) for `target` and `drafter`, each distinct window
    tokenized once, each decode with an id of its own (a workload shorter than the copies' tokens decodes a window
    again); with `references`, each checked against its traced output."""
    prompts = prompts_for(device, target, drafter, list({w.window_id: w for w in chosen}.values()))
    return [prompts.runner_window(w, None if references is None else references[w.window_id])
            | {"id": f"overheads-{i}-{w.window_id}"} for i, w in enumerate(chosen)]


def decode_lanes(results: Sequence[dict]) -> list[NativeLanes]:
    """The AS2D decodes of an overheads job as lanes, each beside every target-only decode of the job (pure)."""
    decodes = [r for r in results if r.get("kind") == "decode"]
    solo = [op for r in decodes if r["method"]["name"] == "target" for op in r["ops"]]
    return [NativeLanes(r["ops"], r["producer"], solo, r.get("n_prompt_drafter"), r.get("window_id"))
            for r in decodes if "producer" in r]


def serial_forwards(results: Sequence[dict]) -> dict[str, list[SerialForward]]:
    """Every forward of the job's serial decodes (target-only and SD) with the host work after it
    (`core.pricing.timed_forwards`), by the model that ran it ('target', 'drafter'), for
    `core.pricing.decode_ratio` (pure)."""
    out: dict[str, list[SerialForward]] = {"target": [], "drafter": []}
    for r in results:
        if r.get("kind") == "decode" and r["method"]["name"] in ("target", "sd"):
            for model, forward in timed_forwards(r["ops"], 1e6 * float(r["decode_s"])):
                out[model].append(forward)
    return out


def overheads_from_results(results: Sequence[dict]) -> dict:
    """The profile's `overheads` from the runner's AS2D decode results (pure)."""
    runs = [r for r in results if r.get("kind") == "decode" and "producer" in r]
    if not runs:
        raise SpecbenchError("the runner's AS2D decode returned no producer record")
    startup = statistics.median(r["producer"]["started_us"] for r in runs)
    batches = sum(len(r["producer"]["publish_us"]) for r in runs)
    publish = sum(r["producer"]["publish_cost_us"] for r in runs) / max(batches, 1)
    plans = [op for r in runs for op in r["ops"] if op.get("model") == "target" and "plan_us" in op]
    searched = [op["plan_us"] for op in plans if op.get("searched")] or [op["plan_us"] for op in plans] or [0]
    steps = [s for s in (producer_step_us(r["producer"]) for r in runs) if s is not None]
    return {"producer_startup_s": startup / 1e6, "publish_s": publish / 1e6,
            "align_s": statistics.median(searched) / 1e6,
            "producer_step_s": statistics.median(steps) / 1e6 if steps else 0.0}


def producer_step_us(producer: dict) -> float | None:
    """The producer's host work per step besides forwards and publishing (pure): the lane's gaps between its
    start and each forward, which hold one greedy choice, mapping and stream copy each (and the publishes
    made in them, taken out at the mean publishing cost), per gap; None without a forward."""
    starts, ends = producer.get("step_start_us", []), producer.get("step_us", [])
    if not starts:
        return None
    gaps = [starts[0] - producer["started_us"]] + [b - a for a, b in zip(ends, starts[1:], strict=False)]
    publishes = producer["publish_step"]
    in_gaps = sum(1 for step in publishes if step < len(starts))  # step s publishes before forward s + 1 starts
    mean_publish = producer["publish_cost_us"] / max(len(publishes), 1)
    return max(0.0, (sum(gaps) - in_gaps * mean_publish) / len(gaps))


@dataclass(frozen=True)
class OverheadsRun:
    """What one overheads job measured."""

    overheads: dict
    note: str
    """How, for the profile's notes."""
    lanes: list[NativeLanes]
    """Its AS2D decodes' lanes, for the contention they met (none when it decoded no AS2D)."""
    serial: dict[str, list[SerialForward]]
    """Its serial decodes' forwards by model (`serial_forwards`), for each model's decode ratio."""
    decodes: list[dict]
    """The runner's decode records as it returned them (op logs with their timestamps, the producer's record), for
    the profile's raw samples: what a price can be checked against later."""


def measure_overheads(device: Device, target: dict, drafter: dict, widest: int,
                      target_prompt: list[int] | None = None, windows: int = OVERHEADS_WINDOWS,
                      workload: Sequence[dict] | None = None, as2d: bool = True) -> OverheadsRun:
    """`target`/`drafter`: the runner's model specs; `widest`: the widest target forward the profile
    prices (the decodes' B is at most one less, so that every forward they time has a price);
    `target_prompt`: PROMPT_TEXT in the target's tokens (`prompt_tokens`, made once for every drafter), or
    None for Whisper models (they hear SPEECH_SAMPLE instead); `windows`: copies of the window, each decoded
    twice by each method (target, AS2D, SD, SD, AS2D, target; a smoke run's profile takes 1); `workload`: the
    runner windows of the workload's windows (`workload_selection`) to decode instead, when given; `as2d`:
    False to time the serial decodes alone (no overheads, no lanes: a drafter no AS2D configuration uses)."""
    budget = max(1, min(BUDGET, widest - 1))
    if workload:
        job = overheads_job(target, drafter, budget=budget, workload=workload, as2d=as2d)
        held = ("speech, each encoded once per model" if any("audio" in w for w in workload)
                else f"{sum(int(w['cap']) for w in workload)} tokens of cap")
        decoded = f"2 runs of {len(workload)} windows of the workload ({held})"
    else:
        hears_audio = target_prompt is None
        audio = device.model_path(overheads_audio()) if hears_audio else None
        prompts = None if target_prompt is None else (target_prompt, prompt_tokens(device, drafter))
        job = overheads_job(target, drafter, prompts, audio, budget, windows, as2d=as2d)
        window = (f"speech window ({SPEECH_SAMPLE}, cap {CAP}, encoded once per model)" if hears_audio
                  else f"{CAP}-token window continuing a fixed passage of prose")
        decoded = f"{2 * windows} runs of {windows} {'copy' if windows == 1 else 'copies'} of a {window}"
    out = device.run_job(job.to_dict())
    decodes = [r for r in out.results if r.get("kind") == "decode"]
    beside = [f"as2d[B={m['budget']}]" if m["name"] == "as2d" else f"sd[W={m['width']}]"
              for m in job.methods if m["name"] != "target"]  # the job's own methods, as it ran them
    note = f"native {' and '.join(beside)}, {decoded} alternating with target-only runs"
    if not as2d:
        return OverheadsRun(dict(ZERO), f"serial decodes: {note}", [], serial_forwards(decodes), decodes)
    return OverheadsRun(overheads_from_results(decodes), f"overheads: {note}, medians",
                        decode_lanes(decodes), serial_forwards(decodes), decodes)
