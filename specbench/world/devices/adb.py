"""AdbDevice: a phone over adb (adbutils) as a specbench Device.

Everything lives in /data/local/tmp/specbench/ on the phone: the runner for the phone's
ABI, models under models/ (pushed once, checked by sha256), and job.json/job.pid of the
job running. Each job runs as

    cd /data/local/tmp/specbench && echo $$ > job.pid && exec taskset MASK ./specbench-runner job.json

through shell v2 (exit status, stderr apart); its JSON lines are parsed as they arrive.
A timeout, cancel() or Ctrl-C kills the pid in job.pid (adbd does not kill it for us).
Before each job after the first the phone cools down (thermal status and zone
temperatures below thresholds, or a warning after `cooldown_max_s`; never with
`cooldown=False`, a sustained run's --no-cooldown); a snapshot is taken
before and after each job and reported with the next `snapshot()` under "jobs", together
with the observed CPU pinning. A job's battery files (its "energy" key) are linked into the work
directory by the job's own shell command, so that the phone's shell resolves them.
"""

from __future__ import annotations

import json
import shlex
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specbench.errors import SpecbenchError, stderr_tail
from specbench.schemas.fileio import file_sha256, safe_name
from specbench.world.devices import adb_state as st
from specbench.world.devices import adb_watch as watch
from specbench.world.devices.adb_link import AdbLink
from specbench.world.runner import BINARY as RUNNER
from specbench.world.runner import (
    LineHandler,
    RunnerInfo,
    RunOutput,
    build_manifest,
    loaded_events,
    locate_runner,
    looked_in,
    take_line,
    version_info,
    with_wall_time,
)

WORKDIR = "/data/local/tmp/specbench"
UNMEASURED_MODES = ("tokenize", "detokenize")
"""Jobs that measure nothing: no snapshots, no cool-down around them."""
FRESH_S = 2.0
"""A snapshot this recent stands for "now" (the last job's "after" is the next one's "before")."""


def runner_dirs(abi: str, gpu: bool) -> tuple[str, ...]:
    """<runners>/<dir> candidates for a phone ABI, preferred first (the static aarch64 Linux
    build runs on Android too, CPU only)."""
    if abi == "arm64-v8a":
        android = ("arm64-v8a-android-opencl", "arm64-v8a-android") if gpu else ("arm64-v8a-android",)
        return android + ("aarch64-linux",)
    if abi == "x86_64":
        return ("x86_64-linux",)
    return ()


@dataclass
class AdbSettings:
    """How jobs run on the phone (CLI flags set these)."""

    cores: str = "big"
    """--cores: all, big, little, prime or CPU numbers ('4-7')."""
    target_processor: str = "cpu"
    """'cpu' or a ggml device name such as 'GPUOpenCL'."""
    drafter_processor: str = "cpu"
    cooldown: bool = True
    """Cool down before each job after the first (False: `run --sustained --no-cooldown`, heat carries over)."""
    cooldown_max_s: float = 300.0
    cooldown_poll_s: float = 5.0
    cooldown_status: int = 0
    """Wait while `dumpsys thermalservice` status is above this."""
    cooldown_temp_c: float = 45.0
    """Wait while any thermal zone is at or above this (°C)."""
    job_timeout_s: float = 3600.0


@dataclass
class _Job:
    record: dict = field(default_factory=dict)
    stderr: deque = field(default_factory=lambda: deque(maxlen=8))
    conn: Any = None  # adbutils' shell connection (adbutils is untyped)
    aborted: str = ""


