"""Regenerate the sustained-load golden results and tables (docs/METHODS.md §6.3 Sustained load).

Two sustained runs of the demo model smollm2-135m on the heating emulated phone
(tests/data/phones/x86-hot-emu.yaml) through a private adb server: target-only and sd[W=3] with
prompt lookup (drafter pld), requests back to back for 4 s per stream, with the phone cooling down
below 33 °C between the two streams (`cooldown/`) and without (`no-cooldown/`); then the report's sustained
tables as `report.md`. Run from the repository root with the runner built and the demo model
cached (`specbench demo` fetches it):

    PYTHONPATH=$PWD .venv/bin/python tests/data/golden/sustained/regenerate.py

and read the diff before committing it (the timings are the host's: only the shape is fixed).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from click.testing import CliRunner

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[3]
sys.path.insert(0, str(ROOT))

from specbench.app.report.sustained import sustained_tables  # noqa: E402
from specbench.cli import main  # noqa: E402
from specbench.emuphone.phone import (  # noqa: E402
    EmulatedPhone,
    connected_phone,
    free_port,
    load_description,
    private_adb_server,
)
from specbench.render.tables import render  # noqa: E402
from specbench.schemas.windows import make_text_window, save_windows  # noqa: E402
from specbench.world.demo_models import demo_model  # noqa: E402

RUNS = {"cooldown": ["--cooldown-temp", "33"], "no-cooldown": ["--no-cooldown"]}


def golden_tables(directories: list[Path]) -> str:
    """What report.md holds: the sustained tables of the golden runs, as markdown."""
    return render(sustained_tables(directories), "md")


def main_() -> None:
    work = Path(tempfile.mkdtemp(prefix="specbench-sustained-golden-"))
    target = demo_model("smollm2-135m", download=False)
    windows = work / "windows.jsonl"
    save_windows(windows, [make_text_window(f"w{i}", t, "Repeat this text.", 12, "golden", "test")
                           for i, t in enumerate(["the phone warms up", "a request every second",
                                                  "throttled at last"])])
    description = load_description(ROOT / "tests" / "data" / "phones" / "x86-hot-emu.yaml")
    port = free_port()  # one serial for both runs: the same phone, once cool and once not
    with private_adb_server() as server:
        os.environ["ANDROID_ADB_SERVER_PORT"] = str(server.port)
        for name, extra in RUNS.items():
            with connected_phone(server, EmulatedPhone(description, work / f"phone-{name}", port=port)) as phone:
                out = HERE / name
                shutil.rmtree(out, ignore_errors=True)
                result = CliRunner().invoke(main, [
                    "run", str(windows), "--native", "--device", phone.serial, "--target", str(target),
                    "--drafter", "pld", "--methods", "target,sd", "--method", "sd:W=3",
                    "--sustained", "4s", "--pace", "back-to-back", "--cooldown-max", "60", *extra, "--out", str(out)])
                if result.exit_code:
                    raise SystemExit(result.output)
    (HERE / "report.md").write_text(golden_tables([HERE / name for name in RUNS]))
    shutil.rmtree(work)


if __name__ == "__main__":
    main_()
