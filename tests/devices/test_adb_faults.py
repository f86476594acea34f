"""AdbDevice under faults injected into the emulated phone, through the real adb server:
an unplugged phone mid-run, dropped transfers, a crashing runner, a wrong ABI, a full
disk, hostile shell arguments, a cancelled job, a hot phone."""

from __future__ import annotations

import json
import os
import shlex
import time

import pytest

from specbench.app.options import configs_from
from specbench.emuphone.phone import wait_for_state
from specbench.errors import SpecbenchError
from specbench.schemas.placement import resolve
from specbench.schemas.windows import make_text_window
from specbench.world.decode_run import NativePlan, run_native
from specbench.world.devices.adb import WORKDIR, AdbDevice, AdbSettings, open_adb_device
from specbench.world.model_files import parse_named, target_file

RUNNER = f"{WORKDIR}/specbench-runner"


def sends(phone) -> list[str]:
    return [path.rpartition(",")[0] for request, path in phone.sync_requests if request == "SEND"]


def sweep(device: AdbDevice, model, repetitions: int = 5) -> dict:
    return {"mode": "sweep", "target": {"path": device.model_path(model)}, "widths": [1, 2], "depths": [0],
            "repetitions": repetitions}


def test_offline_mid_run_keeps_rows_and_resume_finishes(x86_phone, tiny, tmp_path):
    serial, phone, client = x86_phone
    windows = [make_text_window(f"w{i}", t, "Repeat this.", 8, "tiny", "test")
               for i, t in enumerate(["hello the world", "in the heat", "a tale of the tin", "the end"])]
    device = open_adb_device(serial)
    plan = NativePlan(device, windows, target_file(tiny.target), (parse_named(f"near={tiny.near}"),),
                      configs_from("target,sd", ("sd:W=3",), "near"), resolve("shared", device.cpus(), device.processors()))
    out = tmp_path / "results"
    done = []

    def unplug_after_first(n: int) -> None:
        done.append(n)
        if len(done) == 1:
            phone.go_offline()

    with pytest.raises(SpecbenchError, match=f"phone {serial}: .*failed.*--resume"):
        run_native(plan, out, resume=False, progress=unplug_after_first)
    kept = (out / "rows.jsonl").read_text().splitlines()
    # whole windows only, none lost (the runner may have finished the rest before the cable went:
    # the run then fails on its closing snapshot and resume has nothing left to do)
    assert 2 <= len(kept) <= 8 and len(kept) % 2 == 0
    phone.go_online()
    assert wait_for_state(client, serial, "device", timeout_s=20)
    added = run_native(plan, out, resume=True).added
    rows = [json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines()]
    assert added == 8 - len(kept) and len(rows) == 8
    assert sorted((r["window_id"], r["config"]) for r in rows) == sorted(
        (w.window_id, c.label) for w in windows for c in plan.configs)


def test_dropped_runner_push_is_retried_and_verified(x86_phone, runner):
    serial, phone, _ = x86_phone
    phone.drop_next_transfer(2_000_000, service_prefix="sync:", how="connection")
    device = open_adb_device(serial)
    assert device.runner().protocol == 1
    assert sends(phone) == [f"{RUNNER}.part", f"{RUNNER}.part"]  # cut once, sent again
    on_phone = phone.sandbox.host_path(RUNNER)
    assert on_phone.read_bytes() == runner.read_bytes() and not on_phone.with_name("specbench-runner.part").exists()
    # a second session finds the same sha256 on the phone and sends nothing
    assert AdbDevice(serial).runner().sha256 == device.runner().sha256 and len(sends(phone)) == 2


def test_a_transfer_that_keeps_failing_is_a_clear_error_and_nothing_runs(x86_phone):
    serial, phone, _ = x86_phone
    for _ in range(3):
        phone.drop_next_transfer(1_000_000, service_prefix="sync:", how="stream")
    with pytest.raises(SpecbenchError, match=f"phone {serial}: could not push specbench-runner intact after 3"):
        open_adb_device(serial).runner()
    assert not phone.sandbox.host_path(RUNNER).exists()  # never a short runner under the real name
    assert not any("job.json" in c for c in phone.commands)  # no job ever started


