"""Around a job on a phone: cool-down before it, CPU pinning read while it runs (energy is the
runner's own sampling: world/native_energy.py)."""

from __future__ import annotations

from collections.abc import Callable

from specbench.errors import SpecbenchError
from specbench.world.devices import adb_state as st
from specbench.world.devices.adb_link import AdbLink
from specbench.world.devices.cooling import wait_until_cool


def pinning(link: AdbLink, pid_file: str, cpus: list[int]) -> dict:
    """Cpus_allowed_list of every thread of the pid in `pid_file`, against the requested CPUs."""
    command = f"p=$(cat {pid_file}) && for f in /proc/$p/task/*/status; do grep Cpus_allowed_list $f; done"
    observed = []
    try:
        text = link.shell(command, "reading the runner's CPU affinity", check=False).stdout
    except SpecbenchError:
        text = ""
    for line in text.splitlines():
        try:
            observed.append(tuple(st.parse_cpu_list(line.partition(":")[2])))
        except ValueError:
            continue
    if not observed:  # a job of a few milliseconds: nothing left to read
        return {"requested": cpus, "observed": None, "ok": None,
                "note": "the runner exited before its threads could be read"}
    return {"requested": cpus, "observed": [list(o) for o in sorted(set(observed))], "threads": len(observed),
            "ok": all(set(o) <= set(cpus) for o in observed)}


def cool_down(snapshot: Callable[[], dict], settings, serial: str) -> tuple[dict, dict | None]:
    """Poll snapshots until thermal status and zones are below the thresholds or
    settings.cooldown_max_s passed. Returns (last snapshot, cool-down record or None when
    the phone was cool at once); the record carries a warning when it never cooled."""
    s = settings

    def cool(snap: dict) -> bool:
        status, hottest = snap["thermal"]["status"], st.hottest_c(snap)
        hot_status = isinstance(status, int) and status > s.cooldown_status
        return not (hot_status or (hottest is not None and hottest >= s.cooldown_temp_c))

    snap, waited, cooled = wait_until_cool(snapshot, cool, s.cooldown_max_s, s.cooldown_poll_s)
    if cooled:
        return snap, ({"waited_s": round(waited, 1), "ok": True} if waited > 0.5 else None)
    message = (f"{serial}: still hot after {waited:.1f} s of cool-down (thermal status {snap['thermal']['status']}, "
               f"hottest zone {st.hottest_c(snap)} °C; thresholds {s.cooldown_status} and {s.cooldown_temp_c} °C): "
               "measuring anyway")
    return snap, {"waited_s": round(waited, 1), "ok": False, "warning": message}
