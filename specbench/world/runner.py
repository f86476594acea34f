"""The native runner from Python: find (or build) it, run a job, stream its JSON lines.

The runner (native/README.md) reads one job as JSON and prints one JSON object per line:
`{"event": ...}`, `{"result": ...}`, or a final `{"error", "hint"}` with a non-zero exit.
`run_job` turns that error line, a crash or any other non-zero exit into a
`SpecbenchError` carrying the runner's message, its hint and the tail of its stderr.
"""

from __future__ import annotations

import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import threading
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from specbench.errors import SpecbenchError
from specbench.schemas.fileio import file_sha256

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "scripts" / "build-runner"
NATIVE_DIR = REPO / "native"
BINARY = "specbench-runner"
PROTOCOLS = (1,)
"""Runner protocol versions this specbench speaks."""

LineHandler = Callable[[dict], None]
"""Called with every parsed stdout line (events and results) as it arrives."""


@dataclass(frozen=True)
class RunnerInfo:
    """What `specbench-runner --version` and its manifest say about one binary."""

    path: Path
    version: str
    protocol: int
    llama_cpp_commit: str
    system_info: str
    sha256: str
    flags: tuple[str, ...] = ()
    """CMake flags from runners/<abi>/manifest.json (empty when there is none)."""
    modes: tuple[str, ...] | None = None
    """Modes the runner lists in --version (None: it does not list them)."""
    methods: tuple[str, ...] | None = None
    """Methods its decode mode implements, as --version lists them (None: not listed)."""

    def as_dict(self) -> dict:
        """The `runner` section of profiles and result manifests."""
        return {"path": str(self.path), "version": self.version, "protocol": self.protocol, "sha256": self.sha256,
                "llama_cpp_commit": self.llama_cpp_commit, "flags": list(self.flags)}


@dataclass(frozen=True)
class RunOutput:
    """Everything one job printed on stdout, split by line kind."""

    events: list[dict] = field(default_factory=list)
    results: list[dict] = field(default_factory=list)
    wall_s: float = 0.0
    """The runner's own wall time for the job (its `done` event)."""


def host_abi() -> str:
    """runners/<abi> of this machine, named as scripts/build-runner names it."""
    machine = platform.machine().lower()
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    return f"{machine}-{platform.system().lower()}"


def runner_path(abi: str | None = None) -> Path:
    """`$SPECBENCH_RUNNER`, else runners/<abi>/specbench-runner (where build-runner installs it)."""
    if os.environ.get("SPECBENCH_RUNNER") and abi is None:
        return Path(os.environ["SPECBENCH_RUNNER"])
    return REPO / "runners" / (abi or host_abi()) / BINARY


def is_stale(path: Path) -> bool:
    """True when a file under native/ is newer than the binary (a rebuild takes ~35 s)."""
    if not NATIVE_DIR.is_dir() or not path.exists():
        return False
    built = path.stat().st_mtime
    return any(f.is_file() and f.stat().st_mtime > built for f in NATIVE_DIR.rglob("*"))


def find_runner(build: bool = False, on_build_line: Callable[[str], None] | None = None,
                rebuild_stale: bool = False) -> Path:
    """The runner for this host; built with scripts/build-runner when missing and `build`."""
    path = runner_path()
    if path.exists() and not (rebuild_stale and build and is_stale(path) and "SPECBENCH_RUNNER" not in os.environ):
        return path
    if not build:
        raise SpecbenchError(f"native runner not found: {path}",
                             hint="build it with scripts/build-runner (about 5 minutes the first time, cached after)")
    try:
        return build_runner(on_build_line)
    except SpecbenchError:
        if path.exists():  # a stale but working binary beats none (native/ may be mid-edit)
            if on_build_line:
                on_build_line(f"rebuild failed; using the existing {path}")
            return path
        raise


def build_runner(on_line: Callable[[str], None] | None = None) -> Path:
    """Run scripts/build-runner for the host, streaming its log lines to `on_line`."""
    if not BUILD_SCRIPT.exists():
        raise SpecbenchError(f"cannot build the native runner: {BUILD_SCRIPT} not found",
                             hint="run from a specbench source checkout, or set SPECBENCH_RUNNER to a built binary")
    proc = subprocess.Popen([sys.executable, str(BUILD_SCRIPT)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, cwd=REPO)
    tail: deque[str] = deque(maxlen=6)
    assert proc.stdout is not None
    for line in proc.stdout:
        line = line.rstrip()
        if line:
            tail.append(line)
            if on_line:
                on_line(line)
    if proc.wait() != 0:
        raise SpecbenchError(f"building the native runner failed: {' | '.join(tail)}",
                             hint="see native/README.md (needs cmake, a C++17 compiler and pip access to PyPI)")
    path = runner_path()
    if not path.exists():
        raise SpecbenchError(f"scripts/build-runner finished but {path} is missing")
    return path


def runner_info(path: Path) -> RunnerInfo:
    """Version, protocol and build manifest of the runner at `path`; refuses unknown protocols."""
    try:
        done = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=60)
    except OSError as exc:
        raise SpecbenchError(f"cannot start the native runner {path}: {exc}",
                             hint="rebuild it with scripts/build-runner") from None
    try:
        doc = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        raise SpecbenchError(f"{path} --version did not print a JSON object (exit {done.returncode})"
                             f"{_tail_text(done.stderr)}", hint="rebuild it with scripts/build-runner") from None
    if doc.get("protocol") not in PROTOCOLS:
        raise SpecbenchError(f"{path}: runner protocol {doc.get('protocol')} is not one this specbench speaks "
                             f"({list(PROTOCOLS)})", hint="rebuild the runner from this checkout (scripts/build-runner)")
    manifest_path = path.parent / "manifest.json"
    manifest = {}
    if manifest_path.exists():
        try:
            manifest = json.loads(manifest_path.read_text())
        except (OSError, json.JSONDecodeError):
            manifest = {}
    sha = manifest.get("sha256") or file_sha256(path)
    return RunnerInfo(path, str(doc.get("version", "?")), int(doc["protocol"]), str(doc.get("llama_cpp_commit", "?")),
                      str(doc.get("system_info", "")), sha, tuple(manifest.get("flags", ())), *listed(doc))