def test_runner_crash_shows_its_stderr(x86_phone, tiny):
    serial, phone, _ = x86_phone
    device = open_adb_device(serial)
    job = sweep(device, tiny.target)
    phone.fail_next_commands(139, match="job.json")  # as a segfault: 128 + SIGSEGV
    with pytest.raises(SpecbenchError, match=r"runner on .* exited with signal 11 on a sweep job "
                                             r"\[stderr: emuphone: injected failure \(exit 139\)\]"):
        device.run_job(job)


def test_runner_error_line_and_hint_come_through(x86_phone, tiny):
    device = open_adb_device(x86_phone.serial)
    with pytest.raises(SpecbenchError, match="unknown job key 'captain'") as caught:
        device.run_job(sweep(device, tiny.target) | {"captain": 1})
    assert caught.value.hint


def test_wrong_abi_names_it_and_how_to_build(x86_phone):
    x86_phone.phone.set_abi("mips")
    with pytest.raises(SpecbenchError, match="no specbench-runner for ABI mips") as caught:
        open_adb_device(x86_phone.serial).runner()
    assert "specbench build-runner --android-ndk" in caught.value.hint


def test_no_space_left_is_one_clear_error(x86_phone, tiny):
    x86_phone.phone.set_free_space(100_000)
    with pytest.raises(SpecbenchError, match="refused specbench-runner .* usually no space left"):
        open_adb_device(x86_phone.serial).runner()
    assert not x86_phone.phone.sandbox.host_path(RUNNER + ".part").exists()


def test_arguments_with_spaces_and_quotes_are_not_injected(x86_phone, tmp_path):
    serial, phone, _ = x86_phone
    device = open_adb_device(serial)
    evil = "it's a \"model\" $(touch pwned) `touch pwned2`; touch pwned3.gguf"
    assert device.link.shell(f"printf %s {shlex.quote(evil)}", "echoing").stdout == evil
    local = tmp_path / evil.replace("/", "_")
    local.write_bytes(os.urandom(1000))
    remote = f"{WORKDIR}/{evil}"
    from specbench.schemas.fileio import file_sha256

    assert device.link.push_verified(local, remote, file_sha256(local), 0o644)
    assert phone.sandbox.host_path(remote).read_bytes() == local.read_bytes()
    assert not any(p.name.startswith("pwned") for p in phone.sandbox.root.rglob("pwned*"))


def test_cancel_kills_the_remote_runner(x86_phone, tiny):
    serial, phone, _ = x86_phone
    device = open_adb_device(serial)
    pid_file = phone.sandbox.host_path(f"{WORKDIR}/job.pid")
    seen = []

    def cancel_on_first_line(doc: dict) -> None:
        if not seen:
            seen.append(int(pid_file.read_text()))
            device.cancel()

    with pytest.raises(SpecbenchError, match="sweep job was cancelled; the runner was killed"):
        device.run_job(sweep(device, tiny.target, repetitions=5000), cancel_on_first_line)
    for _ in range(100):  # the phone reaps it a moment later
        try:
            os.kill(seen[0], 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"runner pid {seen[0]} still alive")


def test_hot_phone_waits_then_warns(x86_phone, tiny):
    serial, phone, _ = x86_phone
    warnings = []
    device = open_adb_device(serial)
    device.settings = AdbSettings(cooldown_max_s=0.2, cooldown_poll_s=0.05)
    device.warn = warnings.append
    # the phone heats up during the first job; the second waits for it, then warns
    device.run_job(sweep(device, tiny.target), lambda doc: phone.set_thermal(status=3, temps_c={"BIG": 52.0}))
    device.run_job(sweep(device, tiny.target))
    jobs = device.snapshot()["jobs"]
    cooldown = [j["cooldown"] for j in jobs if "cooldown" in j]
    assert len(cooldown) == 1 and not cooldown[0]["ok"] and "still hot" in warnings[0]
    assert "thermal status 3, hottest zone 52.0" in cooldown[0]["warning"]
    runs = [j for j in jobs if "mode" in j]
    assert runs[0]["after"]["thermal"]["status"] == 3 and runs[1]["before"]["thermal"]["status"] == 3


def test_job_timeout_kills_the_runner_and_says_so(x86_phone, tiny):
    device = open_adb_device(x86_phone.serial)
    job = sweep(device, tiny.target, repetitions=20000)  # seconds of work; the timeout is far shorter
    device.settings = AdbSettings(job_timeout_s=0.5)
    with pytest.raises(SpecbenchError, match="sweep job timed out; the runner was killed"):
        device.run_job(job)
    assert not x86_phone.phone.sandbox.host_path(f"{WORKDIR}/job.pid").exists()
