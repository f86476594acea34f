"""Build the native specbench-runner on llama.cpp and install it under <runners>/<abi>/.

llama.cpp comes from the llama-cpp-python sdist on PyPI (the only reachable source),
checked against a pinned sha256. The runner's own sources ship inside the package
(specbench/native/), so an installed specbench builds as a checkout does. The compiled
libraries are cached in the specbench cache (specbench.world.dirs), keyed by llama.cpp
commit + CMake flags, so a second build is a no-op in seconds and a fresh clone or install
reuses the objects of an earlier one. It imports no more of specbench than errors, file
hashing and the dirs helper, so `scripts/build-runner` starts fast.

`specbench build-runner` installs into the user data dir; `scripts/build-runner` (and
`python -m specbench.world.build`) into a checkout's runners/ when run from one.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench.errors import SpecbenchError
from specbench.schemas.fileio import file_sha256
from specbench.world.dirs import cache_dir, checkout_root, user_runners_dir


@dataclass(frozen=True)
class Sdist:
    """A PyPI source distribution that carries a C++ tree the build compiles."""

    name: str
    """PyPI name, e.g. `llama-cpp-python`."""
    version: str
    """Pinned version."""
    sha256: str
    """Expected sha256 of the `.tar.gz`."""
    size_mb: float
    """Approximate size, for progress messages."""
    prefix: str
    """The tree inside the archive, with its trailing slash (extracted alone)."""
    label: str
    """What the tree is, e.g. `llama.cpp`: names the extracted directory."""
    head: str | None = None
    """A git HEAD file inside the archive naming the tree's commit (None: the tree is identified by `version`)."""
    no_binary: str = ":all:"
    """pip's `--no-binary` for the download (`:all:` also builds the sdist's build dependencies from source)."""

    @property
    def file(self) -> str:
        return f"{self.name.replace('-', '_')}-{self.version}.tar.gz"


LLAMA_SDIST = Sdist(
    name="llama-cpp-python", version="0.3.36",
    sha256="832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e", size_mb=76.6,
    prefix="llama_cpp_python-0.3.36/vendor/llama.cpp/", label="llama.cpp",
    # The sdist keeps the submodule's git metadata; its HEAD names the llama.cpp commit.
    head="llama_cpp_python-0.3.36/.git/modules/vendor/llama.cpp/HEAD")
WHISPER_SDIST = Sdist(
    # whisper.cpp 1.8.5 with its own ggml 0.13.1, samples/jfk.wav and models/convert-*.py.
    name="pywhispercpp", version="1.5.1",
    sha256="5df897e5dd9d9f16804fc937bd85b9f5880a0b29a55f8843585e0e03d76195e5", size_mb=9.8,
    prefix="pywhispercpp-1.5.1/whisper.cpp/", label="whisper.cpp", no_binary="pywhispercpp")
WHISPER_VERSION = "1.8.5"
"""The whisper.cpp release inside WHISPER_SDIST."""
WHISPER_TOOLS = ("whisper-cli", "whisper-quantize", "specbench-whisper-check")
"""whisper.cpp's reference greedy decoder, its quantizer (a cross-check of specbench's own), and specbench's
check of batched verification on the patched library (specbench/native/whisper/)."""
WHISPER_NATIVE = Path(__file__).resolve().parents[1] / "native" / "whisper"
"""The CMake project around whisper.cpp: its tools plus specbench's own, shipped as package data."""


@dataclass(frozen=True)
class SourceEdit:
    """One change to the vendored whisper.cpp, applied after extraction (its anchor must occur exactly once)."""

    file: str
    """Path in the tree."""
    anchor: str
    """Text the insertion follows."""
    insert: str
    """Text inserted after the anchor."""


