"""The native runner from Python: find (or build) it, run a job, stream its JSON lines.

The runner (specbench/native/README.md) reads one job as JSON and prints one JSON object per line:
`{"event": ...}`, `{"result": ...}`, or a final `{"error", "hint"}` with a non-zero exit.
`run_job` turns that error line, a crash or any other non-zero exit into a
`SpecbenchError` carrying the runner's message, its hint and the tail of its stderr.
Runners are looked up per ABI in `$SPECBENCH_RUNNERS` (`--runner DIR`), then the user data
dir (`specbench build-runner`), then a source checkout's runners/ (runners_dirs), so an
installed specbench and a checkout find theirs the same way.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from specbench.errors import SpecbenchError, stderr_tail
from specbench.schemas.fileio import file_sha256
from specbench.world.build import NATIVE, default_dest, host_abi
from specbench.world.build import TARGET as BINARY
from specbench.world.dirs import checkout_root, user_runners_dir

RUNNER_ENV = "SPECBENCH_RUNNER"
"""One runner binary for this host, overriding every lookup."""
RUNNERS_ENV = "SPECBENCH_RUNNERS"
"""A directory holding <abi>/specbench-runner, looked in first (`--runner DIR` sets it)."""
BUILD_HINT = ("build it with `specbench build-runner` (about 5 minutes the first time, cached after) "
              "or pass --runner DIR")
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
    """llama.cpp's `llama_print_system_info()`, as --version prints it."""
    sha256: str
    modes: tuple[str, ...]
    """Job modes the runner runs, as --version lists them."""
    methods: tuple[str, ...]
    """Methods its decode mode implements, as --version lists them."""
    flags: tuple[str, ...] = ()
    """CMake flags from <runners>/<abi>/manifest.json (empty when there is none)."""


@dataclass(frozen=True)
class RunOutput:
    """Everything one job printed on stdout, split by line kind."""

    events: list[dict] = field(default_factory=list)
    results: list[dict] = field(default_factory=list)
    wall_s: float = 0.0
    """The runner's own wall time for the job (its `done` event)."""


def runners_dirs() -> list[Path]:
    """The directories holding <abi>/specbench-runner, in lookup order: `$SPECBENCH_RUNNERS`
    (`--runner`), the user data dir (`specbench build-runner`), a checkout's runners/."""
    dirs = [Path(os.environ[RUNNERS_ENV])] if os.environ.get(RUNNERS_ENV) else []
    dirs.append(user_runners_dir())
    root = checkout_root()
    if root:
        dirs.append(root / "runners")
    return dirs


def locate_runner(abis: Sequence[str]) -> Path | None:
    """The first runners_dirs()/<abi>/specbench-runner that exists, trying every directory for
    each of `abis` (preferred first) before the next directory; None when there is none."""
    for base in runners_dirs():
        for abi in abis:
            path = base / abi / BINARY
            if path.is_file() and path.stat().st_size > 0:
                return path
    return None


def looked_in(abis: Sequence[str]) -> str:
    """The places locate_runner looked, for an error message."""
    return ", ".join(str(base / abi) for base in runners_dirs() for abi in abis)


def runner_path() -> Path:
    """This host's runner: `$SPECBENCH_RUNNER`, else the first one found (runners_dirs), else
    where a build would install it (it may not exist)."""
    if os.environ.get(RUNNER_ENV):
        return Path(os.environ[RUNNER_ENV])
    return locate_runner([host_abi()]) or default_dest() / host_abi() / BINARY


def is_stale(path: Path) -> bool:
    """True when a file of the runner's sources is newer than the binary (a rebuild takes ~35 s)."""
    if not NATIVE.is_dir() or not path.exists():
        return False
    built = path.stat().st_mtime
    return any(f.is_file() and f.stat().st_mtime > built for f in NATIVE.rglob("*"))


