"""How busy other processes keep this machine: timing on 2 cores is only meaningful idle."""

from __future__ import annotations

import os
import resource
import time


def cpu_seconds() -> tuple[float, float]:
    """(CPU seconds all processes used, CPU seconds this process and its children used)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    busy = sum(fields[:8]) - fields[3] - fields[4]  # all but idle and iowait
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return busy / os.sysconf("SC_CLK_TCK"), me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def others_cores(since: tuple[float, float], wall_s: float) -> float:
    """Mean number of cores other processes kept busy since `since` (over `wall_s` seconds)."""
    busy, mine = cpu_seconds()
    return max(0.0, (busy - since[0]) - (mine - since[1])) / max(wall_s, 1e-9)


def idle_check(seconds: float = 3.0) -> float:
    """Cores other processes keep busy over a short quiet wait."""
    start, t0 = cpu_seconds(), time.monotonic()
    time.sleep(seconds)
    return others_cores(start, time.monotonic() - t0)
