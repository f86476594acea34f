"""Speech synthesized with espeak-ng and sox (installed by the project's setup), for small speech sets."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SENTENCES = {
    "1089-134686-0000": "he hoped there would be stew for dinner",
    "1089-134686-0001": "turnips and carrots and bruised potatoes",
    "1089-134686-0002": "after early nightfall the yellow lamps would light up",
}


def need_tools() -> None:
    missing = [tool for tool in ("espeak-ng", "sox") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (the Makefile's `deps` target installs them)")


def speak(text: str, out: Path, rate: int = 16000, channels: int = 1) -> Path:
    """Speech for `text` at `rate` Hz with `channels` channels, in the format of `out`'s suffix."""
    need_tools()
    out.parent.mkdir(parents=True, exist_ok=True)
    raw = out.with_suffix(".espeak.wav")
    subprocess.run(["espeak-ng", "-w", str(raw), text], check=True, capture_output=True)
    subprocess.run(["sox", str(raw), "-r", str(rate), "-c", str(channels), str(out)], check=True, capture_output=True)
    raw.unlink()
    return out