# Batched verification needs every row's logits of one forward; whisper_decode_with_state copies out only the
# last row (whisper_batch_prep_legacy flags it alone). An added call flags every row; whisper_full and every
# existing call are unchanged.
WHISPER_EDITS = (
    SourceEdit("include/whisper.h", """    WHISPER_API int whisper_decode_with_state(
            struct whisper_context * ctx,
              struct whisper_state * state,
               const whisper_token * tokens,
                               int   n_tokens,
                               int   n_past,
                               int   n_threads);
""", """
    // specbench: as whisper_decode_with_state, but the logits of every row are kept: row i (the prediction after
    // tokens[i]) at whisper_get_logits_from_state(state) + i*n_vocab.
    WHISPER_API int whisper_decode_all_logits_with_state(
            struct whisper_context * ctx,
              struct whisper_state * state,
               const whisper_token * tokens,
                               int   n_tokens,
                               int   n_past,
                               int   n_threads);
"""),
    SourceEdit("src/whisper.cpp", "    return whisper_decode_with_state(ctx, ctx->state, tokens, n_tokens, n_past, "
               "n_threads);\n}\n", """
int whisper_decode_all_logits_with_state(struct whisper_context * ctx, struct whisper_state * state,
                                         const whisper_token * tokens, int n_tokens, int n_past, int n_threads) {
    whisper_batch_prep_legacy(state->batch, tokens, n_tokens, n_past, 0);
    for (int i = 0; i < n_tokens; ++i) {
        state->batch.logits[i] = 1;
    }

    whisper_kv_cache_seq_rm(state->kv_self, 0, n_past, -1);

    if (!whisper_decode_internal(*ctx, *state, state->batch, n_threads, false, nullptr, nullptr)) {
        WHISPER_LOG_ERROR("%s: failed to eval\\n", __func__);
        return 1;
    }

    return 0;
}
"""),
)


def whisper_edits_sha256() -> str:
    """The identity of WHISPER_EDITS: part of the build key and the manifest."""
    return hashlib.sha256(json.dumps([dataclasses.astuple(e) for e in WHISPER_EDITS]).encode()).hexdigest()
WHISPER_FLAGS = ["-DWHISPER_BUILD_EXAMPLES=ON", "-DWHISPER_BUILD_TESTS=OFF", "-DWHISPER_BUILD_SERVER=OFF",
                 "-DWHISPER_SDL2=OFF", "-DWHISPER_CURL=OFF", "-DWHISPER_FFMPEG=OFF"]

NATIVE = Path(__file__).resolve().parents[1] / "native"
"""The runner's CMake project, shipped as package data."""
TARGET = "specbench-runner"

