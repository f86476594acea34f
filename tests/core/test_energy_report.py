"""The report's energy table (app/report/energy.py) on a native run made on the emulated phone on
battery (tests/data/golden/energy, see its README): a golden table, its arithmetic from the rows,
the figure's series, and "no energy source" once for native results without energy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from specbench.app.report import load_many, main_rows
from specbench.app.report.energy import energy_rows
from specbench.cli import main

GOLDEN = Path(__file__).resolve().parent.parent / "data" / "golden"
ENERGY = GOLDEN / "energy" / "results"


def report(*args) -> str:
    result = CliRunner().invoke(main, ["report", *map(str, args)])
    assert result.exit_code == 0, result.output
    return result.output


def section(markdown: str, heading: str) -> str:
    """The markdown of one table: from its heading to the next."""
    start = markdown.index(f"### {heading}")
    end = markdown.find("\n### ", start + 1)
    return markdown[start:] if end < 0 else markdown[start:end + 1]


def test_golden_energy_table():
    output = report(ENERGY, "--format", "md")
    assert section(output, "Energy per request") == (GOLDEN / "energy" / "energy.md").read_text()
    assert "no energy source" not in output


def test_energy_per_request_and_ratio_from_the_rows():
    rows = [json.loads(line) for line in (ENERGY / "rows.jsonl").read_text().splitlines()]
    table = energy_rows(main_rows(load_many([ENERGY]).frame).native).set_index("config")
    target = sum(r["energy_j"] for r in rows if r["config"] == "target")
    for config in ("sd[W=4,drafter=pld]", "as2d[B=3,drafter=pld]"):
        mine = [r for r in rows if r["config"] == config]
        assert table.at[config, "j_per_request"] == pytest.approx(sum(r["energy_j"] for r in mine) / len(mine))
        assert table.at[config, "mj_per_token"] == pytest.approx(
            1e3 * sum(r["energy_j"] for r in mine) / sum(r["tokens"] for r in mine))
        assert table.at[config, "vs_target"] == pytest.approx(sum(r["energy_j"] for r in mine) / target)
        assert table.at[config, "vs_target_low"] <= table.at[config, "vs_target"] <= table.at[config, "vs_target_high"]
    assert table.at["target", "vs_target"] == 1.0


def test_energy_figure_draws_the_tables_numbers():
    pytest.importorskip("matplotlib")
    from specbench.render import plots

    table = energy_rows(main_rows(load_many([ENERGY]).frame).native)
    device = table["device"].iloc[0]
    _, series = plots.energy_bars(table, device)
    assert series["config"] == list(table["config"])
    assert list(series["total"]) == pytest.approx(list(table["j_per_request"]))
    assert list(series["above_idle"]) == pytest.approx(list(table["j_per_request_above_idle"]))


def test_native_results_without_energy_say_no_energy_source_once():
    output = report(GOLDEN / "demo" / "results" / "native-smollm2-split", "--format", "md")
    assert output.count("no energy source") == 1
    assert "no energy source: not measured (run --native --energy-interval MS)" in output
    assert "j_per_request" not in output  # no table of zeros


def test_replay_results_have_no_energy_table():
    assert "nergy" not in report(GOLDEN / "results", "--format", "md")
