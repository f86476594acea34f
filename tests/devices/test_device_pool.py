"""app.devices.on_devices: several devices in parallel threads, Ctrl-C cancelling every job."""

from __future__ import annotations

import threading

import pytest

from specbench.app.devices import on_devices
from specbench.errors import SpecbenchError


class FakeDevice:
    def __init__(self, name: str):
        self.name = name
        self.cancelled: list[str] = []
        self.stop = threading.Event()

    def cancel(self, reason: str = "was cancelled") -> None:
        self.cancelled.append(reason)
        self.stop.set()


def test_ctrl_c_cancels_the_job_on_every_device():
    a, b = FakeDevice("A"), FakeDevice("B")
    b_running = threading.Event()

    def work(dev, advance):
        if dev is a:
            assert b_running.wait(10)
            raise KeyboardInterrupt  # what the main thread gets from Ctrl-C
        b_running.set()
        assert dev.stop.wait(10), "B's job was never cancelled"
        raise SpecbenchError(f"phone {dev.name}: decode job {dev.cancelled[0]}")

    with pytest.raises(KeyboardInterrupt):
        on_devices([a, b], "running on", lambda dev: 1, work)
    assert a.cancelled == b.cancelled == ["was interrupted (Ctrl-C)"]


def test_a_failing_device_lets_the_others_finish_then_each_failure_is_named():
    a, b, c = FakeDevice("A"), FakeDevice("B"), FakeDevice("C")
    a_failed = threading.Event()

    def work(dev, advance):
        if dev is c:
            return "C done"
        if dev is a:
            a_failed.set()
            raise SpecbenchError("phone A is not connected")
        assert a_failed.wait(10)
        advance(1)
        return "B done"

    done = []
    with pytest.raises(SpecbenchError, match=r"^1 of 3 devices failed: A: phone A is not connected$"):
        on_devices([a, b, c], "profiling", lambda dev: 1, lambda dev, advance: done.append(work(dev, advance)))
    assert sorted(done) == ["B done", "C done"] and not (a.cancelled or b.cancelled or c.cancelled)


def test_one_device_returns_its_result_or_raises_its_own_error():
    dev = FakeDevice("local")
    assert on_devices([dev], "running on", lambda d: 2, lambda d, advance: "ok") == ["ok"]

    def fail(d, advance):
        raise SpecbenchError("native runner not found")

    with pytest.raises(SpecbenchError, match="^native runner not found$"):
        on_devices([dev], "running on", lambda d: 1, fail)
