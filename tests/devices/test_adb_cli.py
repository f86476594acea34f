"""`specbench devices | profile SERIAL | run --native --device SERIAL` end to end: the CLI,
adbutils, a real adb server, the emulated phone and the real runner on the tiny models."""

from __future__ import annotations

import json

from click.testing import CliRunner

from specbench.cli import main
from specbench.schemas.environment import manifest_environment
from specbench.schemas.fileio import Where, file_sha256
from specbench.schemas.profiles import load_profile
from specbench.schemas.windows import make_text_window, save_windows

TEXTS = ["hello the world", "in the heat", "a tale of the tin"]


def invoke(*args):
    result = CliRunner().invoke(main, [str(a) for a in args])
    return result.exit_code, result.output


def windows_file(path):
    save_windows(path, [make_text_window(f"w{i}", t, "Repeat this.", 8, "tiny", "test") for i, t in enumerate(TEXTS)])
    return path


def rows(directory):
    return [json.loads(line) for line in (directory / "rows.jsonl").read_text().splitlines()]


def test_devices_lists_the_phone_with_its_identity(x86_phone):
    code, output = invoke("devices")
    assert code == 0, output
    header, line = output.splitlines()
    assert header.split() == ["SERIAL", "STATE", "MODEL", "SOC", "ABI", "ANDROID"]
    assert line.startswith(f"{x86_phone.serial}  device  Test Phone x86 (emulated)  EMU-X2  x86_64  14 (SDK 34)")
    code, output = invoke("devices", "--json")
    assert json.loads(output) == {"serial": x86_phone.serial, "state": "device", "model": "Test Phone x86 (emulated)",
                                  "soc": "EMU-X2", "abi": "x86_64", "android": "14 (SDK 34)"}


def test_adb_port_flag_names_the_server(x86_phone, adb_server, monkeypatch):
    monkeypatch.delenv("ANDROID_ADB_SERVER_PORT")
    code, output = invoke("devices", "--json", "--adb-port", adb_server.port)
    assert code == 0 and json.loads(output)["serial"] == x86_phone.serial


def test_profile_pushes_sweeps_coschedules_and_snapshots_the_phone(x86_phone, tiny, tmp_path):
    out = tmp_path / "phone.yaml"
    code, output = invoke("profile", x86_phone.serial, "--target", tiny.target, "--drafter", f"near={tiny.near}",
                          "--max-width", 3, "--depths", "0", "--repetitions", 40, "--out", out)
    assert code == 0, output
    profile = load_profile(out)
    facts = profile.device.facts
    assert facts["model"] == "Test Phone x86 (emulated)" and facts["soc"] == "EMU-X2"
    assert facts["abi"] == "x86_64" and facts["pinned_cpus"] == [1]
    assert profile.target_costs.widths() == [1, 2, 3] and profile.drafter("near").cosched
    before, after = profile.snapshot.before, profile.snapshot.after
    assert before["battery"] == {"level_percent": 77, "temp_c": 29.0, "charging": "usb"}
    assert before["thermal"]["status"] == 0 and before["thermal_c"]["thermal_zone0:BIG"] == 36.5
    assert [c["max_freq_khz"] for c in before["clusters"]] == [1800000, 2800000]
    jobs = after["jobs"]  # a snapshot before and after every job, and where its threads ran
    assert [j["mode"] for j in jobs][:3] == ["sweep", "sweep", "cosched"]  # last-row and all-rows sweeps (then overheads)
    assert all("before" in j and "after" in j and j["pinning"]["requested"] == [1] for j in jobs)
    # read while the runner ran: the co-scheduling job's 40 ABBA rounds last long enough (a sweep of the tiny
    # model may end before its threads are read); CPU 1 exists on any 2-core host
    cosched = next(j for j in jobs if j["mode"] == "cosched")
    assert cosched["pinning"]["ok"] and cosched["pinning"]["observed"] == [[1]]
    runner_file = x86_phone.phone.sandbox.host_path("/data/local/tmp/specbench/specbench-runner")
    assert runner_file.stat().st_mode & 0o111 and profile.runner.sha256 == file_sha256(runner_file)
    phone = x86_phone.phone.description  # the environment names the phone as its getprop and sysfs do
    env = profile.environment.device
    assert (env.kind, env.soc, env.governor, env.cores) == ("adb", phone.soc_model, phone.cpu_governor, phone.cpu_count)
    assert env.details["board_platform"] == phone.board_platform and "jobs" not in env.snapshot["after"]
    assert [(m.role, m.sha256) for m in profile.environment.models] == [("target", file_sha256(tiny.target)),
                                                                        ("drafter", file_sha256(tiny.near))]