class AdbDevice:
    """A phone named by its adb serial."""

    def __init__(self, serial: str, settings: AdbSettings | None = None, client=None,
                 warn: Callable[[str], None] | None = None):
        self.link = AdbLink(serial, client)
        self.name = serial
        self.settings = settings or AdbSettings()
        self.warn = warn or (lambda message: None)
        self._props: dict | None = None
        self._clusters: list[dict] = []
        self._info: RunnerInfo | None = None
        self._models: dict[tuple, str] = {}
        self._loaded: dict[str, dict] = {}
        self._jobs: list[dict] = []
        self._job: _Job | None = None
        self._ran_before = False
        self._last_after: tuple[float, dict] = (0.0, {})
        self.transfer_s = 0.0
        """Seconds spent pushing files (for overhead accounting)."""

    @property
    def serial(self) -> str:
        return self.link.serial

    # --- identity and state ---
    def _identity(self) -> dict:
        if self._props is None:
            self.link.check_online()
            text = self.link.shell("getprop; echo @@possible; cat /sys/devices/system/cpu/possible; echo @@snapshot; "
                                   + st.SNAPSHOT_SCRIPT, "reading getprop and /sys", check=False).stdout
            props, _, rest = text.partition("@@possible")
            possible, _, snapshot = rest.partition("@@snapshot")
            self._props = st.identity(st.parse_getprop(props))
            if not self._props["model"] and not self._props["abi"]:
                raise SpecbenchError(f"phone {self.serial}: getprop printed no model and no ABI",
                                     hint="is it an Android device? (`adb -s SERIAL shell getprop`)")
            self._clusters = st.parse_snapshot(snapshot)["clusters"]
            try:
                self._props["cpu_count"] = len(st.parse_cpu_list(possible.strip()))
            except ValueError:
                self._props["cpu_count"] = len({n for c in self._clusters for n in c["cpus"]})
        return self._props

    def cores(self) -> list[int]:
        ident = self._identity()
        return st.pick_cores(self.settings.cores, self._clusters, ident["cpu_count"])

    def cpus(self) -> list[int]:
        return self.cores()

    def processors(self) -> dict[str, str]:
        return {"target": self.settings.target_processor, "drafter": self.settings.drafter_processor}

    def describe(self) -> dict:
        i = self._identity()
        return {"name": self.name, "kind": "adb", "serial": self.serial, "model": i["model"],
                "manufacturer": i["manufacturer"], "soc": i["soc"], "soc_model": i["soc_model"],
                "board_platform": i["board_platform"], "abi": i["abi"], "abilist": i["abilist"],
                "android": i["android"], "sdk": i["sdk"], "fingerprint": i["fingerprint"],
                "cores": len(self.cores()), "cpu_count": i["cpu_count"], "pinned_cpus": self.cores(),
                "clusters": [{"cpus": c["cpus"], "max_freq_khz": c["max_freq_khz"]} for c in self._clusters],
                "processors": {"target": self.settings.target_processor, "drafter": self.settings.drafter_processor}}

    def _snapshot_raw(self) -> dict:
        return st.parse_snapshot(self.link.shell(st.SNAPSHOT_SCRIPT, "taking a snapshot", check=False).stdout)

    def state_now(self) -> dict:
        """The phone's state now (one round trip), leaving the per-job records for `snapshot`."""
        return self._snapshot_raw()

    def snapshot(self) -> dict:
        """The phone's state now, plus the per-job records since the last snapshot."""
        snap = self._fresh_snapshot()
        self._last_after = (time.monotonic(), snap)  # the next job's "before", if it starts at once
        if self._jobs:
            snap = snap | {"jobs": self._jobs}
            self._jobs = []
        return snap

    # --- runner and files ---
    def _cpu_only(self) -> bool:
        return {self.settings.target_processor.lower(), self.settings.drafter_processor.lower()} == {"cpu"}

    def _exec(self, cpus: list[int]) -> str:
        """The runner's command line start: pinned, and with the vendor's libOpenCL.so for a GPU backend."""
        libs = "" if self._cpu_only() else "LD_LIBRARY_PATH=/vendor/lib64:/system/vendor/lib64 "
        return f"{libs}exec taskset {st.cpu_mask(cpus)} ./{RUNNER}"

    def _runner_local(self) -> Path:
        ident = self._identity()
        names = [name for abi in ident["abilist"] for name in runner_dirs(abi, not self._cpu_only())]
        path = locate_runner(names)
        if path is not None:
            return path
        abis = ",".join(ident["abilist"]) or "unknown"
        looked = f" (looked in {looked_in(names)})" if names else " (specbench has no runner build for it)"
        raise SpecbenchError(f"phone {self.serial}: no specbench-runner for ABI {abis}{looked}",
                             hint="for arm64-v8a: specbench build-runner --android-ndk PATH "
                                  "(see specbench/native/README.md) "
                                  "or specbench build-runner --aarch64-linux (CPU only); or pass --runner DIR")

    def runner(self) -> RunnerInfo:
        if self._info is None:
            local = self._runner_local()
            sha = file_sha256(local)  # not the manifest's: it may describe an earlier build of this file
            # the usual case in one round trip: the phone has this very binary, so ask it its version
            done = self.link.shell(f"cd {WORKDIR} && [ \"$(sha256sum {RUNNER} 2>/dev/null | cut -d' ' -f1)\" = {sha} ] "
                                   f"&& {self._exec(self.cores())} --version", "starting the runner", timeout_s=120,
                                   check=False)
            if not done.stdout.strip():
                self._push(local, f"{WORKDIR}/{RUNNER}", sha, 0o755)
                done = self.link.shell(f"cd {WORKDIR} && {self._exec(self.cores())} --version",
                                       "starting the runner", timeout_s=120, check=False)
            shown = f"phone {self.serial}: {local}"
            self._info = version_info(done.stdout, Path(f"{WORKDIR}/{RUNNER}"), shown, sha,
                                      build_manifest(local).get("flags", ()))
            if self._info is None:
                raise SpecbenchError(f"{shown} does not run there (exit {done.returncode}; "
                                     f"ABI {self._identity()['abi']}){stderr_tail(done.stderr)}",
                                     hint="the binary must match the phone's ABI: "
                                          "rebuild it (specbench/native/README.md)")
        return self._info

    def _push(self, local: Path, remote: str, sha: str, mode: int) -> None:
        start = time.perf_counter()
        try:
            self.link.push_verified(local, remote, sha, mode)
        finally:
            self.transfer_s += time.perf_counter() - start

    def model_path(self, path: Path) -> str:
        path = Path(path)
        if not path.is_file():
            raise SpecbenchError(f"model file not found: {path}", hint="pass the path of a .gguf file")
        stat = path.stat()
        key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
        if key not in self._models:
            self._identity()
            sha = file_sha256(path)
            relative = f"models/{sha[:16]}-{safe_name(path.name)[:80]}"
            self._push(path, f"{WORKDIR}/{relative}", sha, 0o644)
            self._models[key] = relative  # relative to the job's cwd, WORKDIR
        return self._models[key]

    # --- jobs ---
    def run_job(self, job: dict, on_line: LineHandler | None = None) -> RunOutput:
        self.runner()
        job = json.loads(json.dumps(job))  # our processor/thread defaults must not leak into the caller's job
        for role, processor in (("target", self.settings.target_processor),
                                ("drafter", self.settings.drafter_processor)):
            if isinstance(job.get(role), dict) and "lookup" not in job[role]:  # a lookup drafter has no model
                job[role]["device"] = processor
                # taskset already pins the whole runner to these cores: a lane on all of them needs no more
                if job[role].get("cpus") == self.cores():
                    del job[role]["cpus"]
        if "threads" not in job and job.get("mode") not in ("tokenize", "detokenize"):
            job["threads"] = len(self.cores())  # more threads than pinned cores stall llama.cpp
        if job.get("mode") in UNMEASURED_MODES:
            return self._run(job, on_line, None)
        before = self._cool_down() if self._ran_before and self.settings.cooldown else self._fresh_snapshot()
        self._ran_before = True
        return self._run(job, on_line, before)

    def _fresh_snapshot(self) -> dict:
        """A snapshot; the previous job's "after" when it is only moments old (one round trip less)."""
        taken, snap = self._last_after
        self._last_after = (0.0, {})
        if snap and time.monotonic() - taken < FRESH_S:
            return json.loads(json.dumps(snap))  # a copy: YAML would write a shared dict as an alias
        return self._snapshot_raw()

    def _run(self, job: dict, on_line: LineHandler | None, before: dict | None) -> RunOutput:
        """Run one job; `before` (a snapshot) records it in the next snapshot's "jobs", None does not."""
        cpus = self.cores()
        record = before is not None
        state = _Job(record={"mode": job.get("mode"), "cpus": cpus, "before": before})
        out, buffer = RunOutput(), [b""]
        error: list[dict | None] = [None]
        threads: list[threading.Thread] = []

        def on_stdout(data: bytes) -> None:
            buffer[0] += data
            *lines, buffer[0] = buffer[0].split(b"\n")
            for raw in lines:
                if not raw.strip():
                    continue
                if record and not threads:
                    threads.append(_start(self._check_pinning, state, cpus))
                error[0] = take_line(out, raw, on_line, f"phone {self.serial}: ") or error[0]

        def on_stderr(data: bytes) -> None:
            state.stderr.extend(line for line in data.decode(errors="replace").splitlines() if line.strip())

        def opened(conn) -> None:
            state.conn = conn

        # the job arrives on stdin (one round trip less than a push) and stays on the phone as job.json
        links, job = energy_links(job)
        command = f"cd {WORKDIR} && {links}cat > job.json && echo $$ > job.pid && {self._exec(cpus)} job.json"
        timer = threading.Timer(self.settings.job_timeout_s, self._abort, (state, "timed out"))
        timer.daemon = True
        timer.start()
        self._job = state
        finished = False
        try:
            code = self.link.stream(command, f"running a {job.get('mode')} job", on_stdout, on_stderr,
                                    self.settings.job_timeout_s, opened, json.dumps(job).encode())
            finished = True
        except Exception as exc:  # noqa: BLE001  (a connection closed under adbutils fails in odd ways)
            if state.aborted:
                raise SpecbenchError(f"phone {self.serial}: {job.get('mode')} job {state.aborted}; the runner was "
                                     "killed (finished windows are saved; rerun with --resume)") from None
            if not isinstance(exc, SpecbenchError):
                raise
            raise SpecbenchError(f"{exc}{stderr_tail(chr(10).join(state.stderr))}", hint=exc.hint) from None
        finally:
            timer.cancel()
            self._job = None
            if not finished:
                self._kill_remote()  # Ctrl-C, a timeout or a lost stream: adbd leaves the runner running
            for thread in threads:
                thread.join(timeout=10)
        if state.aborted:  # the kill won the race with our closing the connection
            raise SpecbenchError(f"phone {self.serial}: {job.get('mode')} job {state.aborted}; the runner was "
                                 "killed (finished windows are saved; rerun with --resume)")
        tail = stderr_tail("\n".join(state.stderr))
        if error[0] is not None:
            raise SpecbenchError(f"runner on {self.serial}: {error[0].get('error')}{tail}", hint=error[0].get("hint"))
        if code != 0:
            signal_text = f"signal {code - 128}" if code > 128 else f"status {code}"
            raise SpecbenchError(f"runner on {self.serial} exited with {signal_text} on a {job.get('mode')} job{tail}",
                                 hint="a crash is a bug in the runner or llama.cpp; rerun with \"verbose\": true "
                                      "in the job for its log")
        if record:
            state.record["after"] = self._snapshot_raw()
            self._last_after = (time.monotonic(), state.record["after"])
            self._jobs.append(state.record)
            pin = state.record.get("pinning")
            if pin and pin["ok"] is False:
                self.warn(f"{self.serial}: runner threads ran on CPUs {pin['observed']}, not only on {cpus}")
        self._loaded.update(loaded_events(out))
        return with_wall_time(out)

    def loaded(self) -> dict[str, dict]:
        return dict(self._loaded)

    def cancel(self, reason: str = "was cancelled") -> None:
        """Stop the running job from another thread (Ctrl-C with several phones)."""
        if self._job is not None:
            self._abort(self._job, reason)

    def _abort(self, state: _Job, reason: str) -> None:
        state.aborted = reason
        self._kill_remote()
        if state.conn is not None:
            try:
                state.conn.close()  # unblocks the reading thread
            except Exception:  # noqa: BLE001  (adbutils may have closed it already, in any state)
                pass

    def _kill_remote(self) -> None:
        # only a process that is still our runner: the pid may have been reused since
        command = (f"cd {WORKDIR} && p=$(cat job.pid 2>/dev/null) && [ -n \"$p\" ] && "
                   f"grep -q {RUNNER} /proc/$p/cmdline 2>/dev/null && kill -9 $p; rm -f job.pid")
        try:
            self.link.shell(command, "stopping the runner", timeout_s=10, check=False)
        except SpecbenchError:
            pass  # offline: the runner dies with adbd's session or finishes on its own

    def _check_pinning(self, state: _Job, cpus: list[int]) -> None:
        state.record["pinning"] = watch.pinning(self.link, f"{WORKDIR}/job.pid", cpus)

    def _cool_down(self) -> dict:
        """Wait until the phone is cool enough; returns the last snapshot, the next job's "before"."""
        snap, record = watch.cool_down(self._fresh_snapshot, self.settings, self.serial)
        if record:
            self._jobs.append({"cooldown": record})
            if not record["ok"]:
                self.warn(record["warning"])
        return snap


