"""Audio for windows: read a span, convert it to 16 kHz mono PCM, and hash it.

Conversion is recorded, never silent: the source rate and channel count, the downmix
(mean of the channels) and the resampler (scipy's polyphase `resample_poly` with its
default Kaiser window, `up/down` reduced by their gcd). The window hash is taken over the
converted samples as 16-bit PCM, so it does not depend on float rounding details.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from math import gcd
from pathlib import Path
from typing import Any

import numpy as np

from specbench.errors import SpecbenchError
from specbench.extras import require

SAMPLE_RATE = 16000
RESAMPLER = "scipy.signal.resample_poly (polyphase FIR, Kaiser window beta=5.0)"


@dataclass(frozen=True)
class Conversion:
    """How a span was turned into 16 kHz mono."""

    source_rate: int
    source_channels: int
    resampled: bool
    downmixed: bool
    up: int = 1
    down: int = 1

    def to_dict(self) -> dict:
        doc: dict[str, Any] = {"source_rate": self.source_rate, "source_channels": self.source_channels,
               "resampled": self.resampled, "downmixed": self.downmixed}
        if self.resampled:
            doc.update(resampler=RESAMPLER, up=self.up, down=self.down)
        if self.downmixed:
            doc["downmix"] = "mean of channels"
        return doc


def read_span(path: Path, offset_s: float = 0.0, duration_s: float | None = None) -> tuple[np.ndarray, int]:
    """(float32 samples [frames, channels], sample rate) of a span of an audio file."""
    soundfile = require("soundfile", "audio", "reading audio")

    path = Path(path)
    if not path.exists():
        raise SpecbenchError(f"{path}: audio file not found")
    try:
        info = soundfile.info(str(path))
        start = int(round(offset_s * info.samplerate))
        frames = -1 if duration_s is None else int(round(duration_s * info.samplerate))
        if start > info.frames:
            raise SpecbenchError(f"{path}: offset {offset_s:g} s is past the end ({info.frames / info.samplerate:g} s)")
        data, rate = soundfile.read(str(path), start=start, frames=frames, dtype="float32", always_2d=True)
    except SpecbenchError:
        raise
    except Exception as exc:  # soundfile raises RuntimeError/LibsndfileError with the reason
        raise SpecbenchError(f"{path}: cannot read audio ({exc})") from None
    if data.shape[0] == 0:
        raise SpecbenchError(f"{path}: the span at {offset_s:g} s holds no samples")
    return data, int(rate)


def to_16k_mono(data: np.ndarray, rate: int) -> tuple[np.ndarray, Conversion]:
    """Downmix (mean of channels) and resample (polyphase) to 16 kHz mono float32."""
    channels = data.shape[1]
    mono = data.mean(axis=1) if channels > 1 else data[:, 0]
    if rate == SAMPLE_RATE:
        return mono.astype(np.float32), Conversion(rate, channels, False, channels > 1)
    from scipy.signal import resample_poly

    divisor = gcd(SAMPLE_RATE, rate)
    up, down = SAMPLE_RATE // divisor, rate // divisor
    resampled = resample_poly(mono.astype(np.float64), up, down).astype(np.float32)
    return resampled, Conversion(rate, channels, True, channels > 1, up, down)


def pcm16(samples: np.ndarray) -> bytes:
    """Little-endian 16-bit PCM of float samples in [-1, 1] (clipped)."""
    return (np.clip(np.round(samples * 32767.0), -32768, 32767).astype("<i2")).tobytes()


def audio_window_sha256(samples: np.ndarray, instruction: str, template: str, cap: int) -> str:
    """Identity of an audio window: the 16 kHz mono PCM and the prompt."""
    digest = hashlib.sha256()
    digest.update(b"specbench-audio-window-v1\0")
    digest.update(json.dumps({"instruction": instruction, "template": template, "cap": cap,
                              "sample_rate": SAMPLE_RATE}, sort_keys=True).encode())
    digest.update(pcm16(samples))
    return digest.hexdigest()


def load_window_audio(path: Path, offset_s: float, duration_s: float | None) -> tuple[np.ndarray, Conversion]:
    """The 16 kHz mono samples a window's input view stands for."""
    data, rate = read_span(path, offset_s, duration_s)
    return to_16k_mono(data, rate)
