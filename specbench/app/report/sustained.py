"""The sustained-load tables and figure of a report (docs/METHODS.md §6.3 Sustained load): for each
sustained run given (with and without cool-down are separate runs) and each method's stream,
throughput and the hottest zone over the stream, and the first request at which throttling shows.

Throttling shows at the first request whose snapshot has a thermal status above 0, or a CPU
policy's scaling_max_freq below the one in the stream's first snapshot: the cap the kernel lowers
when it throttles, where cpuinfo_max_freq never changes and scaling_cur_freq also follows load.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from specbench.render.tables import Table
from specbench.schemas.timeline import TimelineRecord, load_timeline

Timeline = list[TimelineRecord]
ORDER = ("per results directory x device x configuration (one paced stream): requests in arrival order; "
         "tokens/s pooled over the stream (sum of tokens / sum of decode clocks), first and last requests alone")
THROTTLE_ORDER = ("per stream: the first request whose snapshot shows a thermal status above 0 or a CPU policy's "
                  "scaling_max_freq below the stream's first snapshot's ('-': none did); seen_at_s: when that "
                  "snapshot was read, seconds into the stream")


def timelines(directories: Sequence[Path]) -> list[tuple[str, Timeline]]:
    """(run name, its timeline) of every sustained run among `directories` (its folder's name)."""
    found = [(Path(d).name or str(d), load_timeline(Path(d))) for d in directories]
    return [(name, records) for name, records in found if records]


def streams(timeline: Timeline) -> dict[tuple[str, str], Timeline]:
    """(device, configuration) -> its stream's requests, in the order the streams ran."""
    out: dict[tuple[str, str], Timeline] = {}
    for record in sorted(timeline, key=lambda r: (r.stream, r.request)):
        out.setdefault((record.device, record.config), []).append(record)
    return out


def throttle_reason(record: TimelineRecord, first: TimelineRecord) -> str:
    """Why `record` shows throttling against its stream's first snapshot ('' when it does not)."""
    reasons = [f"thermal status {record.thermal_status}"] if record.thermal_status else []
    reasons += [f"{policy} max {khz} kHz < {first.max_freq_khz[policy]} kHz"
                for policy, khz in sorted(record.max_freq_khz.items())
                if policy in first.max_freq_khz and khz < first.max_freq_khz[policy]]
    return "; ".join(reasons)


def first_throttled(stream: Timeline) -> TimelineRecord | None:
    """The first request of one stream at which throttling shows, or None."""
    if not stream:
        return None
    return next((r for r in stream if throttle_reason(r, stream[0])), None)


def _hottest(record: TimelineRecord) -> float:
    return max(record.zones_c.values(), default=float("nan"))


def _pooled(records: Timeline) -> float:
    decoded = [r for r in records if r.lossless]
    seconds = sum(r.decode_s for r in decoded)
    return sum(r.tokens for r in decoded) / seconds if seconds > 0 else float("nan")


def stream_table(runs: Sequence[tuple[str, Timeline]]) -> pd.DataFrame:
    """One row per (run, device, configuration): pace, cool-down, requests, throughput and heat."""
    rows = []
    for name, timeline in runs:
        for (device, config), records in streams(timeline).items():
            first, last = records[0], records[-1]
            rows.append({"run": name, "device": device, "config": config, "stream": first.stream,
                         "pace": first.pace, "cooldown": "yes" if first.cooldown else "no",
                         "requests": len(records), "duration_s": last.end_s, "tokens_per_s": _pooled(records),
                         "first_tokens_per_s": first.tokens_per_s, "last_tokens_per_s": last.tokens_per_s,
                         "max_queue_s": max(r.queue_s for r in records), "start_c": _hottest(first),
                         "end_c": _hottest(last)})
    return pd.DataFrame(rows)


def throttle_table(runs: Sequence[tuple[str, Timeline]]) -> pd.DataFrame:
    """One row per (run, device, configuration): the first throttled request, when, and why."""
    rows = []
    for name, timeline in runs:
        for (device, config), records in streams(timeline).items():
            hit = first_throttled(records)
            rows.append({"run": name, "device": device, "config": config,
                         "first_throttled_request": None if hit is None else hit.request,
                         "window_id": None if hit is None else hit.window_id,
                         "seen_at_s": None if hit is None else hit.snapshot_s,
                         "why": "" if hit is None else throttle_reason(hit, records[0])})
    return pd.DataFrame(rows)


def sustained_tables(directories: Sequence[Path]) -> list[Table]:
    """The sustained-load tables of the sustained runs among `directories` ([] when none is)."""
    runs = timelines(directories)
    if not runs:
        return []
    keys = ("run", "device")
    return [
        Table("Sustained load: throughput and heat per stream", ORDER, stream_table(runs),
              {"duration_s": ".1f", "tokens_per_s": ".2f", "first_tokens_per_s": ".2f", "last_tokens_per_s": ".2f",
               "max_queue_s": ".3f", "start_c": ".1f", "end_c": ".1f"}, keys=keys),
        Table("Sustained load: first request at which throttling shows", THROTTLE_ORDER, throttle_table(runs),
              {"seen_at_s": ".2f"}, keys=keys),
    ]


def timeline_frame(runs: Sequence[tuple[str, Timeline]]) -> pd.DataFrame:
    """Every request of every run: run, device, config, end_s, snapshot_s, tokens_per_s, hottest_c."""
    return pd.DataFrame([{"run": name, "device": r.device, "config": r.config, "cooldown": r.cooldown,
                          "end_s": r.end_s, "snapshot_s": r.snapshot_s, "tokens_per_s": r.tokens_per_s,
                          "hottest_c": _hottest(r)}
                         for name, timeline in runs for r in timeline])


def sustained_figures(directories: Sequence[Path], directory: Path, save) -> dict[str, list[Path]]:
    """The sustained timeline figure (render.plots.sustained_timeline) when a run is sustained."""
    from specbench.render import plots

    runs = timelines(directories)
    if not runs:
        return {}
    fig, _ = plots.sustained_timeline(timeline_frame(runs))
    return {"sustained": save(fig, directory / "sustained")}