def test_native_run_on_the_phone_has_the_local_schema(x86_phone, tiny, tmp_path):
    windows = windows_file(tmp_path / "windows.jsonl")
    common = ["--native", "--target", tiny.target, "--drafter", f"near={tiny.near}", "--methods", "target,sd",
              "--method", "sd:W=3"]
    code, output = invoke("run", windows, "--device", x86_phone.serial, *common, "--out", tmp_path / "phone")
    assert code == 0, output
    code, output = invoke("run", windows, "--device", "local", *common, "--placement", "split", "--out", tmp_path / "local")
    assert code == 0, output
    phone_rows, local_rows = rows(tmp_path / "phone"), rows(tmp_path / "local")
    assert len(phone_rows) == len(local_rows) == 2 * len(TEXTS)
    assert [sorted(r) for r in phone_rows] == [sorted(r) for r in local_rows]
    assert {r["device"] for r in phone_rows} == {f"{x86_phone.serial}@shared"}
    assert [r["tokens"] for r in phone_rows] == [r["tokens"] for r in local_rows]  # greedy: same outputs
    manifests = [json.loads((tmp_path / d / "manifest.json").read_text()) for d in ("phone", "local")]
    assert sorted(manifests[0]) == sorted(manifests[1])
    snapshots = [json.loads(line) for line in (tmp_path / "phone" / "snapshots.jsonl").read_text().splitlines()]
    assert snapshots[0]["before"]["battery"]["level_percent"] == 77 and snapshots[1]["after"]["jobs"]
    phone_env, local_env = (manifest_environment(m, Where("manifest")) for m in manifests)
    phone = x86_phone.phone.description
    assert (phone_env.device.soc, phone_env.device.governor) == (phone.soc_model, phone.cpu_governor)
    assert phone_env.device.snapshot["before"] == snapshots[0]["before"]  # the same snapshot, not a second one
    assert local_env.device.kind == "local" and phone_env.device.name == x86_phone.serial
    # the same files loaded on the phone and here: llama.cpp describes them alike
    assert phone_env.models == local_env.models and [m.role for m in phone_env.models] == ["target", "drafter"]
    runner_file = x86_phone.phone.sandbox.host_path("/data/local/tmp/specbench/specbench-runner")
    assert phone_env.runner.sha256 == file_sha256(runner_file) == local_env.runner.sha256


def test_two_phones_are_profiled_and_run_in_parallel(x86_phones, tiny, tmp_path):
    serials = [handle.serial for handle in x86_phones]
    code, output = invoke("profile", *serials, "--target", tiny.target, "--max-width", 2, "--depths", "0",
                          "--no-cosched", "--out", tmp_path / "p.yaml")
    assert code == 0, output
    for serial in serials:
        profile = load_profile(tmp_path / f"p-{serial.replace(':', '-')}.yaml")
        assert profile.device.facts["serial"] == serial
    windows = windows_file(tmp_path / "windows.jsonl")
    code, output = invoke("run", windows, "--device", ",".join(serials), "--native", "--target", tiny.target,
                          "--methods", "target", "--out", tmp_path / "runs")
    assert code == 0, output
    for serial in serials:
        assert {r["device"] for r in rows(tmp_path / "runs" / serial.replace(":", "-"))} == {f"{serial}@shared"}


def test_unknown_serial_lists_the_phones(x86_phone, tiny, tmp_path):
    code, output = invoke("profile", "nope:1", "--target", tiny.target, "--out", tmp_path / "p.yaml")
    assert code == 1 and f"Error: Unknown device 'nope:1'. Available: local, {x86_phone.serial}" in output


def test_bad_cores_flag_is_one_line_naming_it(x86_phone, tiny, tmp_path):
    code, output = invoke("profile", x86_phone.serial, "--target", tiny.target, "--cores", "9-12",
                          "--out", tmp_path / "p.yaml")
    assert code == 1 and "--cores '9-12': expected all, big, little, prime or CPU numbers" in output
    assert not (tmp_path / "p.yaml").exists()
