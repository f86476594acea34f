"""`specbench build-runner`: build the native runner from the sources shipped in the package."""

from __future__ import annotations

from pathlib import Path

import click

from specbench.app.options import DEFAULT_ARM_ARCH


@click.command("build-runner")
@click.option("--aarch64-linux", is_flag=True, help="Cross-build a static aarch64 Linux binary (Debian's "
              "g++-aarch64-linux-gnu); Android phones run it from adb shell, CPU only.")
@click.option("--android-ndk", type=click.Path(file_okay=False, path_type=Path), default=None, metavar="PATH",
              help="Cross-build for arm64 Android with the NDK at PATH.")
@click.option("--opencl", is_flag=True, help="With --android-ndk: the OpenCL backend for Adreno GPUs.")
@click.option("--arm-arch", default=DEFAULT_ARM_ARCH, show_default=True, help="GGML_CPU_ARM_ARCH of the arm builds.")
@click.option("--native", is_flag=True, help="Tune for this CPU (GGML_NATIVE=ON; the binary runs only on it).")
@click.option("--no-mtmd", is_flag=True, help="Do not link libmtmd (no audio path; a faster build).")
@click.option("--dest", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Install into DEST/<abi>/specbench-runner. Default: the user data dir's runners/ "
                   "(~/.local/share/specbench/runners on Linux).")
@click.option("-j", "--jobs", type=click.IntRange(1), default=2, show_default=True, help="Parallel compile jobs.")
@click.option("--dry-run", "show_commands", is_flag=True, help="Print the cmake commands and exit.")
def build_runner(aarch64_linux: bool, android_ndk: Path | None, opencl: bool, arm_arch: str, native: bool,
                 no_mtmd: bool, dest: Path | None, jobs: int, show_commands: bool) -> None:
    """Build the native runner (C++ on llama.cpp) and install it where specbench finds it.

    llama.cpp comes from the llama-cpp-python sdist on PyPI (pinned, sha256-checked); the
    build is cached in the specbench cache by llama.cpp commit and flags, so the first build
    takes minutes and a repeated one seconds. Prints the installed binary's path.

    Example:

        specbench build-runner

        specbench build-runner --aarch64-linux --no-mtmd
    """
    from specbench.app.build_runner import BuildRunnerRequest
    from specbench.app.build_runner import build_runner as build

    if sum([aarch64_linux, android_ndk is not None, native]) > 1:
        raise click.UsageError("choose one of --aarch64-linux, --android-ndk and --native")
    if opencl and android_ndk is None:
        raise click.UsageError("--opencl is for Android builds: add --android-ndk PATH")
    click.echo(build(BuildRunnerRequest(aarch64_linux=aarch64_linux, android_ndk=android_ndk, opencl=opencl,
                                        arm_arch=arm_arch, native=native, no_mtmd=no_mtmd, dest=dest, jobs=jobs,
                                        dry_run=show_commands)))