# AVX2 baseline: GGML_NATIVE=ON crashes in these sandboxes (AMX advertised, not granted).
X86_BASELINE = ["-DGGML_NATIVE=OFF", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON"]
COMMON = ["-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF"]
ANDROID = [
    "-DANDROID_ABI=arm64-v8a",
    "-DANDROID_PLATFORM=android-28",
    "-DANDROID_STL=c++_static",
    "-DGGML_NATIVE=OFF",
    "-DGGML_OPENMP=OFF",
    "-DGGML_LLAMAFILE=OFF",
]
# Debian's gcc-aarch64-linux-gnu; the static binary runs under qemu-aarch64 and from adb shell.
AARCH64_LINUX = [
    "-DCMAKE_SYSTEM_NAME=Linux",
    "-DCMAKE_SYSTEM_PROCESSOR=aarch64",
    "-DCMAKE_C_COMPILER=aarch64-linux-gnu-gcc",
    "-DCMAKE_CXX_COMPILER=aarch64-linux-gnu-g++",
    "-DGGML_NATIVE=OFF",
    "-DGGML_OPENMP=OFF",
    "-DSPECBENCH_FULLY_STATIC=ON",
]
OPENCL = ["-DGGML_OPENCL=ON", "-DGGML_OPENCL_EMBED_KERNELS=ON", "-DGGML_OPENCL_USE_ADRENO_KERNELS=ON"]
DEFAULT_ARM_ARCH = "armv8.2-a+dotprod+fp16"

Log = Callable[[str], None]


class BuildError(SpecbenchError):
    """A build problem with a clear fix (message + hint)."""


@dataclass(frozen=True)
class BuildRequest:
    """What to build: the host's baseline unless one of native, android, aarch64_linux."""

    native: bool = False
    """GGML_NATIVE=ON: tuned for the building CPU (not for sandboxes: AMX)."""
    android: bool = False
    """Cross-build for arm64 Android with the NDK (`ndk`, else $ANDROID_NDK / $ANDROID_NDK_HOME)."""
    aarch64_linux: bool = False
    """Cross-build a static aarch64 Linux binary with Debian's cross gcc."""
    ndk: str | None = None
    """The Android NDK's root directory."""
    arm_arch: str = DEFAULT_ARM_ARCH
    """GGML_CPU_ARM_ARCH for the arm builds."""
    opencl: bool = False
    """With android: the OpenCL backend for Adreno GPUs."""
    no_mtmd: bool = False
    """Do not link libmtmd (no audio path; faster build)."""
    jobs: int = 2
    """Parallel compile jobs."""

    def ndk_root(self) -> str | None:
        return self.ndk or os.environ.get("ANDROID_NDK") or os.environ.get("ANDROID_NDK_HOME") or None


def default_dest() -> Path:
    """Where a build installs unless told: a checkout's runners/ when running from one, else the user's."""
    root = checkout_root()
    return root / "runners" if root else user_runners_dir()


def stderr_log(msg: str) -> None:
    print(f"build-runner: {msg}", file=sys.stderr, flush=True)


def build_key(commit: str, flags: list[str]) -> str:
    """The cache key of a build: one build directory per llama.cpp commit and CMake flags."""
    return hashlib.sha256(json.dumps([commit, flags]).encode()).hexdigest()[:12]


def fetch_sdist(cache: Path, log: Log = stderr_log, source: Sdist = LLAMA_SDIST) -> Path:
    """The source distribution `source`, downloaded once through pip and always sha256-checked."""
    sdist_dir = cache / "sdist"
    path = sdist_dir / source.file
    spec = f"{source.name}=={source.version}"
    if not path.exists():
        sdist_dir.mkdir(parents=True, exist_ok=True)
        log(f"downloading {spec} sdist ({source.size_mb} MB) with pip")
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", source.no_binary,
               spec, "-d", str(sdist_dir)]
        if subprocess.run(cmd, stdout=sys.stderr).returncode != 0 or not path.exists():
            raise BuildError(f"pip could not download {spec}",
                             "check that the package index is reachable (pip config list)")
    got = file_sha256(path)
    if got != source.sha256:
        raise BuildError(f"{path}: sha256 {got} != expected {source.sha256}",
                         f"delete {path} and rerun; if it repeats, the index serves a different file")
    return path


