"""`specbench build-runner`: the native runner built from the sources shipped in the package."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class BuildRunnerRequest:
    """`build-runner`'s options, as given (at most one of aarch64_linux, android_ndk and native)."""

    aarch64_linux: bool
    """--aarch64-linux: a static aarch64 Linux binary."""
    android_ndk: Path | None
    """--android-ndk: cross-build for arm64 Android with the NDK there."""
    opencl: bool
    """--opencl: the OpenCL backend (Android builds)."""
    arm_arch: str
    """--arm-arch: GGML_CPU_ARM_ARCH of the arm builds."""
    native: bool
    """--native: tuned for this CPU."""
    no_mtmd: bool
    """--no-mtmd: no libmtmd (no audio path)."""
    dest: Path | None
    """--dest (None: the user data dir's runners/)."""
    jobs: int
    """-j/--jobs: parallel compile jobs."""
    dry_run: bool
    """--dry-run: the cmake commands instead of a build."""


def build_runner(request: BuildRunnerRequest) -> str:
    """The installed binary's path, or with dry_run the cmake commands a build would run."""
    from specbench.world.build import BuildRequest, build, dry_run
    from specbench.world.dirs import user_runners_dir

    r = request
    req = BuildRequest(native=r.native, android=r.android_ndk is not None, aarch64_linux=r.aarch64_linux,
                       ndk=str(r.android_ndk) if r.android_ndk else None, arm_arch=r.arm_arch, opencl=r.opencl,
                       no_mtmd=r.no_mtmd, jobs=r.jobs)
    if r.dry_run:
        return dry_run(req)
    return str(build(req, r.dest or user_runners_dir()))
