"""Fixtures of the native runner's tests: the local device running the checkout's runner and the tiny
(target, drafter) pair (the runner and the tiny models themselves: tests/conftest.py)."""

from __future__ import annotations

import pytest


@pytest.fixture()
def device(runner):
    """The local device running this checkout's runner."""
    from specbench.world.devices.local import LocalDevice

    return LocalDevice(runner=runner)


@pytest.fixture()
def models(tiny):
    """(target, drafter) model files of the tiny fixtures."""
    from specbench.world.model_files import ModelFile

    return ModelFile("target", tiny.target), ModelFile("near", tiny.near)