def extract_source(sdist: Path, cache: Path, log: Log = stderr_log, source: Sdist = LLAMA_SDIST) -> tuple[Path, str]:
    """The sdist's tree extracted once (atomically) per sdist hash; returns (dir, identity): the
    commit its git HEAD names, else the sdist's version."""
    dest = cache / "src" / f"{source.label}-{source.version}-{source.sha256[:12]}"
    stamp = dest / ".specbench-commit"
    if stamp.exists():
        return dest, stamp.read_text().strip()
    log(f"extracting {source.prefix} to {dest}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".extract-", dir=dest.parent))
    ident = "unknown" if source.head else source.version
    with tarfile.open(sdist, "r:gz") as tar:
        members = []
        for m in tar:
            if m.name == source.head:
                head = tar.extractfile(m)
                if head is None:
                    raise BuildError(f"{sdist}: {source.head} is not a regular file", "download the sdist again")
                ident = head.read().decode().strip()
            elif m.name.startswith(source.prefix) and not m.name.startswith(source.prefix + ".git"):
                m.name = m.name[len(source.prefix):]
                members.append(m)
        kwargs: dict[str, Any] = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        tar.extractall(tmp, members=members, **kwargs)
    (tmp / ".specbench-commit").write_text(ident + "\n")
    if dest.exists():  # a half-finished earlier extraction without its stamp
        shutil.rmtree(dest)
    tmp.rename(dest)
    return dest, ident


def whisper_source(cache: Path | None = None, log: Log = stderr_log) -> Path:
    """The whisper.cpp 1.8.5 tree of the pinned pywhispercpp sdist with WHISPER_EDITS applied (samples/jfk.wav,
    include/whisper.h, ...); extracted again when it holds other edits."""
    cache = cache or cache_dir()
    sdist = fetch_sdist(cache, log, WHISPER_SDIST)
    with locked(cache / "src" / "whisper.cpp.lock"):
        src = extract_source(sdist, cache, log, WHISPER_SDIST)[0]
        stamp, want = src / ".specbench-edits", whisper_edits_sha256()
        if stamp.exists() and stamp.read_text().strip() == want:
            return src
        if stamp.exists():  # other edits: start again from the sdist
            shutil.rmtree(src)
            src = extract_source(sdist, cache, log, WHISPER_SDIST)[0]
        for edit in WHISPER_EDITS:
            path = src / edit.file
            text = path.read_text()
            if text.count(edit.anchor) != 1:
                raise BuildError(f"{path}: the anchor of specbench's edit occurs {text.count(edit.anchor)} times, "
                                 "expected once", f"delete {src} and run again")
            path.write_text(text.replace(edit.anchor, edit.anchor + edit.insert))
        stamp.write_text(want + "\n")
    return src


def host_abi() -> str:
    """runners/<abi> of this machine: x86_64-linux, aarch64-linux, ..."""
    machine = platform.machine().lower()
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    return f"{machine}-{platform.system().lower()}"


def flag_set(req: BuildRequest) -> tuple[str, list[str]]:
    """(abi, cmake -D flags) for the requested target; the flags key the build cache."""
    flags = list(COMMON)
    if req.android:
        ndk = req.ndk_root() or "$ANDROID_NDK"
        flags += [f"-DCMAKE_TOOLCHAIN_FILE={ndk}/build/cmake/android.toolchain.cmake"] + ANDROID
        flags += [f"-DGGML_CPU_ARM_ARCH={req.arm_arch}"]
        if req.opencl:
            flags += OPENCL
        abi = "arm64-v8a-android" + ("-opencl" if req.opencl else "")
    elif req.aarch64_linux:
        flags += AARCH64_LINUX + [f"-DGGML_CPU_ARM_ARCH={req.arm_arch}"]
        abi = "aarch64-linux"
    elif req.native:
        flags += ["-DGGML_NATIVE=ON"]
        abi = host_abi() + "-native"
    else:
        flags += X86_BASELINE if host_abi().startswith("x86_64") else ["-DGGML_NATIVE=OFF"]
        abi = host_abi()
    flags += [f"-DSPECBENCH_WITH_MTMD={'OFF' if req.no_mtmd else 'ON'}"]
    return abi, flags


def dry_run(req: BuildRequest, whisper: bool = False) -> str:
    """The cmake commands a build would run (whisper: the whisper.cpp tools' build), without running them."""
    if whisper:
        flags = whisper_flags(req)[1]
        flags += ["-DWHISPER_CPP_DIR=<cache>/src/whisper.cpp-…"]
        return (f"cmake -S {WHISPER_NATIVE} -B build " + " ".join(flags)
                + f"\ncmake --build build --target {' '.join(WHISPER_TOOLS)} -j{req.jobs}")
    _, flags = flag_set(req)
    return (f"cmake -S {NATIVE} -B build " + " ".join(flags + ["-DLLAMA_CPP_DIR=<cache>/src/llama.cpp-…",
                                                               "-DWHISPER_CPP_DIR=<cache>/src/whisper.cpp-…"])
            + f"\ncmake --build build --target {TARGET} -j{req.jobs}")


def sync_tree(src: Path, dst: Path) -> None:
    """Mirror the native sources into the cached build's source dir, touching only changed files.

    The CMake source dir must stay the same path for a cached build dir, and unchanged
    files must keep their mtimes so that the build stays a no-op. A changed file gets the
    time of the copy, not its source's: several checkouts share the build dir, and a file
    older than the objects built from another checkout's version would not be rebuilt.
    """
    wanted = set()
    for f in src.rglob("*"):
        if f.is_dir() or "__pycache__" in f.parts:
            continue
        rel = f.relative_to(src)
        wanted.add(rel)
        out = dst / rel
        if not out.exists() or out.read_bytes() != f.read_bytes():
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(f, out)
    for f in list(dst.rglob("*")):
        if f.is_file() and f.relative_to(dst) not in wanted:
            f.unlink()


@contextlib.contextmanager
def locked(path: Path):
    """One build per cache key at a time (two clones or a test run may race)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def run(cmd: list[str], log: Log = stderr_log, **kw) -> None:
    log("$ " + " ".join(cmd))
    if subprocess.run(cmd, stdout=sys.stderr, **kw).returncode != 0:
        raise BuildError(f"command failed: {cmd[0]} {cmd[1] if len(cmd) > 1 else ''}",
                         "see the compiler output above")


def check_tools(req: BuildRequest) -> None:
    """The toolchain the request needs, each missing piece with how to get it."""
    ndk = req.ndk_root()
    if req.android and not ndk:
        raise BuildError("an Android build needs the Android NDK",
                         "set ANDROID_NDK=/path/to/android-ndk-r27 or pass --android-ndk PATH "
                         "(see specbench/native/README.md)")
    if req.android and ndk and not (Path(ndk) / "build" / "cmake" / "android.toolchain.cmake").is_file():
        raise BuildError(f"{ndk} is not an Android NDK (no build/cmake/android.toolchain.cmake)",
                         "pass the NDK's root directory, e.g. ~/Android/Sdk/ndk/27.2.12479018")
    if req.aarch64_linux and shutil.which("aarch64-linux-gnu-g++") is None:
        raise BuildError("--aarch64-linux needs the cross compiler",
                         "apt-get install g++-aarch64-linux-gnu (and qemu-user-static to run it)")
    if shutil.which("cmake") is None:
        raise BuildError("cmake not found on PATH", "install cmake >= 3.16 (apt-get install cmake)")


def build(req: BuildRequest, dest: Path | None = None, cache: Path | None = None, log: Log = stderr_log) -> Path:
    """Build the runner for `req` in the cache and install it as <dest>/<abi>/specbench-runner
    (dest: default_dest()); returns the installed binary."""
    cache = cache or cache_dir()
    abi, flags = flag_set(req)
    check_tools(req)
    llama_dir, commit = extract_source(fetch_sdist(cache, log), cache, log)
    whisper_dir, edits = whisper_source(cache, log), whisper_edits_sha256()
    sources = [f"-DLLAMA_CPP_DIR={llama_dir}", f"-DSPECBENCH_LLAMA_COMMIT={commit}",
               f"-DWHISPER_CPP_DIR={whisper_dir}", f"-DSPECBENCH_WHISPER_VERSION={WHISPER_VERSION}",
               f"-DSPECBENCH_WHISPER_EDITS={edits}"]
    # The key stays (commit, flags): whisper.cpp is one source file of the runner, rebuilt by the build tool
    # when its edits change; the sources' identity is configured into the binary and its manifest.
    bdir = cache / "build" / f"{abi}-{commit[:10]}-{build_key(commit, flags)}"
    with locked(cache / "build" / f"{bdir.name}.lock"):
        sync_tree(NATIVE, bdir / "native")
        if not configured(bdir / "obj" / "CMakeCache.txt", sources):
            gen = ["-G", "Ninja"] if shutil.which("ninja") else []
            run(["cmake", "-S", str(bdir / "native"), "-B", str(bdir / "obj"), *gen, *flags, *sources], log)
        t0 = time.time()
        run(["cmake", "--build", str(bdir / "obj"), "--target", TARGET, f"-j{req.jobs}"], log)
        log(f"build step took {time.time() - t0:.1f} s")
        built = bdir / "obj" / TARGET
    return install(built, (dest or default_dest()) / abi, commit, flags, log)


def configured(cache_file: Path, sources: list[str]) -> bool:
    """Whether a build dir's CMakeCache.txt holds every `-DNAME=VALUE` of `sources` (else configure again)."""
    if not cache_file.exists():
        return False
    lines = set(cache_file.read_text().splitlines())
    for d in sources:
        name, value = d[2:].split("=", 1)
        if not any(line.startswith(name + ":") and line.split("=", 1)[1] == value for line in lines):
            return False
    return True


def install(built: Path, out_dir: Path, commit: str, flags: list[str], log: Log = stderr_log) -> Path:
    """Copy the runner to out_dir with its manifest.json; untouched when nothing changed."""
    manifest = {
        "sha256": file_sha256(built),
        "llama_cpp_commit": commit,
        "whisper_cpp_version": WHISPER_VERSION,
        "whisper_cpp_edits_sha256": whisper_edits_sha256(),
        "flags": flags,
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(built.stat().st_mtime)),
        "source": f"{LLAMA_SDIST.name}=={LLAMA_SDIST.version} sdist sha256 {LLAMA_SDIST.sha256}; "
                  f"{WHISPER_SDIST.name}=={WHISPER_SDIST.version} sdist sha256 {WHISPER_SDIST.sha256}",
    }
    return install_files([built], out_dir, "manifest.json", manifest, log)[0]


