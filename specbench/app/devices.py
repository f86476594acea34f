"""Several devices at once: open them by name, then work on each in its own thread, one
progress bar each (stderr).

A device that fails does not stop the others (each writes its results as it finishes, so
their work is kept); afterwards one error names every device that failed. Ctrl-C cancels
the job running on every device.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from specbench.app.options import PhoneOptions
from specbench.app.progress import Advance, progress_bars, stderr
from specbench.errors import SpecbenchError
from specbench.world.devices.adb import AdbSettings, list_phones
from specbench.world.devices.base import Device, open_device

T = TypeVar("T")


def open_devices(names: Sequence[str], phone: PhoneOptions | None = None, cooldown: bool = True) -> list[Device]:
    """Each device by name; phones run their jobs with the `phone` options given (the rest their
    defaults), cool down between jobs unless `cooldown` is False, and warn on stderr."""
    given = {k: v for k, v in dataclasses.asdict(phone or PhoneOptions()).items() if v is not None}
    settings = AdbSettings(**given, cooldown=cooldown)
    return [open_device(name, settings, warn) for name in names]


def phones() -> list[dict]:
    """`specbench devices`: the phones the adb server sees, one dict each (serial, state, model, soc, abi,
    android)."""
    return list_phones()


def warn(message: str) -> None:
    stderr.print(f"warning: {message}", markup=False)


def on_devices(devices: Sequence[Device], label: str, total: Callable[[Device], int],
               work: Callable[[Device, Advance], T]) -> list[T]:
    """work(device, advance) on every device, in parallel threads, under a bar "{label} {name}"
    of `total(device)` steps each; the results in the order of `devices`. Every device runs to
    its end; then one SpecbenchError names each that failed (a single device's own error as it is)."""
    results: list = [None] * len(devices)
    errors: list[tuple[str, SpecbenchError]] = []
    lock = threading.Lock()
    with progress_bars([(f"{label} {dev.name}", total(dev)) for dev in devices]) as advances:

        def one(index: int) -> None:
            try:
                results[index] = work(devices[index], advances[index])
            except SpecbenchError as exc:
                with lock:
                    errors.append((devices[index].name, exc))

        if len(devices) == 1:
            one(0)  # in this thread: Ctrl-C reaches the job directly
        else:
            pool = ThreadPoolExecutor(max_workers=len(devices))
            futures = [pool.submit(one, i) for i in range(len(devices))]
            try:
                for future in futures:
                    future.result()
            except KeyboardInterrupt:
                for dev in devices:
                    dev.cancel("was interrupted (Ctrl-C)")
                pool.shutdown(wait=True)
                raise
            pool.shutdown()
    if len(errors) == 1 and len(devices) == 1:
        raise errors[0][1]
    if errors:
        for name, exc in errors:
            stderr.print(f"error: {name}: {exc}", markup=False)
        raise SpecbenchError(f"{len(errors)} of {len(devices)} devices failed: "
                             + "; ".join(f"{name}: {exc}" for name, exc in errors))
    return results
