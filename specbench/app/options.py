"""What the commands' options offer and how several commands read them: the defaults and closed
sets their --help shows, the configurations --methods/--method ask for, device names, the phone
options, and output paths refused before any work.

Light to import (no numpy, pandas, rich or yaml): every `specbench CMD --help` reads it
(tests/test_startup.py); what needs the library loads inside the functions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from specbench.core.methods.configs import REGISTRY, MethodConfig, TargetConfig, parse_method_specs
from specbench.core.repetitions import (
    DEFAULT_MAX_REPETITIONS,
    DEFAULT_PRECISION,
    MAX_OVERHEADS_WINDOWS,
    MAX_PRECISION_REPETITIONS,
    MIN_REPETITIONS,
    OVERHEADS_WINDOWS,
)
from specbench.errors import SpecbenchError
from specbench.schemas.placement import NAMED as PLACEMENTS
from specbench.schemas.timeline import PACES
from specbench.world.build import DEFAULT_ARM_ARCH
from specbench.world.datasets import AUDIO_LAYOUTS, LAYOUTS, TASKS
from specbench.world.devices.adb_link import SERVER_HOST_ENV, SERVER_PORT_ENV
from specbench.world.runner import RUNNERS_ENV

__all__ = ["AUDIO_LAYOUTS", "DEFAULT_ARM_ARCH", "DEFAULT_MAX_REPETITIONS", "DEFAULT_METHODS", "DEFAULT_PRECISION",
           "LAYOUTS", "MAX_OVERHEADS_WINDOWS", "MAX_PRECISION_REPETITIONS", "METHOD_NAMES", "MIN_REPETITIONS",
           "OVERHEADS_WINDOWS", "PACES", "PLACEMENTS", "RESULTS",
           "RUNNERS_ENV", "SERVER_HOST_ENV", "SERVER_PORT_ENV", "TASKS", "PhoneOptions", "check_output_dir",
           "check_output_path", "check_results_dir", "configs_from", "device_names"]

METHOD_NAMES = tuple(REGISTRY)
"""Every method by name, in the registry's order."""
DEFAULT_METHODS = METHOD_NAMES
"""With neither --methods nor --method, every method runs with its defaults."""
RESULTS = Path("results")
"""The default root of what `run`, `select-budget` and `demo` write (git-ignored in a checkout)."""


def configs_from(method_names: str | None, method_specs: Sequence[str], default_drafter: str | None,
                 default: Callable[[], Sequence[str]] = lambda: DEFAULT_METHODS) -> list[MethodConfig]:
    """The configurations that --methods (None: not given) and --method ask for; drafter-less
    ones take `default_drafter`. --method alone runs only what it names; with neither, the
    methods of `default()`. A --methods name that a --method configures gives way to it."""
    if method_names is None:
        names = [] if method_specs else list(default())
    else:
        names = [name.strip() for name in method_names.split(",") if name.strip()]
    configured = {spec.partition(":")[0].strip() for spec in method_specs}
    specs = [s for s in names if s not in configured] + list(method_specs)
    if not specs:
        raise SpecbenchError("no methods given (--methods or --method)")
    configs = parse_method_specs(specs)
    if default_drafter is None:
        return configs
    return [replace(c, drafter=default_drafter) if not isinstance(c, TargetConfig) and c.drafter is None else c
            for c in configs]


def device_names(specs: Sequence[str]) -> list[str]:
    """'a,b' and repeated names -> unique names in order ('local' when none)."""
    names = [n.strip() for spec in specs for n in spec.split(",") if n.strip()] or ["local"]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise SpecbenchError(f"device {duplicates[0]} is named twice", hint="name each serial once")
    return names


@dataclass(frozen=True)
class PhoneOptions:
    """The phone options a command was given (None: not given, the phone's default); `local` ignores them."""

    cores: str | None = None
    """--cores: all, big, little, prime or CPU numbers ('4-7')."""
    target_processor: str | None = None
    """--processor's first part: 'cpu' or a ggml device name such as 'GPUOpenCL'."""
    drafter_processor: str | None = None
    """--processor's second part (the first when it has one)."""
    cooldown_max_s: float | None = None
    """--cooldown-max: longest cool-down wait between jobs, seconds."""
    cooldown_temp_c: float | None = None
    """--cooldown-temp: wait between jobs until every thermal zone is below this, °C."""
    job_timeout_s: float | None = None
    """--job-timeout: kill a runner job after this many seconds."""


def check_output_path(path: Path | None) -> None:
    """Refuse an output file whose directory does not exist or cannot be written, or that is a
    directory, before any work starts."""
    from specbench.schemas.fileio import check_writable

    if path is not None and not path.parent.exists():
        raise SpecbenchError(f"{path}: directory {path.parent} does not exist")
    if path is not None and path.is_dir():
        raise SpecbenchError(f"{path}: is a directory, expected a file path")
    if path is not None:
        check_writable(path.parent, f"output {path.name}")


def check_output_dir(path: Path | None) -> None:
    """Refuse an output directory whose parent does not exist, or that is a file, or that cannot
    be written, before any work starts."""
    if path is not None and not path.parent.exists():
        raise SpecbenchError(f"{path}: directory {path.parent} does not exist")
    check_results_dir(path)


def check_results_dir(path: Path | None) -> None:
    """Refuse an output directory that is a file, or whose nearest existing directory (itself, or
    the one it will be made in) cannot be written, before any work starts."""
    from specbench.schemas.fileio import check_writable

    if path is None:
        return
    if path.exists() and not path.is_dir():
        raise SpecbenchError(f"{path}: is a file, expected a directory")
    existing = next(p for p in (path, *path.parents) if p.exists())
    if not existing.is_dir():
        raise SpecbenchError(f"{path}: {existing} is a file, expected a directory")
    check_writable(existing, f"output {path.name}")
