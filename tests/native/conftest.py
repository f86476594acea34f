"""Fixtures for the native runner: the built binary (or a skip saying how to build it),
tiny random-weight qwen3 models written with gguf, and a helper that runs one job."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def runner_path() -> Path:
    """`$SPECBENCH_RUNNER`, else runners/<abi>/specbench-runner as scripts/build-runner installs it."""
    if os.environ.get("SPECBENCH_RUNNER"):
        return Path(os.environ["SPECBENCH_RUNNER"])
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine().lower(), platform.machine().lower())
    return REPO / "runners" / f"{machine}-{platform.system().lower()}" / "specbench-runner"


@dataclass
class RunnerOutput:
    """What one runner invocation printed, split by line kind."""

    returncode: int
    events: list[dict] = field(default_factory=list)
    results: list[dict] = field(default_factory=list)
    error: dict | None = None
    stderr: str = ""


@pytest.fixture(scope="session")
def runner() -> Path:
    path = runner_path()
    if not path.exists():
        pytest.skip(f"native runner not built ({path} missing): run scripts/build-runner (about 5 minutes the first time)")
    return path


def job_runner(path: Path):
    """run(job) -> RunnerOutput with the runner at `path`; asserts the protocol: every
    stdout line is one JSON object of one kind."""

    def run(job: dict, timeout: float = 300) -> RunnerOutput:
        done = subprocess.run([str(path), "-"], input=json.dumps(job), capture_output=True, text=True, timeout=timeout)
        out = RunnerOutput(done.returncode, stderr=done.stderr)
        for line in done.stdout.splitlines():
            doc = json.loads(line)
            assert isinstance(doc, dict) and len({"event", "result", "error"} & doc.keys()) == 1, line
            if "event" in doc:
                out.events.append(doc)
            elif "result" in doc:
                out.results.append(doc["result"])
            else:
                out.error = doc
        return out

    return run


@pytest.fixture(scope="session")
def run_job(runner):
    """run_job(job) -> RunnerOutput (see job_runner)."""
    return job_runner(runner)


@dataclass(frozen=True)
class TinyModels:
    """Paths of the tiny fixtures; `weights` are the target's, for the numpy reference."""

    target: Path
    near: Path      # the target plus a little noise: accepts some drafts, rejects others
    far: Path       # unrelated random weights: rejects almost everything
    weights: dict
    eog: frozenset  # token ids llama.cpp treats as end of generation


@pytest.fixture(scope="session")
def tiny(tmp_path_factory) -> TinyModels:
    pytest.importorskip("gguf", reason="the tiny model fixtures need gguf==0.19.0 (pip install gguf==0.19.0)")
    from . import tiny_gguf as tg

    d = tmp_path_factory.mktemp("tiny-models")
    weights = tg.random_weights(seed=1, n_vocab=tg.n_vocab())
    tg.write_tiny_qwen3(d / "target.gguf", weights)
    tg.write_tiny_qwen3(d / "near.gguf", tg.perturbed(weights, seed=2, noise=0.05))
    tg.write_tiny_qwen3(d / "far.gguf", tg.random_weights(seed=3, n_vocab=tg.n_vocab()))
    tokens = tg.vocabulary()[0]
    eog = frozenset(tokens.index(t) for t in tg.SPECIALS if t != "<|im_start|>")
    return TinyModels(d / "target.gguf", d / "near.gguf", d / "far.gguf", weights, eog)


@pytest.fixture(scope="session")
def demo_model_path():
    """demo_model_path(name) -> the cached demo GGUF, or a skip (never downloads)."""
    from specbench.errors import SpecbenchError
    from specbench.world import models

    def get(name: str) -> Path:
        try:
            return models.demo_model(name, download=False)
        except SpecbenchError as err:
            pytest.skip(f"demo model {name} not cached: {err}")

    return get


@pytest.fixture(scope="session")
def tiny_other_vocab(tiny) -> Path:
    """A tiny drafter with another vocabulary (other BPE merges, so other ids from 256 on)."""
    from . import tiny_gguf as tg

    path = tiny.target.parent / "other-vocab.gguf"
    if not path.exists():
        tg.write_tiny_qwen3(path, tg.random_weights(seed=5, n_vocab=tg.n_vocab("b")), vocab="b")
    return path


@pytest.fixture(scope="session")
def tiny_no_template(tiny) -> Path:
    """The `near` drafter's weights in a GGUF that stores no chat template (as Gemma 3's repackaging)."""
    from . import tiny_gguf as tg

    path = tiny.target.parent / "no-template.gguf"
    if not path.exists():
        tg.write_tiny_qwen3(path, tg.perturbed(tiny.weights, seed=2, noise=0.05), chat_template=None)
    return path


@pytest.fixture()
def device(runner):
    """The local device running this checkout's runner."""
    from specbench.world.devices.local import LocalDevice

    return LocalDevice(runner=runner)


@pytest.fixture()
def models(tiny):
    """(target, drafter) model files of the tiny fixtures."""
    from specbench.world.model_files import ModelFile

    return ModelFile("target", tiny.target), ModelFile("near", tiny.near)
