"""Where specbench keeps files outside a results directory: the cache, the per-user runners,
and (when running from one) the source checkout.

The cache (demo models, the llama.cpp sdist and source, runner builds, audio samples) is
`$SPECBENCH_CACHE`, else platformdirs' user cache dir (on Linux `$XDG_CACHE_HOME/specbench`,
default `~/.cache/specbench`). Runners that `specbench build-runner` installs go to the user
data dir (`$XDG_DATA_HOME/specbench/runners/<abi>/`, default `~/.local/share/specbench/...`).
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP = "specbench"
CACHE_ENV = "SPECBENCH_CACHE"


def cache_dir() -> Path:
    """The specbench cache: `$SPECBENCH_CACHE`, else the user cache dir (`~/.cache/specbench` on Linux)."""
    return Path(os.environ.get(CACHE_ENV) or platformdirs.user_cache_dir(APP))


def user_runners_dir() -> Path:
    """runners/ in the user data dir: where `specbench build-runner` installs (<abi>/specbench-runner)."""
    return Path(platformdirs.user_data_dir(APP)) / "runners"


def checkout_root() -> Path | None:
    """The source checkout this package runs from, or None when it is installed (site-packages)."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "pyproject.toml").is_file() and (root / "scripts" / "build-runner").is_file() else None
