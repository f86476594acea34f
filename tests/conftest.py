"""Fixtures the test folders share, each made once per test run: the checkout's native runner (or a skip
saying how to build it), the tiny random-weight models written with gguf, the cached demo models, and the
tiny Whisper-shaped models."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.native.runner_jobs import job_runner, runner_path


def pytest_collection_modifyitems(config, items):
    """`make test-slow` runs only the serial phase (scripts/make-test): a `slow` test must be `serial` too."""
    loose = [item.nodeid for item in items if item.get_closest_marker("slow") and not item.get_closest_marker("serial")]
    if loose:
        raise pytest.UsageError(f"marked slow but not serial, so `make test-slow` would skip them: {', '.join(loose)}")


@pytest.fixture(scope="session")
def runner() -> Path:
    path = runner_path()
    if not path.exists():
        pytest.skip(f"native runner not built ({path} missing): run scripts/build-runner (about 5 minutes the first time)")
    return path


@pytest.fixture(scope="session")
def run_job(runner):
    """run_job(job) -> RunnerOutput (see tests/native/runner_jobs.py)."""
    return job_runner(runner)


@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    """The tiny qwen3 target and its drafters (tests/native/tiny_gguf.py TinyModels)."""
    pytest.importorskip("gguf", reason="the tiny model fixtures need gguf==0.19.0 (pip install gguf==0.19.0)")
    from tests.native.tiny_gguf import write_tiny_models

    return write_tiny_models(tmp_path_factory.mktemp("tiny-models"))


@pytest.fixture(scope="session")
def tiny_other_vocab(tiny) -> Path:
    """A tiny drafter with another vocabulary (other BPE merges, so other ids from 256 on)."""
    from tests.native import tiny_gguf as tg

    return tg.write_tiny_qwen3(tiny.target.parent / "other-vocab.gguf",
                               tg.random_weights(seed=5, n_vocab=tg.n_vocab("b")), vocab="b")


@pytest.fixture(scope="session")
def tiny_no_template(tiny) -> Path:
    """The `near` drafter's weights in a GGUF that stores no chat template (as Gemma 3's repackaging)."""
    from tests.native import tiny_gguf as tg

    return tg.write_tiny_qwen3(tiny.target.parent / "no-template.gguf",
                               tg.perturbed(tiny.weights, seed=2, noise=0.05), chat_template=None)


@pytest.fixture(scope="session")
def demo_model_path():
    """demo_model_path(name) -> the cached demo GGUF, or a skip (never downloads)."""
    from specbench.errors import SpecbenchError
    from specbench.world import demo_models as models

    def get(name: str) -> Path:
        try:
            return models.demo_model(name, download=False)
        except SpecbenchError as err:
            pytest.skip(f"demo model {name} not cached: {err}")

    return get


@pytest.fixture(scope="session")
def tiny_whisper(tmp_path_factory):
    """Tiny random-weight Whisper-shaped models in whisper.cpp's format (target, its one-layer early exit as
    drafter) and one second of audio: tests/audio/tiny_whisper.py."""
    from tests.audio.tiny_whisper import write_tiny_whisper

    return write_tiny_whisper(tmp_path_factory.mktemp("tiny-whisper"))
