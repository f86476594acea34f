"""The emulated phone through a real adb server, driven with adbutils as a USB phone would be."""

from __future__ import annotations

import os
import shutil
import stat
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from specbench.emuphone.phone import FEATURES, device_state

adbutils = pytest.importorskip("adbutils")
AdbError = adbutils.AdbError

WORK = "/data/local/tmp/specbench"


def test_listed_with_state_device(emulated_phone):
    serial, phone, client = emulated_phone
    assert device_state(client, serial) == "device"
    assert client.device(serial).get_state() == "device"


def test_advertises_only_implemented_features(emulated_phone):
    features = set(emulated_phone.device.get_features().split(","))
    assert features == set(FEATURES)
    assert {"stat_v2", "delayed_ack"}.isdisjoint(features)


def test_getprop_answers_from_description(emulated_phone):
    d = emulated_phone.device
    assert d.getprop("ro.product.model") == "Pixel 8 (emulated)"
    assert d.getprop("ro.soc.model") == "Tensor G3"
    assert d.getprop("ro.product.cpu.abi") == "arm64-v8a"
    assert d.getprop("ro.build.version.sdk") == "34"
    assert d.getprop("ro.build.fingerprint").startswith("google/shiba/shiba:14/")
    assert d.getprop("no.such.prop") == ""
    assert "[ro.board.platform]: [zuma]" in d.shell("getprop")


def test_sysfs_and_dumpsys_answer_from_description(emulated_phone):
    d = emulated_phone.device
    max_freqs = d.shell("cat /sys/devices/system/cpu/cpu*/cpufreq/cpuinfo_max_freq").split()
    assert max_freqs == ["1704000"] * 4 + ["2367000"] * 4 + ["2910000"]
    assert d.shell("cat /sys/devices/system/cpu/cpufreq/policy4/related_cpus") == "4 5 6 7"
    assert d.shell("cat /sys/devices/system/cpu/cpu8/cpufreq/scaling_governor") == "sched_pixel"
    assert d.shell("cat /sys/class/thermal/thermal_zone0/type /sys/class/thermal/thermal_zone0/temp") == "BIG\n41500"
    assert d.shell("cat /sys/class/power_supply/battery/capacity") == "85"
    thermal = d.shell("dumpsys thermalservice")
    assert "Thermal Status: 0" in thermal
    assert "Temperature{mValue=41.5, mType=0, mName=BIG, mStatus=0}" in thermal
    battery = d.battery()
    assert (battery.level, battery.temperature, battery.usb_powered) == (85, 30.5, True)


def test_shell_v2_exit_codes_and_separate_stderr(emulated_phone):
    d = emulated_phone.device
    result = d.shell2("echo out; echo err >&2; exit 3", v2=True)
    assert (result.returncode, result.stdout, result.stderr) == (3, "out\n", "err\n")
    assert d.shell2("true", v2=True).returncode == 0
    assert d.shell2("kill -9 $$", v2=True).returncode == 137


def test_shell_v1_merges_stderr(emulated_phone):
    assert emulated_phone.device.shell("echo out; echo err >&2") == "out\nerr"


def test_push_3mb_with_mode_and_pull_back_identical(emulated_phone, tmp_path):
    d = emulated_phone.device
    payload = os.urandom(3 * 1024 * 1024 + 17)
    (tmp_path / "blob").write_bytes(payload)
    assert d.sync.push(str(tmp_path / "blob"), f"{WORK}/blob", mode=0o755) == len(payload)
    info = d.sync.stat(f"{WORK}/blob")
    assert stat.S_ISREG(info.mode) and stat.S_IMODE(info.mode) == 0o755
    assert info.size == len(payload)
    assert d.sync.pull(f"{WORK}/blob", str(tmp_path / "back")) == len(payload)
    assert (tmp_path / "back").read_bytes() == payload
    # the bytes really are in the sandbox, at the mapped path
    assert (emulated_phone.phone.sandbox.host_path(f"{WORK}/blob")).read_bytes() == payload


def test_stat_and_list(emulated_phone):
    d = emulated_phone.device
    d.sync.push(b"hello", f"{WORK}/a.txt", mode=0o644)
    assert stat.S_ISDIR(d.sync.stat(WORK).mode)
    assert d.sync.stat(f"{WORK}/missing").mtime is None
    assert not d.sync.exists(f"{WORK}/missing")
    names = {entry.path for entry in d.sync.list(WORK)}
    assert names == {".", "..", "a.txt"}
    assert d.sync.read_text(f"{WORK}/a.txt") == "hello"


def test_pull_of_missing_file_fails(emulated_phone):
    with pytest.raises(AdbError, match="No such file"):
        emulated_phone.device.sync.read_bytes(f"{WORK}/missing")


def test_push_and_execute_script(emulated_phone):
    d = emulated_phone.device
    script = b'echo "args:$#:$1"\necho "cwd:$(pwd)"\nexit 5\n'  # no shebang: see emuphone.sandbox
    d.sync.push(script, f"{WORK}/run.sh", mode=0o755)
    result = d.shell2(f"cd {WORK} && ./run.sh 'one arg'", v2=True)
    assert result.returncode == 5
    assert result.stdout.splitlines() == ["args:1:one arg", f"cwd:{WORK}"]


def test_push_and_run_native_binary(emulated_phone):
    d = emulated_phone.device
    d.sync.push(shutil.which("printf"), f"{WORK}/runner", mode=0o755)  # a host ELF stands in
    result = d.shell2([f"{WORK}/runner", "%s-%s", "tok", "42"], v2=True)
    assert (result.returncode, result.stdout) == (0, "tok-42")


def test_arguments_with_spaces_and_quotes_pass_intact(emulated_phone, tmp_path):
    marker = tmp_path / "pwned"
    args = [f"a b; touch {marker}", "it's", 'say "hi"', "$HOME", "`id`", "x\\y"]
    result = emulated_phone.device.shell2(["printf", "%s|", *args], v2=True)
    assert result.returncode == 0
    assert result.stdout == "|".join(args) + "|"
    assert not marker.exists()


def test_adb_command_line_works_too(emulated_phone, adb_server, tmp_path):
    (tmp_path / "f").write_bytes(b"x" * 1000)
    pushed = adb_server.adb("-s", emulated_phone.serial, "push", str(tmp_path / "f"), "/sdcard/f")
    assert "1 file pushed" in pushed.stdout + pushed.stderr
    shell = adb_server.adb("-s", emulated_phone.serial, "shell", "wc -c < /sdcard/f; exit 2", check=False)
    assert (shell.returncode, shell.stdout.strip()) == (2, "1000")


def test_client_giving_up_kills_the_command(emulated_phone):
    """adbutils never kills a timed-out command; the phone does when the stream closes, like adbd."""
    d = emulated_phone.device
    with pytest.raises(adbutils.AdbTimeout):
        d.shell(f"echo $$ > {WORK}.pid; exec sleep 30", timeout=0.5)
    pid = int(emulated_phone.phone.sandbox.host_path(f"{WORK}.pid").read_text())
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)


def test_concurrent_commands(emulated_phone):
    d = emulated_phone.device
    with ThreadPoolExecutor(8) as pool:
        outputs = list(pool.map(lambda i: d.shell2(f"sleep 0.2; echo {i}", v2=True).stdout, range(8)))
    assert outputs == [f"{i}\n" for i in range(8)]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
