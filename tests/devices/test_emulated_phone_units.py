"""The emulated phone's pure parts: wire format, description schema, sandbox path mapping, CLI."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from specbench.emuphone import wire
from specbench.emuphone.phone import EmulatedPhone, load_description, main, parse_description
from specbench.emuphone.sandbox import OutputUnmapper, Sandbox
from specbench.errors import SchemaError, SpecbenchError

PIXEL = Path(__file__).resolve().parents[1] / "data" / "phones" / "pixel-emu.yaml"


# --- wire ---
def test_header_roundtrip_and_magic_check():
    packet = wire.pack(wire.A_WRTE, 3, 7, b"abc")
    assert len(packet) == wire.HEADER_BYTES + 3
    assert wire.unpack_header(packet[:24]) == (wire.A_WRTE, 3, 7, 3)
    broken = packet[:20] + b"\0\0\0\0"
    with pytest.raises(wire.ProtocolError, match="magic"):
        wire.unpack_header(broken)
    with pytest.raises(wire.ProtocolError, match="exceeds"):
        wire.unpack_header(wire.pack(wire.A_WRTE, 1, 1, b"x" * 10)[:24], max_payload_bytes=4)


def test_shell_v2_and_sync_framing():
    assert wire.shell_packet(wire.SHELL_EXIT, b"\x03") == b"\x03\x01\x00\x00\x00\x03"
    assert wire.sync_fail("No space") == b"FAIL\x08\x00\x00\x00No space"
    assert len(wire.SYNC_LIST_DONE) == 20


# --- description ---
def test_pixel_description_loads():
    d = load_description(PIXEL)
    assert (d.model, d.abi, d.android_sdk, d.cpu_count) == ("Pixel 8 (emulated)", "arm64-v8a", 34, 9)
    assert d.props()["ro.build.id"] == "UQ1A.240205.004"
    assert d.with_abi("x86").props()["ro.product.cpu.abilist"] == "x86"


@pytest.mark.parametrize("path, value, message", [
    (("format_version",), 2, "key 'format_version': expected 1, got 2"),
    (("cpu", "clusters", 0, "max_freq_khz"), "fast", "key 'cpu.clusters[0].max_freq_khz': expected a int"),
    (("battery", "charging"), "solar", "key 'battery.charging': expected one of none, usb, ac, wireless"),
    (("thermal", "status"), 9, "key 'thermal.status': expected an integer 0..6"),
    (("abilist",), [], "key 'abilist': expected a non-empty list"),
])
def test_description_errors_name_the_key(path, value, message):
    raw = yaml.safe_load(PIXEL.read_text())
    target = raw
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(SchemaError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_description(raw, source="phone.yaml")


def test_missing_key_is_named():
    raw = yaml.safe_load(PIXEL.read_text())
    del raw["storage"]["free_bytes"]
    with pytest.raises(SchemaError, match="'storage.free_bytes'.*missing"):
        parse_description(raw)


# --- sandbox ---
def test_sync_paths_stay_inside_root(tmp_path):
    box = Sandbox(tmp_path)
    assert box.host_path("/data/local/tmp/x") == tmp_path / "data/local/tmp/x"
    assert box.host_path("/storage/emulated/0/a") == tmp_path / "sdcard/a"
    assert box.host_path("/../../etc/passwd") == tmp_path / "etc/passwd"
    assert box.host_path("/") == tmp_path


def test_command_rewrite_maps_device_roots_only(tmp_path):
    box = Sandbox(tmp_path)
    root = str(tmp_path)
    assert box.rewrite_command("cd /data/local/tmp/sb && ./r > /dev/null") == \
        f"cd {root}/data/local/tmp/sb && ./r > /dev/null"
    assert box.rewrite_command("LD_LIBRARY_PATH=/data/local/tmp/l cat '/sdcard/a b'") == \
        f"LD_LIBRARY_PATH={root}/data/local/tmp/l cat '{root}/sdcard/a b'"
    assert box.rewrite_command("ls /sys/class/thermal/thermal_zone*/temp") == \
        f"ls {root}/sys/class/thermal/thermal_zone*/temp"
    assert box.rewrite_command("ls /storage/emulated/0") == f"ls {root}/sdcard"
    # neither a longer name nor a path that merely ends the same way
    assert box.rewrite_command("ls /data/local/tmpx /x/data/local/tmp") == "ls /data/local/tmpx /x/data/local/tmp"


def test_root_needing_quotes_is_refused(tmp_path):
    with pytest.raises(SpecbenchError, match="quoting"):
        Sandbox(tmp_path / "a b")


def test_output_unmapper_handles_split_root():
    unmapper = OutputUnmapper(b"/tmp/r")
    text = b"/tmp/r/data/x\n/tmp/r\n/tmp/rx /tmp/r/tmp/r/ /tmp/r"
    expected = b"/data/x\n/\n/tmp/rx /tmp/r/ /"
    for step in (1, 2, 5, len(text)):
        out = b"".join(unmapper.feed(text[i:i + step]) for i in range(0, len(text), step)) + unmapper.flush()
        assert out == expected, step


def test_reserved_port_refused(tmp_path):
    with pytest.raises(SpecbenchError, match="5555-5585"):
        EmulatedPhone(load_description(PIXEL), tmp_path, port=5555)


# --- command line ---
def test_cli_bad_description_is_one_clean_line(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("format_version: 1\nmodel: [unclosed\n")
    assert main(["--description", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {bad}: key '<file>': expected valid YAML")


def test_cli_serves_until_sigterm(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "specbench.emuphone.phone", "--description", str(PIXEL),
                             "--sandbox", str(tmp_path / "phone")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("serving Pixel 8 (emulated) at 127.0.0.1:")
        assert (tmp_path / "phone/system/bin/getprop").exists()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    assert os.path.isdir(tmp_path / "phone/data/local/tmp")


# --- load ---
def test_a_process_seen_before_its_exec_counts_once_it_runs_in_the_sandbox(tmp_path):
    from specbench.emuphone.load import SandboxLoad

    # seen first between fork and exec (the parent's environment, no sandbox marker), then exec'd into a busy
    # loop with the sandbox's environment, as a runner an adb shell starts; a once-only look would miss it
    root = tmp_path / "phone"
    ready = tmp_path / "ready"
    code = f"import os, pathlib; pathlib.Path({str(ready)!r}).write_text('1'); " \
           f"os.execve('/bin/sh', ['sh', '-c', 'while :; do :; done'], " \
           f"dict(os.environ, EMUPHONE_ROOT={str(root)!r}))"
    load = SandboxLoad(root)
    env = {k: v for k, v in os.environ.items() if k != "EMUPHONE_ROOT"}
    child = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep(0.5); {code}"], env=env)
    try:
        assert load.running_threads() == 0  # the child, asleep, without the marker: remembered as not ours
        deadline = time.monotonic() + 10
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        busy = 0
        while busy == 0 and time.monotonic() < deadline:  # the exec'd loop, runnable at some tick
            time.sleep(0.05)
            busy = load.running_threads()
        assert busy >= 1
    finally:
        child.kill()
        child.wait()
