"""Offline checks of the demo-model cache and the build script's recipes (no download, no compile)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from specbench.errors import SpecbenchError
from specbench.world import models

REPO = Path(__file__).resolve().parents[2]


def test_unknown_demo_model_lists_the_available_ones():
    with pytest.raises(SpecbenchError, match=r"Unknown demo model 'smollm'. Available: gemma3-270m, smollm2-135m, smollm2-135m-f16"):
        models.demo_model("smollm")


def test_a_corrupted_cached_model_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path))
    bad = tmp_path / "models" / models.DEMO_MODELS["smollm2-135m"].filename
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"not a gguf")
    with pytest.raises(SpecbenchError, match="sha256") as err:
        models.demo_model("smollm2-135m")
    assert "delete" in err.value.hint


def test_a_missing_model_without_download_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path))
    with pytest.raises(SpecbenchError, match="not in the cache"):
        models.demo_model("gemma3-270m", download=False)


def build_runner(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "scripts" / "build-runner"), *args],
                          capture_output=True, text=True, timeout=60)


def test_default_build_uses_the_avx2_baseline_not_native():
    out = build_runner("--dry-run").stdout
    if "x86_64" not in subprocess.run(["uname", "-m"], capture_output=True, text=True).stdout:
        pytest.skip("x86_64 flags only")
    assert "-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" in out
    assert "-DBUILD_SHARED_LIBS=OFF" in out and "-DCMAKE_BUILD_TYPE=Release" in out and "-j2" in out


def test_android_recipe_has_the_ndk_flags():
    out = build_runner("--android", "--opencl", "--dry-run").stdout
    for flag in ["android.toolchain.cmake", "-DANDROID_ABI=arm64-v8a", "-DANDROID_PLATFORM=android-28",
                 "-DGGML_OPENMP=OFF", "-DGGML_LLAMAFILE=OFF", "-DGGML_CPU_ARM_ARCH=armv8.2-a+dotprod+fp16",
                 "-DGGML_OPENCL=ON", "-DGGML_OPENCL_USE_ADRENO_KERNELS=ON"]:
        assert flag in out


def test_android_without_an_ndk_fails_with_a_hint(monkeypatch):
    monkeypatch.delenv("ANDROID_NDK", raising=False)
    monkeypatch.delenv("ANDROID_NDK_HOME", raising=False)
    done = build_runner("--android")
    assert done.returncode == 1
    assert "needs the Android NDK" in done.stderr and "hint: set ANDROID_NDK" in done.stderr
