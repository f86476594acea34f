"""Fixed results files produce exactly the expected tables; figures carry the right series."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from specbench import metrics, plots
from specbench.cli import main
from specbench.report import load_many

GOLDEN = Path(__file__).resolve().parent.parent / "data" / "golden"


def report(*args):
    result = CliRunner().invoke(main, ["report", *map(str, args)])
    return result.exit_code, result.output


@pytest.mark.parametrize("fmt", ["md", "csv"])
def test_golden_tables(fmt):
    code, output = report(GOLDEN / "results", "--format", fmt)
    assert code == 0, output
    assert output == (GOLDEN / f"report.{fmt}").read_text()


def test_cdf_series_are_the_per_window_throughputs():
    frame = load_many([GOLDEN / "results"]).frame
    per_window = metrics.per_window(frame)
    fig, series = plots.throughput_cdf(per_window, "synthetic-A", ["target", "as2d[B=3,drafter=small]"])
    target = frame[frame["config"] == "target"]
    values, fraction = series["target"]
    assert np.array_equal(values, np.sort((target["tokens"] / target["decode_s"]).to_numpy()))
    assert np.array_equal(fraction, [0.25, 0.5, 0.75, 1.0])
    assert set(series) == {"target", "as2d[B=3,drafter=small]"}


def test_decomposition_bars_stack_to_t():
    frame = load_many([GOLDEN / "results"]).frame
    parts = metrics.decomposition(frame)
    _, series = plots.decomposition_bars(parts, "synthetic-A")
    stacked = series["V (verification)"] + series["D - O (exposed drafter)"] + series["H (residual)"]
    assert np.allclose(stacked, series["T"], rtol=1e-12)


def test_bundle_holds_tables_figures_inputs_and_commands(tmp_path):
    results = tmp_path / "results"
    shutil.copytree(GOLDEN / "results", results)
    code, output = report(results, "--bundle", tmp_path / "bundle", "--format", "md", "--output", tmp_path / "r.md")
    assert code == 0, output
    text = (tmp_path / "bundle" / "report.md").read_text()
    assert "### Pooled decode throughput" in text and "![cdf-synthetic-A](figures/cdf-synthetic-A.png)" in text
    assert "specbench run windows.jsonl --traces traces" in text and "## Inputs" in text
    for name in ("cdf-synthetic-A", "dvoh-synthetic-A"):
        for suffix in (".png", ".svg"):
            assert (tmp_path / "bundle" / "figures" / (name + suffix)).stat().st_size > 1000
    assert json.loads((tmp_path / "bundle" / "tables.json").read_text())[0]["title"] == "Pooled decode throughput"


def _copy_with(tmp_path, name, edit_manifest=None, edit_row=None):
    out = tmp_path / name
    shutil.copytree(GOLDEN / "results", out)
    if edit_manifest:
        manifest = json.loads((out / "manifest.json").read_text())
        edit_manifest(manifest)
        (out / "manifest.json").write_text(json.dumps(manifest))
    if edit_row:
        rows = [json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines()]
        rows = [edit_row(r) for r in rows]
        (out / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return out


def test_unlike_profiles_are_refused_unless_allowed(tmp_path):
    def other_profile(m):
        m["profiles"][0]["sha256"] = "b" * 64

    def as_native(r):
        return {**r, "source": "native"}

    a = _copy_with(tmp_path, "a")
    b = _copy_with(tmp_path, "b", other_profile, as_native)
    code, output = report(a, b)
    assert code == 1
    line = [x for x in output.splitlines() if x.startswith("Error:")][0]
    assert "refusing to compare unlike runs: field 'profile of synthetic-A' differs:" in line
    assert "b" * 64 in line and "--allow-mixed" in line
    code, output = report(a, b, "--allow-mixed", "--format", "csv")
    assert code == 0
    assert "# Overrides\nnote\n--allow-mixed: field 'profile of synthetic-A' differs" in output


def test_unlike_windows_and_targets_are_refused(tmp_path):
    a = _copy_with(tmp_path, "a")
    b = _copy_with(tmp_path, "b", lambda m: m["windows"].update(digest="0" * 64),
                   lambda r: {**r, "source": "native"})
    code, output = report(a, b)
    assert code == 1 and "field 'windows.digest' differs" in output

    def other_target(m):
        for t in m["traces"].values():
            t["target"]["sha256"] = "c" * 64

    c = _copy_with(tmp_path, "c", other_target, lambda r: {**r, "source": "native"})
    code, output = report(a, c)
    assert code == 1 and "field 'target model sha256' differs" in output


def test_replay_fidelity_from_a_native_run(tmp_path):
    a = _copy_with(tmp_path, "a")
    b = _copy_with(tmp_path, "b", None, lambda r: {**r, "source": "native", "decode_s": r["decode_s"] * 1.25})
    code, output = report(a, b, "--format", "csv")
    assert code == 0, output
    block = output.split("# Replay fidelity (replay vs native throughput)\n")[1].splitlines()
    assert block[0] == "device,config,windows,mean_abs_error_pct,max_abs_error_pct,flagged"
    # native is 1.25x slower: |replay - native| / native = 0.25 -> 25 %, flagged (> 10 %)
    assert block[1].startswith("synthetic-A,target,4,25,25,True")
