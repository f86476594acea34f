"""The sustained-load report of two fixed emulated-phone runs (tests/data/golden/sustained/: the same
phone with and without cool-down between the methods' streams) prints exactly the expected tables,
and its figure carries the timeline's series. Regenerate after an intended change with
`tests/data/golden/sustained/regenerate.py` (its docstring says how) and read the diff."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from specbench.app.report.sustained import first_throttled, streams, sustained_tables, timeline_frame, timelines
from specbench.cli import main
from specbench.render.tables import render
from specbench.schemas.timeline import load_timeline

GOLDEN = Path(__file__).resolve().parent.parent / "data" / "golden" / "sustained"
RUNS = [GOLDEN / "cooldown", GOLDEN / "no-cooldown"]


def test_golden_sustained_tables_are_printed_by_report():
    expected = (GOLDEN / "report.md").read_text()
    assert render(sustained_tables(RUNS), "md") == expected
    result = CliRunner().invoke(main, ["report", *map(str, RUNS), "--format", "md"])
    assert result.exit_code == 0, result.output
    assert expected.strip() in result.output
    # one phone, two runs of the same windows: the per-window tables keep the first run's rows, and say so
    assert "sustained runs of the same windows: the per-window tables show" in result.output


def test_the_named_request_is_the_first_whose_snapshot_shows_throttling():
    for run in RUNS:
        for records in streams(load_timeline(run)).values():
            named = first_throttled(records)
            shown = [r for r in records if r.thermal_status or any(
                khz < records[0].max_freq_khz[p] for p, khz in r.max_freq_khz.items())]
            assert named == (shown[0] if shown else None)
            if named is not None:
                assert all(r.thermal_status == 0 for r in records[:records.index(named)])
    # without cool-down the second stream starts where the first left the phone: throttled at once
    hot = streams(load_timeline(GOLDEN / "no-cooldown"))
    assert [first_throttled(s).request if first_throttled(s) else None for s in hot.values()][1] == 0


def test_sustained_figure_draws_every_request_of_every_stream(tmp_path):
    pytest.importorskip("matplotlib")
    from specbench.render import plots

    frame = timeline_frame(timelines(RUNS))
    fig, series = plots.sustained_timeline(frame)
    assert sorted(series) == sorted(f"{c} ({r})" for r, c in frame[["run", "config"]].drop_duplicates().to_numpy())
    assert sum(len(points) for points in series.values()) == len(frame)
    assert {p.suffix for p in plots.save(fig, tmp_path / "sustained")} == {".png", ".svg"}


def test_a_timeline_request_starting_before_it_arrived_is_refused_naming_the_line(tmp_path):
    import json
    import shutil

    from specbench.errors import SpecbenchError

    run = tmp_path / "run"
    shutil.copytree(GOLDEN / "cooldown", run)
    lines = (run / "timeline.jsonl").read_text().splitlines()
    doc = json.loads(lines[1])
    doc["start_s"] = doc["arrival_s"] - 1.0
    lines[1] = json.dumps(doc)
    (run / "timeline.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(SpecbenchError) as error:
        load_timeline(run)
    message = str(error.value)
    assert message.startswith(f"{run / 'timeline.jsonl'}:2: start_s = ") and "\n" not in message
