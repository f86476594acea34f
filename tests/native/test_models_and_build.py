"""Offline checks of the demo-model cache, the build's recipes and where runners and caches are
looked for (no download, no compile)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from specbench.errors import SpecbenchError
from specbench.world import build, demo_models, dirs, runner

REPO = Path(__file__).resolve().parents[2]


def test_unknown_demo_model_lists_the_available_ones():
    with pytest.raises(SpecbenchError, match=r"Unknown demo model 'smollm'. Available: gemma3-270m, smollm2-135m, smollm2-135m-f16"):
        demo_models.demo_model("smollm")


def test_a_corrupted_cached_model_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path))
    bad = tmp_path / "models" / demo_models.DEMO_MODELS["smollm2-135m"].filename
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"not a gguf")
    with pytest.raises(SpecbenchError, match="sha256") as err:
        demo_models.demo_model("smollm2-135m")
    assert "delete" in err.value.hint


def test_a_missing_model_without_download_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path))
    with pytest.raises(SpecbenchError, match="not in the cache"):
        demo_models.demo_model("gemma3-270m", download=False)


def build_runner(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "scripts" / "build-runner"), *args],
                          capture_output=True, text=True, timeout=60)


def test_default_build_uses_the_avx2_baseline_not_native():
    out = build_runner("--dry-run").stdout
    if "x86_64" not in subprocess.run(["uname", "-m"], capture_output=True, text=True).stdout:
        pytest.skip("x86_64 flags only")
    assert "-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" in out
    assert "-DBUILD_SHARED_LIBS=OFF" in out and "-DCMAKE_BUILD_TYPE=Release" in out and "-j2" in out


def test_the_runner_build_compiles_the_edited_whisper_source(tmp_path):
    out = build_runner("--dry-run").stdout
    assert "-DLLAMA_CPP_DIR=" in out and "-DWHISPER_CPP_DIR=" in out
    cache = tmp_path / "CMakeCache.txt"
    sources = ["-DWHISPER_CPP_DIR=/c/src/whisper.cpp-1", f"-DSPECBENCH_WHISPER_EDITS={build.whisper_edits_sha256()}"]
    assert not build.configured(cache, sources)  # no build dir yet
    cache.write_text(f"WHISPER_CPP_DIR:PATH=/c/src/whisper.cpp-1\nSPECBENCH_WHISPER_EDITS:STRING={'0' * 64}\n")
    assert not build.configured(cache, sources)  # other edits: configure again
    cache.write_text(f"WHISPER_CPP_DIR:PATH=/c/src/whisper.cpp-1\n"
                     f"SPECBENCH_WHISPER_EDITS:STRING={build.whisper_edits_sha256()}\n")
    assert build.configured(cache, sources)


def test_the_whisper_build_uses_the_runners_ggml_flags_and_its_own_project():
    out = build_runner("--whisper", "--dry-run").stdout
    if "x86_64" not in subprocess.run(["uname", "-m"], capture_output=True, text=True).stdout:
        pytest.skip("x86_64 flags only")
    assert "-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" in out and "-DSPECBENCH_" not in out
    assert f"cmake -S {build.WHISPER_NATIVE} " in out and "-DWHISPER_CPP_DIR=" in out
    assert "--target whisper-cli whisper-quantize specbench-whisper-check -j2" in out


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


def test_the_cache_is_specbench_cache_else_the_xdg_cache_dir(tmp_path, monkeypatch):
    monkeypatch.delenv("SPECBENCH_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert dirs.cache_dir() == tmp_path / "xdg" / "specbench"
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path / "mine"))
    assert dirs.cache_dir() == tmp_path / "mine"


def _fake_runner(base, abi):
    path = base / abi / "specbench-runner"
    path.parent.mkdir(parents=True)
    path.write_text("#!/bin/sh\n")
    return path


def test_runner_lookup_order_runners_env_then_user_data_then_checkout(tmp_path, monkeypatch):
    monkeypatch.delenv("SPECBENCH_RUNNER", raising=False)
    monkeypatch.delenv("SPECBENCH_RUNNERS", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert runner.runners_dirs() == [tmp_path / "data" / "specbench" / "runners", REPO / "runners"]
    assert runner.locate_runner(["no-such-abi"]) is None
    user = _fake_runner(tmp_path / "data" / "specbench" / "runners", "x86_64-linux")
    assert runner.locate_runner(["x86_64-linux"]) == user
    mine = _fake_runner(tmp_path / "mine", "aarch64-linux")
    monkeypatch.setenv("SPECBENCH_RUNNERS", str(tmp_path / "mine"))
    # a directory's candidates all come before the next directory's
    assert runner.locate_runner(["x86_64-linux", "aarch64-linux"]) == mine
    monkeypatch.setenv("SPECBENCH_RUNNER", str(tmp_path / "one"))
    assert runner.runner_path() == tmp_path / "one"  # one binary for this host overrides the lookup


def test_a_missing_runner_names_the_places_and_how_to_build(tmp_path, monkeypatch):
    monkeypatch.delenv("SPECBENCH_RUNNER", raising=False)
    monkeypatch.setenv("SPECBENCH_RUNNERS", str(tmp_path / "none"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    for module in (runner, build):
        monkeypatch.setattr(module, "checkout_root", lambda: None)  # as installed
    with pytest.raises(SpecbenchError, match="native runner for .* not found") as err:
        runner.find_runner()
    assert str(tmp_path / "none") in str(err.value) and str(tmp_path / "data" / "specbench" / "runners") in str(err.value)
    assert "specbench build-runner" in err.value.hint and "--runner DIR" in err.value.hint


def test_build_runner_command_dry_run_and_its_refusals(tmp_path):
    from click.testing import CliRunner

    from specbench.cli import main

    done = CliRunner().invoke(main, ["build-runner", "--aarch64-linux", "--no-mtmd", "--dry-run"])
    assert done.exit_code == 0 and "-DCMAKE_SYSTEM_PROCESSOR=aarch64" in done.output
    assert "-DSPECBENCH_WITH_MTMD=OFF" in done.output and str(build.NATIVE) in done.output
    done = CliRunner().invoke(main, ["build-runner", "--android-ndk", str(tmp_path), "--opencl", "--dry-run"])
    assert done.exit_code == 0 and f"-DCMAKE_TOOLCHAIN_FILE={tmp_path}/build/cmake/android.toolchain.cmake" in done.output
    done = CliRunner().invoke(main, ["build-runner", "--aarch64-linux", "--native"])
    assert done.exit_code == 2 and "choose one of" in done.output
    done = CliRunner().invoke(main, ["build-runner", "--android-ndk", str(tmp_path)])
    assert done.exit_code == 1 and f"Error: {tmp_path} is not an Android NDK" in done.output
