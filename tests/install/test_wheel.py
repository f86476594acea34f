"""The package people install does native work: the wheel, installed (not editable) into a
fresh venv outside the checkout, builds its runner from the sources it ships into the user
data dir, then profiles this host and runs natively from another working directory.

The build reuses the cached llama.cpp objects (same commit and flags as the checkout's
runner, so it recompiles at most the runner itself). The fresh venv sees the test venv's
dependencies through a .pth path line; the editable finder of the checkout lives in a .pth
file there, which a path line does not process, and the test checks that `specbench`
resolves to the installed copy.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from specbench.schemas.fileio import file_sha256
from specbench.schemas.profiles import load_profile
from specbench.schemas.results import load_results
from specbench.schemas.windows import make_text_window, save_windows
from specbench.world.build import host_abi

REPO = Path(__file__).resolve().parents[2]
# Not part of the package, or rebuilt by the build: a stale build/lib would leak removed modules into the wheel.
NOT_SOURCES = shutil.ignore_patterns(".git", ".venv", "build", "runners", "results", "*.egg-info", "__pycache__",
                                     ".pytest_cache", ".hypothesis")


def sh(cmd: list, cwd: Path, env: dict, timeout: float = 300) -> str:
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{cmd[:3]} exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(venv bin dir, environment, working dir) of specbench installed from its wheel."""
    root = tmp_path_factory.mktemp("install")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPECBENCH_RUNNER", "SPECBENCH_RUNNERS")}
    env["XDG_DATA_HOME"] = str(root / "data")  # the user data dir: empty, so the runner found is the one built here
    src = root / "src"
    shutil.copytree(REPO, src, ignore=NOT_SOURCES)
    sh([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", ".", "-w", root / "dist"],
       src, env)
    wheel = next((root / "dist").glob("specbench-*.whl"))
    venv = root / "venv"
    sh([sys.executable, "-m", "venv", "--without-pip", venv], root, env)
    python = venv / "bin" / "python"
    sh([sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", "--no-index", wheel], root, env)
    site = Path(sh([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], root, env).strip())
    (site / "specbench-test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    work = root / "work"
    work.mkdir()
    where = sh([python, "-c", "import specbench; print(specbench.__file__)"], work, env).strip()
    assert Path(where).is_relative_to(site), f"specbench imported from {where}, not the installed {site}"
    return venv / "bin", env, work


def test_the_wheel_ships_the_native_sources_and_the_build_logic(installed):
    bin_dir, env, work = installed
    out = sh([bin_dir / "python", "-c", "from specbench.world import build; print(build.NATIVE)"], work, env).strip()
    native = Path(out)
    assert (native / "CMakeLists.txt").is_file() and (native / "src" / "main.cpp").is_file()
    assert (native / "whisper" / "CMakeLists.txt").is_file() and (native / "whisper" / "check.cpp").is_file()
    assert "site-packages" in native.parts


def test_the_wheel_declares_the_optional_extras_and_runs_as_a_module(installed):
    bin_dir, env, work = installed
    wheel = next((bin_dir.parents[1] / "dist").glob("specbench-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read(next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    extras = {line.split(":", 1)[1].strip() for line in metadata.splitlines() if line.startswith("Provides-Extra:")}
    assert extras == {"adb", "audio", "plots", "ray", "hf", "all", "test"}
    requires = [line.split(":", 1)[1].strip() for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    for library, extra in (("adbutils", "adb"), ("soundfile", "audio"), ("matplotlib", "plots"), ("datasets", "hf")):
        (line,) = [r for r in requires if r.startswith(library)]  # one requirement, only under its extra
        assert line.endswith(f'extra == "{extra}"'), line
    help_text = sh([bin_dir / "python", "-m", "specbench", "--help"], work, env)
    assert "build-runner" in help_text and "select-budget" in help_text


def test_installed_specbench_builds_profiles_and_runs_natively(installed, tiny, runner):
    bin_dir, env, work = installed
    specbench = bin_dir / "specbench"
    built = Path(sh([specbench, "build-runner"], work, env, timeout=900).strip().splitlines()[-1])
    expected = Path(env["XDG_DATA_HOME"]) / "specbench" / "runners" / host_abi() / "specbench-runner"
    assert built == expected and built.is_file()
    assert json.loads((built.parent / "manifest.json").read_text())["sha256"]

    sh([specbench, "profile", "local", "--target", tiny.target, "--drafter", f"near={tiny.near}", "--max-width", 3,
        "--depths", "0", "--no-cosched", "--placement", "split", "--out", "local.yaml"], work, env)
    profile = load_profile(work / "local.yaml")
    assert profile.runner.sha256 == file_sha256(built)  # measured with the runner just installed

    save_windows(work / "windows.jsonl", [make_text_window(f"w{i}", text, "Repeat this.", 8, "tiny", "test")
                                          for i, text in enumerate(["hello the world", "in the heat"])])
    sh([specbench, "run", "windows.jsonl", "--native", "--device", "local", "--target", tiny.target,
        "--drafter", f"near={tiny.near}", "--methods", "target", "--method", "sd:W=3", "--placement", "split",
        "--out", "res"], work, env)
    manifest, rows = load_results(work / "res")
    assert len(rows) == 4 and set(rows["source"]) == {"native"} and rows["lossless"].all()
    assert manifest.environment.runner.sha256 == file_sha256(built)