def install_files(built: list[Path], out_dir: Path, manifest_name: str, manifest: dict[str, Any],
                  log: Log = stderr_log) -> list[Path]:
    """Copy the binaries to out_dir with a manifest (each one's sha256 in `manifest["sha256"]` for a
    single binary, else in `manifest["sha256s"]`); untouched when nothing changed."""
    outs = [out_dir / b.name for b in built]
    manifest_path = out_dir / manifest_name
    old = json.loads(manifest_path.read_text()) if manifest_path.exists() else None
    digests = [manifest["sha256"]] if len(built) == 1 else [manifest["sha256s"][b.name] for b in built]
    if old == manifest and all(o.exists() and file_sha256(o) == d for o, d in zip(outs, digests, strict=True)):
        log(f"up to date: {', '.join(map(str, outs))}")
        return outs
    out_dir.mkdir(parents=True, exist_ok=True)
    for b, out, digest in zip(built, outs, digests, strict=True):
        tmp = out.with_suffix(".tmp")
        shutil.copy2(b, tmp)
        tmp.chmod(0o755)
        tmp.replace(out)  # atomic: a test run never sees a half-copied binary
        log(f"installed {out} (sha256 {digest[:12]}…)")
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")
    return outs


def whisper_flags(req: BuildRequest) -> tuple[str, list[str]]:
    """(abi, cmake -D flags) of the whisper.cpp build: the runner's ggml flags for the same target (no
    SPECBENCH_* options), whisper.cpp's tools without SDL, curl or ffmpeg, statically linked where the
    runner is."""
    abi, flags = flag_set(req)
    static = "-DSPECBENCH_FULLY_STATIC=ON" in flags
    flags = [f for f in flags if not f.startswith("-DSPECBENCH_")] + WHISPER_FLAGS
    return abi, flags + (["-DCMAKE_EXE_LINKER_FLAGS=-static"] if static else [])


