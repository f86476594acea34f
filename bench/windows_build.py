"""How fast are windows built from a LibriSpeech-layout directory?

Synthesizes a small LibriSpeech-layout tree with espeak-ng and sox (16 kHz flac, as
LibriSpeech ships, plus a 44.1 kHz stereo copy), then times, in the same run:

* baseline: reading every file alone (soundfile.read);
* building windows (read + downmix/resample + hash) from the 16 kHz tree;
* the same from the 44.1 kHz stereo tree (the polyphase resampler and downmix at work).

Prints windows per second and each cost as a ratio of reading alone.

    python bench/windows_build.py [--utterances 60] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from specbench.world.datasets import build_windows, read_librispeech

WORDS = "the quick brown fox jumps over a lazy dog while seven bright stars shine above quiet hills".split()


def synthesize(root: Path, count: int, rate: int, channels: int) -> Path:
    chapter = root / "19" / "198"
    chapter.mkdir(parents=True)
    lines = []
    for i in range(count):
        text = " ".join(WORDS[(i + k) % len(WORDS)] for k in range(8 + i % 7))
        utt = f"19-198-{i:04d}"
        raw = chapter / f"{utt}.raw.wav"
        subprocess.run(["espeak-ng", "-w", str(raw), text], check=True, capture_output=True)
        subprocess.run(["sox", str(raw), "-r", str(rate), "-c", str(channels), str(chapter / f"{utt}.flac")],
                       check=True, capture_output=True)
        raw.unlink()
        lines.append(f"{utt} {text.upper()}\n")
    (chapter / "19-198.trans.txt").write_text("".join(lines))
    return root


def best_of(repeat: int, work) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--utterances", type=int, default=60)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    import soundfile

    with tempfile.TemporaryDirectory() as tmp:
        native = synthesize(Path(tmp) / "16k", args.utterances, 16000, 1)
        converted = synthesize(Path(tmp) / "44k", args.utterances, 44100, 2)
        files = sorted(native.rglob("*.flac"))
        seconds = sum(soundfile.info(str(f)).duration for f in files)

        def read_all(paths):
            return lambda: [soundfile.read(str(p), dtype="float32", always_2d=True) for p in paths]

        def build(root):
            return lambda: build_windows(read_librispeech(root), "bench", "Transcribe the audio.", "chatml",
                                         448, 30.0, 0, 0.2)

        read_s = best_of(args.repeat, read_all(files))
        read_44k_s = best_of(args.repeat, read_all(sorted(converted.rglob("*.flac"))))
        build_s = best_of(args.repeat, build(native))
        convert_s = best_of(args.repeat, build(converted))
    n = len(files)
    print(f"{n} utterances, {seconds:.1f} s of speech; best of {args.repeat}")
    print(f"baseline: reading alone      {read_s:.3f} s  ({n / read_s:,.0f} files/s)")
    print(f"windows from 16 kHz flac     {build_s:.3f} s  ({n / build_s:,.0f} windows/s)  = {build_s / read_s:.2f}x reading")
    print(f"baseline: reading 44.1 kHz stereo alone {read_44k_s:.3f} s")
    print(f"windows from 44.1 kHz stereo {convert_s:.3f} s  ({n / convert_s:,.0f} windows/s)  = "
          f"{convert_s / read_44k_s:.2f}x reading the same files (resampler + downmix + hash)")


if __name__ == "__main__":
    main()
