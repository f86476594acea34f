"""Collect the `environment` block (schemas/environment.py) of the file a command writes.

One session of a command: its start (`session`, reading the clock, sys.argv, the device's
runner and state), then its end (`finish_models`: the models as the runner loaded them, paired
with the sha256 specbench computed). The devices remember the runner's `loaded` events
(`Device.loaded`), so no job is spent asking.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from specbench import __version__
from specbench.schemas.environment import DeviceEnvironment, Environment, LoadedModel, Role, RunnerBuild, utc_text
from specbench.world.devices.adb_state import UNAVAILABLE
from specbench.world.runner import RunnerInfo

if TYPE_CHECKING:
    from specbench.world.devices.base import Device
    from specbench.world.model_files import ModelFile

_PROMOTED = ("name", "kind", "model", "soc")
"""describe() keys the block has fields for; the rest go to `details`."""


def now() -> str:
    """This instant as the block writes it (UTC ISO-8601, milliseconds)."""
    return utc_text(datetime.now(timezone.utc))


def runner_build(info: RunnerInfo) -> RunnerBuild:
    return RunnerBuild(info.version, info.protocol, info.sha256, info.llama_cpp_commit, tuple(info.flags),
                       info.system_info)


def state(snapshot: dict) -> dict:
    """A snapshot without its per-job records (those stay in the profile's `snapshot` and a run's
    snapshots.jsonl): the device's state, which the block keeps."""
    return {k: v for k, v in snapshot.items() if k != "jobs"}


def device_environment(device: Device, before: dict) -> DeviceEnvironment:
    """The device's identity (describe()) and its state `before` the session's first job."""
    facts = device.describe()
    # a phone's `cores` are those the runner is pinned to, its `cpu_count` all of them
    count_key = "cpu_count" if "cpu_count" in facts else "cores"
    cores = facts.get(count_key)
    governor = before.get("governor")
    return DeviceEnvironment(
        name=str(facts.get("name", device.name)), kind=str(facts.get("kind", "")), model=str(facts.get("model", "")),
        soc=str(facts.get("soc") or "") or None, cores=cores if isinstance(cores, int) and cores > 0 else None,
        governor=governor if isinstance(governor, str) and governor and governor != UNAVAILABLE else None,
        snapshot={"before": state(before)},
        details={k: v for k, v in facts.items() if k not in _PROMOTED and k != count_key})


def session(device: Device | None, before: dict | None = None) -> Environment:
    """The environment of a session starting now on `device` (None: no device, as in replay),
    whose state `before` the caller took (the same snapshot it records elsewhere)."""
    if device is None:
        return Environment(__version__, tuple(sys.argv), now())
    return Environment(__version__, tuple(sys.argv), now(), runner=runner_build(device.runner()),
                       device=device_environment(device, device.snapshot() if before is None else before))


def loaded_models(device: Device, models: Sequence[tuple[str, ModelFile]]) -> list[LoadedModel]:
    """(role, model file) pairs as the device's runner last loaded them, with their sha256; a
    model the runner has not loaded in this process is left out (never described from its file),
    and so is a drafter without a model (prompt lookup)."""
    seen = device.loaded()
    out: list[LoadedModel] = []
    for role, model in models:
        if model.lookup:
            continue
        event = seen.get(device.model_path(model.path))
        if event is None or any(m.sha256 == model.sha256 and m.role == role for m in out):
            continue
        threads = event.get("threads")
        out.append(LoadedModel(Role(role), model.name, model.sha256, str(event["desc"]), int(event["n_params"]),
                               int(event["size_bytes"]), None if threads is None else int(threads)))
    return out