def find_runner(build: bool = False, on_build_line: Callable[[str], None] | None = None,
                rebuild_stale: bool = False) -> Path:
    """The runner for this host (runner_path); built when missing (or stale, with
    `rebuild_stale`) and `build`, where it was found or else where builds go by default."""
    path = runner_path()
    overridden = bool(os.environ.get(RUNNER_ENV))
    if path.exists() and not (rebuild_stale and build and not overridden and is_stale(path)):
        return path
    if not build or overridden:
        shown = str(path) if overridden else looked_in([host_abi()])
        raise SpecbenchError(f"native runner for {host_abi()} not found (looked in {shown})", hint=BUILD_HINT)
    try:
        return build_host_runner(on_build_line, path.parent.parent)
    except SpecbenchError:
        if path.exists():  # a stale but working binary beats none (the sources may be mid-edit)
            if on_build_line:
                on_build_line(f"rebuild failed; using the existing {path}")
            return path
        raise


def build_host_runner(on_line: Callable[[str], None] | None = None, dest: Path | None = None) -> Path:
    """Build this host's runner into dest/<abi>/ (default: build.default_dest()) in a child
    process, streaming its log lines to `on_line`; returns the installed binary."""
    cmd = [sys.executable, "-m", "specbench.world.build"] + (["--dest", str(dest)] if dest else [])
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
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
                             hint="see specbench/native/README.md "
                                  "(needs cmake, a C++17 compiler and pip access to PyPI)")
    path = (dest or default_dest()) / host_abi() / BINARY
    if not path.exists():
        raise SpecbenchError(f"the runner build finished but {path} is missing")
    return path


def runner_info(path: Path) -> RunnerInfo:
    """Version, protocol, modes and methods of the runner at `path`; refuses unknown protocols."""
    try:
        done = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=60)
    except OSError as exc:
        raise SpecbenchError(f"cannot start the native runner {path}: {exc}",
                             hint="rebuild it with `specbench build-runner`") from None
    manifest = build_manifest(path)
    info = version_info(done.stdout, path, str(path), manifest.get("sha256") or file_sha256(path),
                        manifest.get("flags", ()))
    if info is None:
        raise SpecbenchError(f"{path} --version did not print a JSON object (exit {done.returncode})"
                             f"{stderr_tail(done.stderr)}", hint="rebuild it with `specbench build-runner`")
    return info


def build_manifest(binary: Path) -> dict:
    """<abi>/manifest.json beside a built runner (sha256, CMake flags); {} when absent or unreadable."""
    try:
        return json.loads((binary.parent / "manifest.json").read_text())
    except (OSError, json.JSONDecodeError):
        return {}


