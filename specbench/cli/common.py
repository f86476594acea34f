"""Options and helpers shared by several commands."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import click

from specbench.core.methods.configs import REGISTRY, MethodConfig, TargetConfig, parse_method_specs
from specbench.errors import SpecbenchError

existing_file = click.Path(exists=True, dir_okay=False, path_type=Path)
existing_dir = click.Path(exists=True, file_okay=False, path_type=Path)


DEFAULT_METHODS = tuple(REGISTRY)
"""With neither --methods nor --method, every method runs with its defaults."""
RESULTS = Path("results")
"""The default root of what `run`, `select-budget` and `demo` write (git-ignored in a checkout)."""


def method_options(func):
    func = click.option("--method", "method_specs", multiple=True, metavar="SPEC",
                        help="A configured method, e.g. 'sd:W=5..8,drafter=small' or 'as2d:B=1..15'. Repeatable.")(func)
    func = click.option("--methods", "method_names", default=None,
                        help=f"Comma-separated methods with default settings ({', '.join(sorted(REGISTRY))}). "
                             f"Default: {','.join(DEFAULT_METHODS)} (--native: those the runner decodes), "
                             "none when --method is given.")(func)
    return func


TEMPLATE_HELP = ("A model's chat template, NAME=TEMPLATE: NAME a --drafter name or target, TEMPLATE a llama.cpp "
                 "built-in (gemma, chatml, llama3, ...) or 'model' (its GGUF's own). Repeatable. Per model: this, "
                 "else the windows' template when it names one, else the one stored in the GGUF.")


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
