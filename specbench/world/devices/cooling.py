"""Waiting for a device to cool: one polling loop, for the two rules it serves: below fixed thresholds before
a phone job (adb_watch.py), and back to where a validation block started before the block is redone
(app/validate.py)."""

from __future__ import annotations

import time
from collections.abc import Callable

BACK_MAX_S = 300.0
"""The longest a redone block waits for the zones to come back after its pause."""
BACK_MARGIN_C = 3.0
"""A zone is back when within this many °C of where the block started."""
BACK_POLL_S = 5.0
"""Seconds between two snapshots while waiting for the zones."""


def wait_until_cool(snapshot: Callable[[], dict], is_cool: Callable[[dict], bool], max_s: float,
                    poll_s: float) -> tuple[dict, float, bool]:
    """A snapshot every `poll_s` seconds until one `is_cool` or `max_s` seconds passed: (the last
    snapshot, the seconds waited, whether it was cool)."""
    start = time.monotonic()
    while True:
        snap = snapshot()
        waited_s = time.monotonic() - start
        if is_cool(snap):
            return snap, waited_s, True
        if waited_s >= max_s:
            return snap, waited_s, False
        time.sleep(min(poll_s, max(0.0, max_s - waited_s)))


def zones_c(snapshot: dict) -> dict[str, float]:
    """A snapshot's readable thermal zones, in °C, by name."""
    zones = snapshot.get("thermal_c") or {}
    if not isinstance(zones, dict):
        return {}
    return {str(k): float(v) for k, v in zones.items() if isinstance(v, (int, float))}


def cool_back(snapshot: Callable[[], dict], start: dict, pause_s: float) -> None:
    """Sleep `pause_s`; a device that reports thermal zones then waits (up to BACK_MAX_S) until each
    is within BACK_MARGIN_C of `start` (the snapshot where the block started) and its thermal status is 0."""
    time.sleep(pause_s)
    zones = zones_c(start)
    if not zones:
        return

    def back(snap: dict) -> bool:
        status = (snap.get("thermal") or {}).get("status", 0)
        current = zones_c(snap)
        return status in (0, "unavailable") and all(current.get(z, t) <= t + BACK_MARGIN_C for z, t in zones.items())

    wait_until_cool(snapshot, back, BACK_MAX_S, BACK_POLL_S)