def listed(version_doc: dict) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None]:
    """(modes, methods) a runner's --version lists; None for what an older runner leaves out."""
    return tuple(
        None if version_doc.get(key) is None else tuple(version_doc[key]) for key in ("modes", "methods"))


def _knows(path: Path, job: dict, unknown: str) -> bool:
    """Run a probe job: the runner knows the feature unless its error starts with `unknown`."""
    done = subprocess.run([str(path), "-"], input=json.dumps(job), capture_output=True, text=True, timeout=60)
    for line in done.stdout.splitlines():
        try:
            doc = json.loads(line)
        except json.JSONDecodeError:
            continue
        if "error" in doc:
            return not str(doc["error"]).startswith(unknown)
    return done.returncode == 0


def supports_mode(path: Path, mode: str, info: RunnerInfo | None = None) -> bool:
    """Whether the runner knows `mode`: from --version's list, else by probing a job."""
    if info is not None and info.modes is not None:
        return mode in info.modes
    return _knows(path, {"mode": mode}, f"unknown mode '{mode}'")


def supports_method(path: Path, name: str, info: RunnerInfo | None = None) -> bool:
    """Whether the runner's decode mode knows method `name`: from --version's list, else by
    probing a job (it fails before loading models)."""
    if info is not None and info.methods is not None:
        return name in info.methods
    job = {"mode": "decode", "target": {"path": "/nonexistent/probe.gguf"}, "drafter": {"path": "/nonexistent/probe.gguf"},
           "methods": [{"name": name}], "windows": [{"prompt": [1], "cap": 1}]}
    return _knows(path, job, f"unknown method '{name}'")


def run_job(path: Path, job: dict, on_line: LineHandler | None = None, timeout_s: float | None = None,
            argv_prefix: tuple[str, ...] = ()) -> RunOutput:
    """Run one job (written to a temporary JSON file), streaming parsed lines to `on_line`.

    Raises SpecbenchError for the runner's error line (message + hint), a line that is not
    JSON, or a non-zero exit (with the signal name for a crash); the tail of the runner's
    stderr is appended on one line.
    """
    out = RunOutput()
    with tempfile.TemporaryDirectory(prefix="specbench-job-") as tmp:
        job_path = Path(tmp) / "job.json"
        job_path.write_text(json.dumps(job), encoding="utf-8")
        try:
            proc = subprocess.Popen([*argv_prefix, str(path), str(job_path)], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, bufsize=1)
        except OSError as exc:
            raise SpecbenchError(f"cannot start the native runner {path}: {exc}",
                                 hint="build it with scripts/build-runner") from None
        stderr_tail: deque[str] = deque(maxlen=8)
        reader = threading.Thread(target=_drain, args=(proc.stderr, stderr_tail), daemon=True)
        reader.start()
        error: dict | None = None
        timer = threading.Timer(timeout_s, proc.kill) if timeout_s else None
        if timer:
            timer.start()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                error = take_line(out, line, on_line, "", lambda: _tail_text("".join(stderr_tail))) or error
            returncode = proc.wait()
        finally:
            if timer:
                timer.cancel()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            reader.join(timeout=5)
    tail = _tail_text("".join(stderr_tail))
    if error is not None:
        raise SpecbenchError(f"runner: {error.get('error')}{tail}", hint=error.get("hint"))
    if returncode != 0:
        raise SpecbenchError(f"runner exited with {_exit_text(returncode)} on a {job.get('mode')} job{tail}",
                             hint="a crash is a bug in the runner or llama.cpp; rerun with \"verbose\": true for its log")
    return with_wall_time(out)


def take_line(out: RunOutput, line: str | bytes, on_line: LineHandler | None, prefix: str = "",
              tail: Callable[[], str] = str) -> dict | None:
    """File one line of the runner's stdout into `out` and pass it to `on_line`; returns the
    document when it is the runner's error line. A line that is not JSON is an error
    (`prefix` + the line + `tail()`, e.g. the stderr tail)."""
    if not line.strip():
        return None
    try:
        doc = json.loads(line)
    except json.JSONDecodeError:
        text = line.decode(errors="replace") if isinstance(line, bytes) else line.strip()
        raise SpecbenchError(f"{prefix}runner printed a line that is not JSON: {text[:120]!r}{tail()}") from None
    if "error" in doc:
        return doc
    if "result" in doc:
        out.results.append(doc["result"])
    else:
        out.events.append(doc)
    if on_line:
        on_line(doc)
    return None


def with_wall_time(out: RunOutput) -> RunOutput:
    """`out` with the runner's own wall time for the job (its last `done` event)."""
    done = [e for e in out.events if e.get("event") == "done"]
    return RunOutput(out.events, out.results, float(done[-1].get("wall_s", 0.0)) if done else 0.0)


def _drain(stream, tail: deque) -> None:
    for line in stream:
        if line.strip():
            tail.append(line.rstrip())


def _tail_text(stderr: str, limit: int = 400) -> str:
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    text = " | ".join(lines[-4:])
    return f" [stderr: {text[-limit:]}]"


def _exit_text(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"signal {-returncode}"
    return f"status {returncode}"