def build_whisper(req: BuildRequest, dest: Path | None = None, cache: Path | None = None,
                  log: Log = stderr_log) -> dict[str, Path]:
    """Build WHISPER_TOOLS (whisper.cpp's `whisper-cli` and `whisper-quantize`, specbench's
    `specbench-whisper-check`) from the pinned sdist with WHISPER_EDITS, in the cache (keyed by the sdist's
    sha256, the edits and the flags), and install them beside the runner in <dest>/<abi>/ with
    whisper-manifest.json; returns {tool: installed path}."""
    cache = cache or cache_dir()
    abi, flags = whisper_flags(req)
    check_tools(req)
    src = whisper_source(cache, log)
    edits = whisper_edits_sha256()
    bdir = cache / "build" / f"{abi}-whisper.cpp-{WHISPER_VERSION}-{build_key(WHISPER_SDIST.sha256 + edits, flags)}"
    with locked(cache / "build" / f"{bdir.name}.lock"):
        sync_tree(WHISPER_NATIVE, bdir / "native")
        if not (bdir / "obj" / "CMakeCache.txt").exists():
            gen = ["-G", "Ninja"] if shutil.which("ninja") else []
            run(["cmake", "-S", str(bdir / "native"), "-B", str(bdir / "obj"), *gen, *flags,
                 f"-DWHISPER_CPP_DIR={src}"], log)
        t0 = time.time()
        run(["cmake", "--build", str(bdir / "obj"), "--target", *WHISPER_TOOLS, f"-j{req.jobs}"], log)
        log(f"build step took {time.time() - t0:.1f} s")
        built = [bdir / "obj" / "bin" / t for t in WHISPER_TOOLS]
    manifest = {
        "sha256s": {b.name: file_sha256(b) for b in built},
        "whisper_cpp_version": WHISPER_VERSION,
        "whisper_cpp_edits_sha256": edits,
        "flags": flags,
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(built[0].stat().st_mtime)),
        "source": f"{WHISPER_SDIST.name}=={WHISPER_SDIST.version} sdist sha256 {WHISPER_SDIST.sha256}",
    }
    outs = install_files(built, (dest or default_dest()) / abi, "whisper-manifest.json", manifest, log)
    return dict(zip(WHISPER_TOOLS, outs, strict=True))


