"""Optional extras: the parts a user may not need, and one message when one is missing.

pyproject.toml declares them: `adb` (adbutils: phones, the emulated phone), `audio`
(soundfile: reading audio files for windows), `plots` (matplotlib: report figures), and
`all`; `ray` (`trace --ray`; not in `all`: a cluster engine few users need) and `hf`
(`datasets`: `windows --layout hf`, Hugging Face datasets saved to disk; not in `all`: a large
library only users who keep their corpora that way need). Every
import of those libraries goes through `require`, so a missing one is a SpecbenchError the
CLI prints as one line.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from specbench.errors import SpecbenchError

EXTRAS = {"adb": ("adbutils",), "audio": ("soundfile",), "plots": ("matplotlib",), "ray": ("ray",),
          "hf": ("datasets",)}
"""Extra name -> the modules it provides (pyproject.toml's [project.optional-dependencies])."""


def require(module: str, extra: str, what: str) -> ModuleType:
    """`module`, imported; if it cannot be, a SpecbenchError saying that `what` needs `extra`."""
    if module.partition(".")[0] not in EXTRAS.get(extra, ()):
        raise ValueError(f"{module} is not part of the '{extra}' extra")  # a programming error, not the user's
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        # a dependency of the module missing (not the module itself) is a broken install: say which
        cause = "" if exc.name in (module, module.partition(".")[0]) else f" ({exc})"
        raise SpecbenchError(f"{what} needs the '{extra}' extra: pip install 'specbench[{extra}]'{cause}") from None