def version_info(stdout: str, path: Path, shown: str, sha256: str,
                 flags: Sequence[str] = ()) -> RunnerInfo | None:
    """The RunnerInfo of a runner's `--version` output (its last line); None when that is not a
    JSON object. `shown` names the runner file in errors: a protocol this specbench does not
    speak, or modes/methods not listed, is an error."""
    try:
        doc = json.loads(stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return None
    if not isinstance(doc, dict):
        return None
    if doc.get("protocol") not in PROTOCOLS:
        raise SpecbenchError(f"{shown}: runner protocol {doc.get('protocol')} is not one this specbench speaks "
                             f"({list(PROTOCOLS)})",
                             hint="rebuild the runner for this specbench (`specbench build-runner`)")
    listed = {}
    for key in ("modes", "methods"):
        names = doc.get(key)
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise SpecbenchError(f"{shown}: --version key '{key}': expected a list of names, got {names!r}",
                                 hint="rebuild the runner for this specbench (`specbench build-runner`)")
        listed[key] = tuple(names)
    return RunnerInfo(path, str(doc.get("version", "?")), int(doc["protocol"]), str(doc.get("llama_cpp_commit", "?")),
                      str(doc.get("system_info", "")), sha256, listed["modes"], listed["methods"], tuple(flags))


JOB_PREFIX = "specbench-job-"
"""A job folder's name in the temporary directory: the prefix, the pid of the process that made it, a suffix."""
_swept = False


def sweep_job_folders() -> None:
    """Remove the job folders of processes that are gone (a SIGKILL leaves its folder behind);
    once per process."""
    global _swept
    if _swept:
        return
    _swept = True
    for folder in Path(tempfile.gettempdir()).glob(f"{JOB_PREFIX}*-*"):
        pid = folder.name.removeprefix(JOB_PREFIX).partition("-")[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def job_folder() -> Iterator[Path]:
    """A fresh job folder in the temporary directory, removed on the way out.

    A Ctrl-C or SIGTERM (raised as KeyboardInterrupt) cannot leave it behind: the mkdir is the
    first thing inside the `try`, so an interrupt right after it still reaches the removal, and
    an interrupt during the removal finishes the removal before it is raised again.
    """
    folder = Path(tempfile.gettempdir()) / f"{JOB_PREFIX}{os.getpid()}-{secrets.token_hex(8)}"
    ours = True
    try:
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:  # another's folder (64 random bits: never in practice): not ours to remove
            ours = False
            raise
        yield folder
    finally:
        if ours:
            _remove_through_interrupts(folder)


def _remove_through_interrupts(folder: Path) -> None:
    interrupted = False
    while True:
        try:
            shutil.rmtree(folder, ignore_errors=True)
            break
        except KeyboardInterrupt:
            interrupted = True
    if interrupted:
        raise KeyboardInterrupt


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's process: alive
    return True


def run_job(path: Path, job: dict, on_line: LineHandler | None = None, timeout_s: float | None = None,
            argv_prefix: tuple[str, ...] = ()) -> RunOutput:
    """Run one job (written to a temporary JSON file), streaming parsed lines to `on_line`.

    Raises SpecbenchError for the runner's error line (message + hint), a line that is not
    JSON, or a non-zero exit (with the signal name for a crash); the tail of the runner's
    stderr is appended on one line.
    """
    out = RunOutput()
    sweep_job_folders()
    with job_folder() as tmp:
        job_path = tmp / "job.json"
        job_path.write_text(json.dumps(job), encoding="utf-8")
        try:
            proc = subprocess.Popen([*argv_prefix, str(path), str(job_path)], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, bufsize=1)
        except OSError as exc:
            raise SpecbenchError(f"cannot start the native runner {path}: {exc}",
                                 hint=BUILD_HINT) from None
        tail_lines: deque[str] = deque(maxlen=8)
        reader = threading.Thread(target=_drain, args=(proc.stderr, tail_lines), daemon=True)
        reader.start()
        error: dict | None = None
        timer = threading.Timer(timeout_s, proc.kill) if timeout_s else None
        if timer:
            timer.start()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                error = take_line(out, line, on_line, "", lambda: stderr_tail("\n".join(tail_lines))) or error
            returncode = proc.wait()
        finally:
            if timer:
                timer.cancel()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            reader.join(timeout=5)
    tail = stderr_tail("\n".join(tail_lines))
    if error is not None:
        raise SpecbenchError(f"runner: {error.get('error')}{tail}", hint=error.get("hint"))
    if returncode != 0:
        raise SpecbenchError(f"runner exited with {_exit_text(returncode)} on a {job.get('mode')} job{tail}",
                             hint="a crash is a bug in the runner or llama.cpp; "
                                  "rerun with \"verbose\": true for its log")
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


def loaded_events(out: RunOutput) -> dict[str, dict]:
    """The runner's `loaded` events of a job by model path as the job named it: what llama.cpp
    reported on loading each model (desc, n_params, size_bytes, ...)."""
    return {str(e["path"]): e for e in out.events if e.get("event") == "loaded" and "path" in e}


def with_wall_time(out: RunOutput) -> RunOutput:
    """`out` with the runner's own wall time for the job (its last `done` event)."""
    done = [e for e in out.events if e.get("event") == "done"]
    return RunOutput(out.events, out.results, float(done[-1].get("wall_s", 0.0)) if done else 0.0)


def _drain(stream, tail: deque) -> None:
    for line in stream:
        if line.strip():
            tail.append(line.rstrip())


def _exit_text(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"signal {-returncode}"
    return f"status {returncode}"