def main(argv: list[str] | None = None) -> int:
    """scripts/build-runner's command line (argparse: it runs before click may be installed)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                epilog="See specbench/native/README.md for the Android recipe.")
    target = p.add_mutually_exclusive_group()
    target.add_argument("--native", action="store_true", help="GGML_NATIVE=ON: tune for this CPU (user machines only)")
    target.add_argument("--android", action="store_true", help="cross-build for arm64 Android with $ANDROID_NDK")
    target.add_argument("--aarch64-linux", action="store_true",
                        help="cross-build a static aarch64 Linux binary (Debian cross gcc)")
    p.add_argument("--android-ndk", metavar="PATH", help="the NDK's root (implies --android; default $ANDROID_NDK)")
    p.add_argument("--arm-arch", default=DEFAULT_ARM_ARCH,
                   help="GGML_CPU_ARM_ARCH for --android/--aarch64-linux (e.g. armv8.6-a+dotprod+fp16+i8mm)")
    p.add_argument("--opencl", action="store_true", help="with --android: OpenCL backend for Adreno GPUs")
    p.add_argument("--no-mtmd", action="store_true", help="do not link libmtmd (no audio path; faster build)")
    p.add_argument("-j", "--jobs", type=int, default=2, help="parallel compile jobs (default 2)")
    p.add_argument("--cache", help="cache dir (default $SPECBENCH_CACHE or the user cache dir, ~/.cache/specbench)")
    p.add_argument("--dest",
                   help="install into DEST/<abi>/ (default: this checkout's runners/, else the user data dir)")
    p.add_argument("--whisper", action="store_true",
                   help="build whisper.cpp's whisper-cli and whisper-quantize (pinned pywhispercpp sdist) instead")
    p.add_argument("--dry-run", action="store_true", help="print the cmake commands and exit")
    args = p.parse_args(argv)
    req = BuildRequest(native=args.native, android=args.android or bool(args.android_ndk),
                       aarch64_linux=args.aarch64_linux, ndk=args.android_ndk, arm_arch=args.arm_arch,
                       opencl=args.opencl, no_mtmd=args.no_mtmd, jobs=args.jobs)
    if args.dry_run:
        print(dry_run(req, args.whisper))
        return 0
    dest, cache = (Path(args.dest) if args.dest else None), (Path(args.cache) if args.cache else None)
    try:
        if args.whisper:
            for path in build_whisper(req, dest, cache).values():
                print(path)
            return 0
        out = build(req, dest, cache)
    except BuildError as e:
        print(f"build-runner: error: {e.args[0]}" + (f"\n  hint: {e.hint}" if e.hint else ""), file=sys.stderr)
        return 1
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
