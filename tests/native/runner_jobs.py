"""The checkout's runner as the tests find it, and one job through it with the protocol checked."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

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
