"""The speech set: recorded clips with their transcripts from two PyPI source distributions, and
sentences spoken by espeak-ng (synthetic, labelled so), as audio windows for the Whisper pairs.

Recorded clips (RECORDED) come out of sdists fetched and sha256-checked by the build module's
`fetch_sdist` (the pinned whisper.cpp sdist the whisper.cpp build uses, and pocketsphinx's), and each
clip is checked against its own pinned sha256 before it is cached. A headerless 16 kHz 16-bit mono
clip (`goforward.raw`) is wrapped in a WAV header, samples untouched. Synthetic clips (SYNTHETIC) are
spoken by the installed espeak-ng on first use; their bytes depend on espeak-ng's version (recorded in
the set's record), so they are not pinned: the windows' sha256 (over the 16 kHz PCM) names them.

`speech_windows()` builds `<cache>/speech/windows.jsonl` once (task "Transcribe the audio.", each model's
own template, cap CAP tokens, dev/test by the seeded hash of the window id) and re-checks the recorded
clips on later calls. docs/SPEECH.md lists every clip with its source and licence.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import wave
from dataclasses import dataclass
from pathlib import Path

from specbench.errors import SpecbenchError
from specbench.schemas.fileio import file_sha256, write_atomic
from specbench.world.build import WHISPER_SDIST, Sdist, fetch_sdist
from specbench.world.dirs import cache_dir

POCKETSPHINX_SDIST = Sdist(
    # CMU's BSD-style licence (the sdist's LICENSE); test/data holds recorded speech with transcripts.
    name="pocketsphinx", version="5.1.1",
    sha256="675778b309a22dfc9b7d37f7621976bba491d2a5f8c59696bd77fd6d07271355", size_mb=34.2,
    prefix="pocketsphinx-5.1.1/test/data/", label="pocketsphinx", no_binary="pocketsphinx")

INSTRUCTION = "Transcribe the audio."
CAP = 96
"""max_new_tokens of a speech window: the longest reference (jfk.wav) is 24 words, under 40 Whisper tokens."""
SEED = 0
"""Seed of the dev/test split."""
DEV_FRACTION = 0.25
RECIPE = 1
"""Version of the set (clips, references, windows' fields); a cached set of another recipe is rebuilt."""


@dataclass(frozen=True)
class RecordedClip:
    """A recording with its transcript, taken from a source distribution."""

    clip_id: str
    """The window id."""
    sdist: Sdist
    """The source distribution holding it."""
    member: str
    """Its path inside the sdist."""
    sha256: str
    """Expected sha256 of the member's bytes."""
    reference: str
    """The transcript, as the package gives it."""
    dataset: str
    """The window's dataset: which recording session it belongs to."""
    raw_s16_16k: bool = False
    """A headerless 16 kHz 16-bit mono file (wrapped in a WAV header when cached)."""


@dataclass(frozen=True)
class SyntheticClip:
    """A sentence spoken by espeak-ng (default voice, en-us)."""

    clip_id: str
    """The window id."""
    text: str
    """What is spoken, and the reference."""


_PS = "pocketsphinx-5.1.1/test/data/"
_LIBRIVOX = "librivox/sense_and_sensibility_01_austen_64kb-"
_WSP = "pywhispercpp-1.5.1/whisper.cpp/"

RECORDED: tuple[RecordedClip, ...] = (
    # whisper.cpp's sample: J. F. Kennedy's 1961 inaugural address, 11.0 s; reference from whisper.cpp's own tests.
    RecordedClip("jfk", WHISPER_SDIST, _WSP + "samples/jfk.wav",
                 "59dfb9a4acb36fe2a2affc14bacbee2920ff435cb13cc314a08c13f66ba7860e",
                 "And so my fellow Americans, ask not what your country can do for you, ask what you can do for your "
                 "country.", "jfk-1961"),
    # LibriVox's public-domain reading of Sense and Sensibility, chapter 1 (transcripts: the .txt beside each).
    RecordedClip("librivox-0870", POCKETSPHINX_SDIST, _PS + _LIBRIVOX + "0870.wav",
                 "b0557cf95c974d930577e58e46b7f068c432a6e3afcc286563d88922b2a5315c",
                 "and mister john dashwood had then leisure to consider how much there might be prudently in his "
                 "power to do for them", "librivox-sense-and-sensibility"),
    RecordedClip("librivox-0880", POCKETSPHINX_SDIST, _PS + _LIBRIVOX + "0880.wav",
                 "fbec491ef00ee734a67f0ee318e98c51c157b479e1629ff4f4426861ecac0414",
                 "he was not an ill disposed young man", "librivox-sense-and-sensibility"),
    RecordedClip("librivox-0890", POCKETSPHINX_SDIST, _PS + _LIBRIVOX + "0890.wav",
                 "5793ffbdee55fb8bfd284943a6866864c832d9d4accf2661cabd39915c84ee10",
                 "unless to be rather cold hearted and rather selfish is to be ill disposed",
                 "librivox-sense-and-sensibility"),
    # verbatim: the reader says "a more a amiable"
    RecordedClip("librivox-0920", POCKETSPHINX_SDIST, _PS + _LIBRIVOX + "0920.wav",
                 "40882414ef4cc51f3ff7a63bad0c8c87e7f595ffeb8209fbf756c8ebc5c28a59",
                 "had he married a more a amiable woman he might have been made still more respectable than he was",
                 "librivox-sense-and-sensibility"),
    RecordedClip("librivox-0930", POCKETSPHINX_SDIST, _PS + _LIBRIVOX + "0930.wav",
                 "954adbf0b56ac8a148cbe77b39ca18d76b5f2a1e1f405565bd786ce3e68a68b7",
                 "he might even have been made amiable himself", "librivox-sense-and-sensibility"),
    # CMU's playing-card utterances (cards.transcription).
    RecordedClip("cards-001", POCKETSPHINX_SDIST, _PS + "cards/001.wav",
                 "899951e768666f27c8f8b1d4090b96fe7909cae9cec01bec0a5d5d1b8a8d566e", "ten of clubs", "cmu-cards"),
    RecordedClip("cards-002", POCKETSPHINX_SDIST, _PS + "cards/002.wav",
                 "a3f9eae6fdb69a1231989e39a14d62388a6f52fb59666c76d95005318fadafec", "four queen of clubs",
                 "cmu-cards"),
    RecordedClip("cards-003", POCKETSPHINX_SDIST, _PS + "cards/003.wav",
                 "00d283e46bc257ae479e4aa86593cadb541656eba1d19fc8abeece37f6a5a18b", "seven of clubs", "cmu-cards"),
    RecordedClip("cards-004", POCKETSPHINX_SDIST, _PS + "cards/004.wav",
                 "4c44a8177f5b128b99f078cdeb918119933155574231f1833e8840d1af09c521", "five five", "cmu-cards"),
    RecordedClip("cards-005", POCKETSPHINX_SDIST, _PS + "cards/005.wav",
                 "090f18f5f76cf8b2b43cd9e6b07823f4685a4742d9a36cd98b174a6586c18cf9",
                 "eight of spades four of clubs seven of hearts", "cmu-cards"),
    # CMU's goforward.raw: the utterance pocketsphinx's unit tests decode to this text.
    RecordedClip("goforward", POCKETSPHINX_SDIST, _PS + "goforward.raw",
                 "f15c60ec54059d8b66e410d0064945a0b0a04ea56e1ddca1958e493c0cf70e71", "go forward ten meters",
                 "cmu-goforward", raw_s16_16k=True),
)

SYNTHETIC: tuple[SyntheticClip, ...] = tuple(SyntheticClip(f"espeak-{i:02d}", text) for i, text in enumerate((
    "he hoped there would be stew for dinner",
    "turnips and carrots and bruised potatoes and fat mutton pieces",
    "after early nightfall the yellow lamps would light up here and there",
    "the birch canoe slid on the smooth planks",
    "glue the sheet to the dark blue background",
    "it is easy to tell the depth of a well",
    "these days a chicken leg is a rare dish",
    "rice is often served in round bowls",
    "the juice of lemons makes fine punch",
    "the box was thrown beside the parked truck",
    "four hours of steady work faced us",
    "a large size in stockings is hard to sell",
    "the boy was there when the sun rose",
    "a rod is used to catch pink salmon",
), start=1))
"""Harvard sentences and lines of LibriSpeech's test-clean, spoken by espeak-ng: synthetic speech (dataset
'espeak-ng-synthetic')."""

SYNTHETIC_DATASET = "espeak-ng-synthetic"


def speech_dir(cache: Path | None = None) -> Path:
    return (cache or cache_dir()) / "speech"


def speech_windows(*, download: bool = True, cache: Path | None = None) -> Path:
    """The speech set's windows.jsonl, built on first use (sdists fetched, clips checked and extracted,
    synthetic clips spoken); later calls re-check the recorded clips' sha256."""
    root = speech_dir(cache)
    windows, record = root / "windows.jsonl", root / "windows.record.json"
    if windows.exists() and (problem := _problem(root, record)) is None:
        return windows
    if not download:
        state = f"stale ({problem})" if windows.exists() else "not in the cache"
        raise SpecbenchError(f"the speech set is {state} ({windows})",
                             hint="call speech_windows() with download=True, or run `make demo-model`")
    _build(root, cache or cache_dir())
    return windows


def _problem(root: Path, record: Path) -> str | None:
    try:
        rec = json.loads(record.read_text())
    except (OSError, ValueError):
        return "no readable record"
    if not isinstance(rec, dict) or rec.get("recipe") != RECIPE:
        return "made by another recipe"
    for clip in RECORDED:
        path = root / "clips" / f"{clip.clip_id}.wav"
        if not path.exists():
            return f"{path.name} is missing"
        if file_sha256(path) != rec.get("clips", {}).get(clip.clip_id):
            return f"{path.name} no longer has the sha256 recorded when it was made"
    for synth in SYNTHETIC:
        if not (root / "clips" / f"{synth.clip_id}.wav").exists():
            return f"{synth.clip_id}.wav is missing"
    return None


def _extract(clip: RecordedClip, tar: tarfile.TarFile, sdist: Path, out: Path) -> None:
    member = tar.extractfile(clip.member)
    if member is None:
        raise SpecbenchError(f"{sdist}: {clip.member} is not a regular file", hint="delete the sdist and run again")
    data = member.read()
    if (got := hashlib.sha256(data).hexdigest()) != clip.sha256:
        raise SpecbenchError(f"{sdist}: {clip.member}: sha256 {got} != expected {clip.sha256}",
                             hint="the package index served a different file; nothing was cached")
    tmp = out.with_name(f".{out.name}.tmp")
    if clip.raw_s16_16k:
        with wave.open(str(tmp), "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(16000)
            w.writeframes(data)
    else:
        tmp.write_bytes(data)
    tmp.replace(out)


def espeak_version() -> str:
    if shutil.which("espeak-ng") is None:
        raise SpecbenchError("espeak-ng not found on PATH (it speaks the speech set's synthetic clips)",
                             hint="apt-get install espeak-ng (the Makefile's `deps` target)")
    return subprocess.run(["espeak-ng", "--version"], capture_output=True, text=True, check=True).stdout.strip()


def _build(root: Path, cache: Path) -> None:
    from specbench.schemas.windows import save_windows
    from specbench.world.datasets import Utterance, build_windows

    version = espeak_version()
    clips = root / "clips"
    clips.mkdir(parents=True, exist_ok=True)
    print(f"specbench: making the speech set in {root} ({len(RECORDED)} recorded clips, {len(SYNTHETIC)} spoken "
          "by espeak-ng)", file=sys.stderr)
    sdists = {clip.sdist for clip in RECORDED}
    for spec in sorted(sdists, key=lambda s: s.name):
        path = fetch_sdist(cache, lambda msg: print(f"specbench: {msg}", file=sys.stderr), spec)
        with tarfile.open(path, "r:gz") as tar:
            for clip in RECORDED:
                if clip.sdist == spec:
                    _extract(clip, tar, path, clips / f"{clip.clip_id}.wav")
    for synth in SYNTHETIC:
        out = clips / f"{synth.clip_id}.wav"
        tmp = out.with_name(f".{out.name}.tmp")
        done = subprocess.run(["espeak-ng", "-v", "en-us", "-w", str(tmp), synth.text], capture_output=True, text=True)
        if done.returncode != 0:
            raise SpecbenchError(f"espeak-ng could not speak {synth.clip_id}: {done.stderr.strip()[-200:]}")
        tmp.replace(out)
    utterances = [Utterance(c.clip_id, clips / f"{c.clip_id}.wav", 0.0, None, c.reference, c.member)
                  for c in RECORDED]
    utterances += [Utterance(s.clip_id, clips / f"{s.clip_id}.wav", 0.0, None, s.text, s.clip_id) for s in SYNTHETIC]
    datasets = {c.clip_id: c.dataset for c in RECORDED} | {s.clip_id: SYNTHETIC_DATASET for s in SYNTHETIC}
    windows = build_windows(iter(utterances), "speech", INSTRUCTION, "model", CAP, None, SEED, DEV_FRACTION)
    windows = [dataclasses.replace(w, dataset=datasets[w.window_id]) for w in windows]
    save_windows(root / "windows.jsonl", windows)
    write_atomic(root / "windows.record.json", json.dumps(
        {"recipe": RECIPE, "espeak_ng": version, "clips": {c.clip_id: file_sha256(clips / f"{c.clip_id}.wav")
                                                           for c in RECORDED}}, indent=1) + "\n")