def energy_links(job: dict) -> tuple[str, dict]:
    """(shell text linking the job's battery files into the work directory, the job reading the
    links): paths in a job file are not the shell's to resolve, paths in its command line are."""
    energy = job.get("energy")
    if not energy:
        return "", job
    keys = ("current", "voltage", "status")
    text = "".join(f"ln -sf {shlex.quote(energy[k])} energy-{k} && " for k in keys)
    return text, {**job, "energy": {**energy, **{k: f"energy-{k}" for k in keys}}}


def _start(target, *args) -> threading.Thread:
    thread = threading.Thread(target=target, args=args, daemon=True)
    thread.start()
    return thread


def open_adb_device(serial: str, settings: AdbSettings | None = None,
                    warn: Callable[[str], None] | None = None) -> AdbDevice:
    """The phone with this serial, checked to be listed as 'device' by the adb server."""
    from specbench.world.devices.adb_link import adb_client, list_states, server_address, server_running

    if not server_running():  # never start an adb server just to look a name up
        raise SpecbenchError(f"Unknown device '{serial}'. Available: local (no adb server at {server_address()} "
                             "for phones)", hint="`specbench devices` starts one and lists the phones")
    client = adb_client()
    try:
        states = list_states(client)
    except SpecbenchError as exc:
        raise SpecbenchError(f"Unknown device '{serial}': it is not 'local', and {exc}", hint=exc.hint) from None
    if serial not in states:
        listed = ", ".join(["local", *sorted(states)])
        raise SpecbenchError(f"Unknown device '{serial}'. Available: {listed}",
                             hint=f"phones come from the adb server at {server_address()} (`specbench devices`)")
    if states[serial] != "device":
        raise SpecbenchError(f"phone {serial} is '{states[serial]}', not ready",
                             hint="unlock it and accept the USB debugging prompt, or replug it")
    return AdbDevice(serial, settings, client, warn)


def list_phones() -> list[dict]:
    """Every phone the adb server lists: serial, state and, when ready, model, SoC, ABI, Android."""
    from specbench.world.devices.adb_link import adb_client, list_states

    client = adb_client()
    rows = []
    for serial, state in sorted(list_states(client).items()):
        row = {"serial": serial, "state": state, "model": "", "soc": "", "abi": "", "android": ""}
        if state == "device":
            try:
                ident = AdbDevice(serial, client=client)._identity()
                row |= {"model": ident["model"], "soc": ident["soc"], "abi": ident["abi"],
                        "android": f"{ident['android']} (SDK {ident['sdk']})" if ident["sdk"] else ident["android"]}
            except SpecbenchError as exc:
                row["state"] = f"device (unreadable: {exc})"
        rows.append(row)
    return rows
