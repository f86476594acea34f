"""Sustained, paced native runs (docs/METHODS.md §6.3 Sustained load).

Each method configuration runs its own stream, one runner decode job with the job key `pace`:
requests arrive on the runner's clock as the audio would (an audio window's duration after the
previous arrival, or 1 / --rate for text windows) or back to back, cycling over the windows until
the duration is spent; every request starts from cleared KV caches (the paper's context reset).
Streams run one after the other (target-only first when it is the reference), so the phone's heat
carries over from one stream to the next unless it cools down between them (a phone's cool-down
before each job after the first; --no-cooldown skips it). As each request's record arrives, the
host reads the phone's thermal status, zone temperatures and CPU frequencies (or reuses the latest
reading when it was asked for after the request ended: requests shorter than a round trip would
otherwise leave the readings ever further behind): one `TimelineRecord` per request goes to
timeline.jsonl. The rows are the usual native rows, one per
(window, configuration), the median over the window's requests with every request's decode_s
in `samples_s`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from pathlib import Path

from specbench.core.methods.configs import MethodConfig, TargetConfig
from specbench.core.samples import median_index
from specbench.errors import SpecbenchError
from specbench.schemas.fileio import append_jsonl
from specbench.schemas.placement import device_label
from specbench.schemas.results import ResultsDir
from specbench.schemas.timeline import Pace, TimelineRecord, append_timeline
from specbench.schemas.windows import Window
from specbench.world.decode_run import (
    CLOCKS,
    SNAPSHOTS,
    NativeOutcome,
    NativePlan,
    Progress,
    SustainedLoad,
    check_models,
    manifest_for,
    method_job,
    plan_models,
    request_clocks,
    window_rows,
    write_window,
)
from specbench.world.environment import loaded_models, now, session, state
from specbench.world.jobs import DecodeJob
from specbench.world.model_files import ModelFile, model_job
from specbench.world.tracing import Prompts, prompts_for

MAX_DURATION_S = 24 * 3600.0
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*(s|m|h)?$")
_UNITS_S = {"s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """'120s', '10m', '1.5h' or '90' (seconds) -> seconds, in 1 s .. 24 h, or a one-line error."""
    match = _DURATION.match(text.strip().lower())
    seconds = float(match.group(1)) * _UNITS_S[match.group(2) or "s"] if match else None
    if seconds is None or not 1.0 <= seconds <= MAX_DURATION_S:
        raise SpecbenchError(f"--sustained {text}: expected a duration such as 120s, 10m or 1h, from 1 s to 24 h")
    return seconds


def check_load(load: SustainedLoad) -> None:
    """--rate is positive and only given for realtime pace (errors name the flag)."""
    if load.rate_per_s is not None:
        if load.pace != Pace.REALTIME:
            raise SpecbenchError(f"--rate {load.rate_per_s:g} is for --pace realtime (back-to-back requests "
                                 "arrive when the previous one ends)")
        if not 0 < load.rate_per_s <= 1000:
            raise SpecbenchError(f"--rate {load.rate_per_s:g}: expected requests per second in (0, 1000]")


def arrival_gaps_us(windows: Sequence[Window], load: SustainedLoad) -> list[int] | None:
    """Per window, microseconds from its request's arrival to the next one's (pure): an audio
    window's span duration, else 1 / --rate; None for back-to-back pace."""
    if load.pace == Pace.BACK_TO_BACK:
        return None
    gaps = []
    for window in windows:
        if window.input.kind == "audio" and window.input.duration_s is not None:
            gaps.append(round(window.input.duration_s * 1e6))
        elif load.rate_per_s is not None:
            gaps.append(round(1e6 / load.rate_per_s))
        else:
            what = "a text window" if window.input.kind == "text" else "an audio window with no duration_s"
            raise SpecbenchError(f"--pace realtime: window '{window.window_id}' is {what}, so its requests need a "
                                 "stated rate: pass --rate R (requests per second)")
    return gaps


def thermal_state(snapshot: dict) -> dict:
    """The timeline's thermal fields from a device snapshot (pure): status, readable zone
    temperatures, and each CPU policy's current and capped frequency (a phone's `clusters`; this
    host reports cpu0's current frequency only)."""
    status = snapshot.get("thermal", {}).get("status")
    zones = {k: float(v) for k, v in snapshot.get("thermal_c", {}).items()
             if isinstance(v, (int, float)) and not isinstance(v, bool)}
    clusters = snapshot.get("clusters", [])
    cur = {c["policy"]: c["cur_freq_khz"] for c in clusters if isinstance(c.get("cur_freq_khz"), int)}
    capped = {c["policy"]: c["scaling_max_freq_khz"] for c in clusters
              if isinstance(c.get("scaling_max_freq_khz"), int)}
    if not clusters and isinstance(snapshot.get("cpu0_freq_mhz"), int):
        cur = {"cpu0": snapshot["cpu0_freq_mhz"] * 1000}
    return {"thermal_status": status if isinstance(status, int) and not isinstance(status, bool) else None,
            "zones_c": zones, "cur_freq_khz": cur, "max_freq_khz": capped,
            "snapshot_time": str(snapshot.get("time", ""))}


def timeline_record(record: dict, zero_us: int, window: Window, device: str, config: MethodConfig, stream: int,
                    load: SustainedLoad, snapshot: dict, snapshot_s: float) -> TimelineRecord:
    """One request's timeline record from its runner record and the snapshot read after it, asked
    for `snapshot_s` seconds after the stream's zero (pure)."""
    decoded = record["kind"] == "decode"
    return TimelineRecord(
        device=device, config=config.label, stream=stream, pace=load.pace, cooldown=load.cooldown,
        request=int(record["request"]), window_id=window.window_id, window_sha256=window.window_sha256,
        arrival_s=(record["arrival_us"] - zero_us) / 1e6, start_s=(record["start_us"] - zero_us) / 1e6,
        end_s=(record["end_us"] - zero_us) / 1e6, tokens=len(record["tokens"]) - 1 if decoded else 0,
        decode_s=float(record["decode_s"]) if decoded else 0.0, lossless=decoded, snapshot_s=snapshot_s,
        **thermal_state(snapshot))


