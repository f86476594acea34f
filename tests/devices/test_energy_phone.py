"""Energy per request on the emulated phone on battery (docs/METHODS.md §10 Energy): the CLI, a
real adb server, the emulated phone whose current follows its CPU load (emuphone/power.py) and the
real runner, whose samples are attributed to each request on the clock both share."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from specbench.emuphone.description import parse_description
from specbench.emuphone.phone import EmulatedPhone, connected_phone
from specbench.schemas.results import load_results
from specbench.schemas.windows import make_text_window, save_windows
from tests.devices.test_adb_cli import invoke, windows_file

BATTERY_PHONE = Path(__file__).resolve().parents[1] / "data" / "phones" / "x86-battery-emu.yaml"
SLACK_S = 0.002
"""Between the model writing current_now and stamping its tick, and the runner stamping and reading."""


def native_run(serial, tiny, windows, out, *energy):
    return invoke("run", windows, "--device", serial, "--native", "--target", tiny.target, "--drafter",
                  f"near={tiny.near}", "--methods", "target,sd", "--out", out, *energy)


def jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def hold_bound_j(power, sample_times_s, start_s, end_s):
    """How far a sample-and-hold integral over [start, end] can be from the exact one: every step
    of the model's power in the interval is seen at most one sampling gap late."""
    around = [b - a for a, b in zip(sample_times_s, sample_times_s[1:], strict=False) if b >= start_s and a <= end_s]
    gap = max(around) + SLACK_S
    ticks = power.trace()
    watts = [t.draw_ua * t.voltage_uv * 1e-12 for t in ticks]
    steps = [abs(w - v) for t, v, w in zip(ticks[1:], watts, watts[1:], strict=False)
             if start_s - gap < t.time_s <= end_s + SLACK_S]
    return gap * sum(steps)


def test_each_requests_energy_is_the_power_models_integral_idle_subtracted(x86_battery_phone, demo_model_path,
                                                                           tmp_path):
    power = x86_battery_phone.phone.power
    # a real small model, so that a request spans several of the model's 0.1 s ticks
    windows = tmp_path / "windows.jsonl"
    save_windows(windows, [make_text_window(f"w{i}", text, "Repeat this text.", 24, "demo", "test")
                           for i, text in enumerate(["the cat sat on the mat", "one two three four five"])])
    code, output = invoke("run", windows, "--device", x86_battery_phone.serial, "--native", "--target",
                          demo_model_path("smollm2-135m"), "--drafter", "pld", "--method", "target",
                          "--method", "sd:W=4,drafter=pld", "--out", tmp_path / "run",
                          "--energy-interval", 20, "--energy-idle", 1)
    assert code == 0, output
    assert "no energy source" not in output
    manifest, rows = load_results(tmp_path / "run")
    energy = manifest.energy
    assert (energy.convention, energy.detected, energy.status) == ("uA,uV,discharging_negative", True, "Discharging")
    samples = [s for line in jsonl(tmp_path / "run" / "energy_samples.jsonl") if line["kind"] == "energy"
               for s in line["samples"]]
    times_s = [s[0] * 1e-6 for s in samples]
    assert energy.samples == len(samples) and times_s == sorted(times_s)
    # the idle period: the model's exact mean power there, within the sampling bound
    idle_start, idle_end = energy.idle_start_us * 1e-6, energy.idle_end_us * 1e-6
    idle_exact_w = power.energy_j(idle_start, idle_end) / (idle_end - idle_start)
    idle_bound_w = hold_bound_j(power, times_s, idle_start, idle_end) / (idle_end - idle_start)
    assert energy.idle_w == pytest.approx(idle_exact_w, abs=idle_bound_w + 1e-9)
    assert energy.idle_samples >= 40  # 1 s at 20 ms
    clocks = {(c["config"], c["window_id"]): c for c in jsonl(tmp_path / "run" / "request_clocks.jsonl")}
    assert len(clocks) == len(rows) == 4
    for row in rows.itertuples():
        clock = clocks[(row.config, row.window_id)]
        start, end = clock["start_us"] * 1e-6, clock["end_us"] * 1e-6
        exact = power.energy_j(start, end)
        bound = hold_bound_j(power, times_s, start, end)
        assert row.energy_j == pytest.approx(exact, abs=bound + 1e-9), (row.config, row.window_id)
        above_exact = exact - idle_exact_w * (end - start)
        assert row.energy_above_idle_j == pytest.approx(above_exact, abs=bound + idle_bound_w * (end - start) + 1e-9)
        assert row.energy_samples == sum(start <= t <= end for t in times_s)
    # the decodes kept a CPU busy at the model's ticks: the draw above idle is positive in total
    assert rows["energy_above_idle_j"].sum() > 0 and rows["energy_samples"].sum() > 0


def battery_phone(adb_server, root, **model):
    raw = yaml.safe_load(BATTERY_PHONE.read_text())
    raw["battery"]["power_model"].update(model)
    return connected_phone(adb_server, EmulatedPhone(parse_description(raw), root))


def test_current_in_ma_declared_as_ua_is_one_line_error(adb_server, runner, tiny, tmp_path, monkeypatch):
    monkeypatch.setenv("ANDROID_ADB_SERVER_PORT", str(adb_server.port))
    windows = windows_file(tmp_path / "windows.jsonl")
    with battery_phone(adb_server, tmp_path / "phone", unit="mA") as handle:
        code, output = native_run(handle.serial, tiny, windows, tmp_path / "run", "--energy-interval", 20,
                                  "--energy-idle", 0.2, "--energy-convention", "uA,uV,discharging_negative")
        assert code == 1
        line = output.strip().splitlines()[-1]
        assert line.startswith("Error: --energy-convention uA,uV,discharging_negative (declared): median battery power")
        assert "is not what a phone draws (0.02..40.0 W)" in line and "mA,uV,discharging_negative gives" in line
        assert not (tmp_path / "run").exists()  # no row with a wrong unit, and nothing a rerun would call a resume
        # undeclared, the same phone's unit is detected
        code, output = native_run(handle.serial, tiny, windows, tmp_path / "detected", "--energy-interval", 20,
                                  "--energy-idle", 0.2)
        assert code == 0, output
        manifest, rows = load_results(tmp_path / "detected")
        assert manifest.energy.convention == "mA,uV,discharging_negative" and rows["energy_j"].notna().all()
