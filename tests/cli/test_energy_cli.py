"""`run --native --energy-*` on this host (no battery files): "no energy source" once, in the run
and in its report, no zeros written; and the energy flags' checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from specbench.cli import main
from specbench.schemas.results import load_results
from specbench.schemas.windows import make_text_window, save_windows
from specbench.world.native_energy import DEFAULT_PATHS


def invoke(*args):
    result = CliRunner().invoke(main, [str(a) for a in args])
    return result.exit_code, result.output


def native(tiny, tmp_path, *extra):
    windows = tmp_path / "windows.jsonl"
    save_windows(windows, [make_text_window(f"w{i}", t, "Repeat this.", 8, "tiny", "test")
                           for i, t in enumerate(["hello the world", "in the heat"])])
    return invoke("run", windows, "--device", "local", "--native", "--target", tiny.target, "--drafter",
                  f"near={tiny.near}", "--methods", "target,sd", "--out", tmp_path / "run", *extra)


def test_this_host_has_no_energy_source_in_run_and_report(tiny, runner, tmp_path):
    if Path(DEFAULT_PATHS[0]).exists():
        pytest.skip(f"this host has {DEFAULT_PATHS[0]}")
    code, output = native(tiny, tmp_path, "--energy-interval", 50, "--energy-idle", 0.5)
    assert code == 0, output
    text = " ".join(output.split())  # the console wraps long lines
    assert text.count("no energy source") == 1
    assert f"local: no energy source: {DEFAULT_PATHS[0]} cannot be read; the rows carry no energy" in text
    manifest, rows = load_results(tmp_path / "run")
    assert manifest.energy.no_source == f"no energy source: {DEFAULT_PATHS[0]} cannot be read"
    assert manifest.energy.samples == 0 and manifest.energy.idle_w is None
    for line in (tmp_path / "run" / "rows.jsonl").read_text().splitlines():  # nulls, no zeros
        row = json.loads(line)
        assert (row["energy_j"], row["energy_above_idle_j"], row["energy_samples"]) == (None, None, None)
    assert not (tmp_path / "run" / "energy_samples.jsonl").exists()
    assert len(rows) == 2 * 5
    code, output = invoke("report", tmp_path / "run", "--format", "md")
    assert code == 0 and output.count("no energy source") == 1
    assert f"no energy source: {DEFAULT_PATHS[0]} cannot be read" in output


def test_an_energy_file_that_holds_no_number_is_a_bad_input_not_a_missing_battery(tiny, runner, tmp_path):
    current, voltage = tmp_path / "current_now", tmp_path / "voltage_now"
    current.write_text("abc\n")
    voltage.write_text("3900000\n")
    code, output = native(tiny, tmp_path, "--energy-interval", 50, "--energy-idle", 0,
                          "--energy-paths", f"{current},{voltage},{tmp_path / 'status'}")
    assert code == 1
    lines = [line for line in output.splitlines() if line.startswith("Error: ")]
    assert lines == [f"Error: --energy-paths: current file {current} holds 'abc', expected an integer reading "
                     "(hint: name the battery's current_now and voltage_now files)"], output
    assert "no energy source" not in output and "Traceback" not in output
    assert not (tmp_path / "run").exists()  # a refused run leaves nothing: the corrected rerun is no resume


def test_without_energy_interval_nothing_is_sampled(tiny, runner, tmp_path):
    code, output = native(tiny, tmp_path)
    assert code == 0 and "energy source" not in output
    manifest, rows = load_results(tmp_path / "run")
    assert manifest.energy is None and rows["energy_j"].isna().all()


@pytest.mark.parametrize("flags, message", [
    (["--energy-interval", "-1"], "Invalid value for '--energy-interval'"),
    (["--energy-interval", "70000"], "Invalid value for '--energy-interval'"),
    (["--energy-interval", "10", "--energy-idle", "700"], "Invalid value for '--energy-idle'"),
    (["--energy-convention", "uA,uV,discharging_negative"], "--energy-convention needs --energy-interval MS"),
    (["--energy-idle", "2"], "--energy-idle needs --energy-interval MS"),
    (["--energy-interval", "10", "--energy-convention", "A,V"], "--energy-convention 'A,V': expected CURRENT,"),
    (["--energy-interval", "10", "--energy-paths", "a,b"], "--energy-paths 'a,b': expected three absolute paths"),
])
def test_energy_flags_are_checked_where_they_enter(tmp_path, flags, message):
    windows = tmp_path / "windows.jsonl"
    save_windows(windows, [make_text_window("w0", "hello", "Repeat this.", 8, "tiny", "test")])
    code, output = invoke("run", windows, "--device", "local", "--native", "--target", tmp_path / "none.gguf",
                          "--out", tmp_path / "run", *flags)
    assert code != 0 and message in output, output


def test_replay_refuses_the_energy_flags(tmp_path):
    for name in ("p.yaml", "windows.jsonl"):  # refused before they are read
        (tmp_path / name).write_text("")
    code, output = invoke("run", tmp_path / "windows.jsonl", "--traces", tmp_path, "--profile", tmp_path / "p.yaml",
                          "--energy-interval", 10, "--out", tmp_path / "run")
    assert code == 1 and "--energy-paths are for --native runs (replay has no battery)" in output, output
