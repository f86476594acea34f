"""docs/FARMS.md's recipe, run as written by bash: two emulated phones behind an adb server on
a non-default port, `adb connect`ed by the recipe, profiled and run on in parallel through
`--adb-host/--adb-port`. Only the values of the block's variables are replaced."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from specbench.emuphone.phone import EmulatedPhone, load_description
from specbench.schemas.fileio import safe_name
from specbench.schemas.profiles import load_profile
from specbench.schemas.windows import make_text_window, save_windows
from tests.devices.phones import PHONES_DIR

REPO = Path(__file__).resolve().parents[2]
FARMS = REPO / "docs" / "FARMS.md"
ASSIGNMENT = re.compile(r"^([A-Z_]+)=\S+(\s+#.*)?$")


def recipe_block() -> str:
    """The first ```sh block under '## The recipe'."""
    text = FARMS.read_text(encoding="utf-8")
    section = text.split("\n## The recipe\n", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```sh\n(.*?)```", section, re.S).group(1)


def with_values(block: str, values: dict[str, str]) -> str:
    """The block with each `NAME=value` line's value replaced; every variable must be given."""
    lines, assigned = [], []
    for line in block.splitlines():
        match = ASSIGNMENT.match(line)
        if match:
            assigned.append(match.group(1))
            line = f"{match.group(1)}={values[match.group(1)]}"
        lines.append(line)
    assert sorted(assigned) == sorted(values), f"docs/FARMS.md recipe sets {assigned}"
    return "\n".join(lines) + "\n"


def test_the_farm_recipe_profiles_and_runs_every_phone(adb_server, runner, tiny, tmp_path):
    phones = [EmulatedPhone(load_description(PHONES_DIR / "x86-emu.yaml"), tmp_path / f"phone{i}").start()
              for i in (1, 2)]
    serials = [phone.serial for phone in phones]
    work = tmp_path / "work"
    work.mkdir()
    save_windows(work / "windows.jsonl", [make_text_window(f"w{i}", text, "Repeat this.", 6, "tiny", "test")
                                          for i, text in enumerate(["hello the world", "in the heat"])])
    tools = tmp_path / "bin"  # `specbench` is this checkout's CLI, `adb` the test server's binary
    tools.mkdir()
    (tools / "specbench").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m specbench "$@"\n')
    (tools / "specbench").chmod(0o755)
    (tools / "adb").symlink_to(adb_server.adb_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANDROID_ADB_SERVER")}  # the flags name it
    env.update(PATH=f"{tools}:{env['PATH']}", PYTHONPATH=str(REPO), ADB_MDNS="0", ADB_LIBUSB="0")
    script = with_values(recipe_block(), {
        "ADB_HOST": "127.0.0.1", "ADB_PORT": str(adb_server.port), "PHONES": ",".join(serials),
        "TARGET": str(tiny.target), "DRAFTER": str(tiny.near), "WINDOWS": "windows.jsonl",
        "MAX_WIDTH": "3", "DEPTHS": "0"})  # the recipe as written, on fewer cells
    try:
        result = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=work, env=env,
                                capture_output=True, text=True, timeout=600)
    finally:
        for phone in phones:
            adb_server.adb("disconnect", phone.serial, check=False)
            phone.stop()
    assert result.returncode == 0, result.stdout + result.stderr
    listed = [line.split()[0] for line in result.stdout.splitlines() if line.startswith("127.0.0.1:")]
    assert sorted(listed) == sorted(serials)  # `specbench devices` through --adb-host/--adb-port

    assert sorted(p.name for p in (work / "device_profiles").glob("*.yaml")) == sorted(
        f"farm-{safe_name(s)}.yaml" for s in serials)
    assert sorted(p.name for p in (work / "results" / "farm").iterdir()) == sorted(safe_name(s) for s in serials)
    for serial in serials:
        profile = load_profile(work / "device_profiles" / f"farm-{safe_name(serial)}.yaml")
        assert profile.device.facts["serial"] == serial and profile.target_costs.widths() == [1, 2, 3]
        rows = [json.loads(line) for line in
                (work / "results" / "farm" / safe_name(serial) / "rows.jsonl").read_text().splitlines()]
        assert {r["device"] for r in rows} == {f"{serial}@shared"} and {r["method"] for r in rows} == {"target", "sd"}
        configs = {r["config"] for r in rows}  # every configuration decoded every window once
        assert sorted((r["config"], r["window_id"]) for r in rows) == sorted(
            (config, window) for config in configs for window in ("w0", "w1"))