def stream_configs(plan: NativePlan) -> list[MethodConfig]:
    """The streams in the order they run: target-only first when its output is the reference."""
    if plan.references is not None:
        return list(plan.configs)
    return [TargetConfig()] + [c for c in plan.configs if not isinstance(c, TargetConfig)]


def run_sustained(plan: NativePlan, out: Path, resume: bool, progress: Progress | None = None) -> NativeOutcome:
    """One paced stream per configuration (see the module), each with the drafter it names."""
    load = plan.sustained
    if load is None:
        raise SpecbenchError("run_sustained needs a plan with a sustained load")
    if resume:
        raise SpecbenchError("--resume is not for --sustained runs: a paced stream cannot continue where it stopped",
                             hint="choose another --out")
    check_load(load)
    gaps = arrival_gaps_us(plan.windows, load)
    check_models(plan)
    drafters = {c.label: plan.drafter_of(c) for c in stream_configs(plan)}
    prompts = {d.name if d else None: prompts_for(plan.device, plan.target, d, plan.windows)
               for d in dict.fromkeys(drafters.values())}
    results = ResultsDir(out)
    before = plan.device.snapshot()
    results.open(manifest_for(plan, session(plan.device, before)), resume=False)
    append_jsonl(results.directory / SNAPSHOTS, [{"before": before}])
    references = dict(plan.references) if plan.references is not None else None
    outcome = NativeOutcome(results)
    for stream, config in enumerate(stream_configs(plan)):
        drafter = drafters[config.label]
        tokens = _stream(plan, load, gaps, prompts[drafter.name if drafter else None], results, stream, config,
                         drafter, references, outcome)
        if references is None:  # target-only's first output of each window is the others' reference
            references = tokens
        if progress:
            progress(1)
    after = plan.device.snapshot()
    append_jsonl(results.directory / SNAPSHOTS, [{"after": after}])
    results.finish(now(), loaded_models(plan.device, plan_models(plan)), state(after))
    return outcome


def _stream(plan: NativePlan, load: SustainedLoad, gaps: list[int] | None, prompts: Prompts, results: ResultsDir,
            stream: int, config: MethodConfig, drafter: ModelFile | None,
            references: dict[str, list[int]] | None, outcome: NativeOutcome) -> dict[str, list[int]]:
    """One configuration's paced stream: the timeline as requests finish, then the rows (counted in
    `outcome`); returns each window's first output."""
    device = device_label(plan.device.name, plan.placement)
    by_id = {w.window_id: w for w in plan.windows}
    refs = references or {}
    job = DecodeJob(model_job(plan.device, plan.target, plan.placement.target), [method_job(config)],
                    [prompts.runner_window(w, refs.get(w.window_id)) for w in plan.windows],
                    None if drafter is None else model_job(plan.device, drafter, plan.placement.drafter), warmup=True,
                    pace={"duration_s": load.duration_s} | ({} if gaps is None else {"gaps_us": gaps}))
    zero: list[int] = []
    zero_host: list[float] = []  # the host's clock when the stream's zero was announced
    records: dict[str, list[dict]] = {}
    last: list[tuple[float, dict]] = []  # the latest snapshot: (when it was asked for, the snapshot)

    def on_line(doc: dict) -> None:
        if doc.get("event") == "paced":
            zero.append(int(doc["zero_us"]))
            zero_host.append(time.monotonic())
            return
        record = doc.get("result")
        if not record or record.get("kind") not in ("decode", "divergence") or not zero:
            return
        window = by_id[record["window_id"]]
        records.setdefault(window.window_id, []).append(record)
        end_s = (record["end_us"] - zero[0]) / 1e6
        if not last or last[-1][0] < end_s:  # else a snapshot read after this request ended serves it too
            asked_s = time.monotonic() - zero_host[0]
            last[:] = [(asked_s, plan.device.state_now())]  # the stream goes on meanwhile: it is not paused
        asked_s, snapshot = last[-1]
        append_timeline(results.directory,
                        [timeline_record(record, zero[0], window, device, config, stream, load, snapshot, asked_s)])

    plan.device.run_job(job.to_dict(), on_line)
    if not zero:
        raise SpecbenchError(f"{plan.device.name}: the runner ran no paced stream (it predates the job key 'pace')",
                             hint="rebuild it with `specbench build-runner`")
    trace_file = None if drafter is None or plan.traces is None else plan.traces.get(drafter.name)
    firsts: dict[str, list[int]] = {}
    for window in plan.windows:
        runs = records.get(window.window_id)
        if not runs:
            continue  # the stream ended before this window's first request
        reference = references.get(window.window_id) if references is not None else runs[0].get("tokens")
        found = window_rows(window, device, [(config, runs)], [config], reference, plan.placement.key, drafter,
                            None if trace_file is None else trace_file.windows.get(window.window_id),
                            "" if trace_file is None else trace_file.drafter.sha256)
        write_window(results, device, found)
        decoded = [r for r in runs if r["kind"] == "decode"]
        if len(decoded) == len(runs):
            append_jsonl(results.directory / CLOCKS, [request_clocks(
                runs[median_index([r["decode_s"] for r in runs])], window, device, config)])
        if decoded:
            firsts[window.window_id] = decoded[0]["tokens"]
        outcome.add(found)
    return firsts
