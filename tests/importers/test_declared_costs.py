"""Declared drafter costs (docs/METHODS.md §4.7 Declared drafter costs): replay prices them like measured ones, and
every output of a report priced with them says so, naming the drafter and the source
(golden files tests/data/progdraft/declared.*)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from specbench.cli import main
from specbench.render.formats import OUTPUT_FORMATS
from specbench.schemas.profiles import load_profile, profile_to_dict
from tests.importers.test_progdraft import EXPORTS, PHONE, TARGET_SHA

DATA = Path(__file__).resolve().parents[1] / "data" / "progdraft"
SOURCES = ("one decoder block + LM head", "hand-made table standing in for another harness's measurement")


def invoke(*args):
    result = CliRunner().invoke(main, [str(a) for a in args])
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("declared")
    assert invoke("import-trace", "progdraft", *EXPORTS, "--out", root / "traces", "--windows",
                  root / "windows.jsonl", "--n-prompt", 80, "--n-vocab", 151936, "--target-sha256",
                  TARGET_SHA)[0] == 0
    code, output = invoke("run", root / "windows.jsonl", "--traces", root / "traces", "--profile", PHONE,
                          "--methods", "target", "--method", "sd:W=9,drafter=ours|anchor", "--out", root / "results")
    assert code == 0, output
    return root


def test_a_fraction_of_the_target_prices_every_width_and_depth_of_the_drafter():
    profile = load_profile(PHONE)
    ours, target = profile.drafters["ours"], profile.target_costs
    assert ours.declared.fraction_of_target == 0.12 and ours.declared.source == SOURCES[0]
    for width in target.widths():
        assert np.allclose(ours.costs.seconds[width], 0.12 * target.seconds[width])
    assert ours.costs.cost(1, 128) == pytest.approx(0.12 * target.cost(1, 128))
    assert profile.drafters["anchor"].declared.fraction_of_target is None
    assert profile.drafters["anchor"].costs.cost(1, 0) == 0.004
    # saved, the fraction stays a fraction (no table is written for it) and the table stays declared
    doc = profile_to_dict(profile)
    assert "costs" not in doc["drafters"][0] and doc["drafters"][0]["declared"] == {
        "source": SOURCES[0], "fraction_of_target": 0.12}
    assert doc["drafters"][1]["declared"] == {"source": SOURCES[1]} and "costs" in doc["drafters"][1]


def test_replay_charges_the_declared_costs_like_measured_ones(run):
    rows = [json.loads(line) for line in (run / "results" / "rows.jsonl").read_text().splitlines()]
    ours = [r for r in rows if r["drafter"] == "ours"]
    profile = load_profile(PHONE)
    # every drafter forward of SD at W = 9 (ingest of 1 or 2 tokens, then single steps) costs
    # 0.12 x the target's forward of that width at its depth: no forward is free, none is guessed
    for row in ours:
        assert row["d_s"] > 0
        assert row["d_s"] < 0.12 * row["drafter_forwards"] * profile.target_costs.cost(2, 200)
        assert row["d_s"] > 0.12 * row["drafter_forwards"] * profile.target_costs.cost(1, 0)


def _section(text: str, start: str, end: str) -> str:
    at = text.index(start)
    stop = text.find(end, at + len(start))
    return text[at:] if stop < 0 else text[at:stop]


@pytest.mark.parametrize("fmt", [f for f in OUTPUT_FORMATS if f != "table"])
def test_every_report_format_names_the_declared_costs(run, fmt, tmp_path):
    if fmt == "csv":  # one file per table: the declared-costs table's file
        code, text = invoke("report", run / "results", "--format", fmt, "--output", tmp_path / "csv")
        assert code == 0, text
        text = (tmp_path / "csv" / "declared-drafter-costs-not-measured-on-the-device.csv").read_text()
    else:
        code, text = invoke("report", run / "results", "--format", fmt)
    assert code == 0, text
    for drafter, source in zip(("ours", "anchor"), SOURCES):
        assert drafter in text and source in text, fmt
    golden = DATA / f"declared.{fmt}"
    if fmt == "md":
        assert _section(text, "### Declared drafter costs", "\n### ") == golden.read_text()
    elif fmt == "csv":
        assert text == golden.read_text()
    elif fmt == "json":
        tables = [t for t in json.loads(text) if t["title"].startswith("Declared drafter costs")]
        assert tables == json.loads(golden.read_text())


def test_figures_and_bundles_name_the_declared_costs(run, tmp_path):
    code, output = invoke("report", run / "results", "--format", "md", "--bundle", tmp_path / "bundle")
    assert code == 0, output
    report = (tmp_path / "bundle" / "report.md").read_text()
    assert ("> pixel8-fixture@shared: drafter 'ours' costs are declared, not measured (0.12 x the target's "
            f"CT(n, depth); source: {SOURCES[0]})") in report
    assert f"drafter 'anchor' costs are declared, not measured (a table measured elsewhere; source: {SOURCES[1]})" \
        in report
    svgs = sorted((tmp_path / "bundle" / "figures").glob("*.svg"))
    assert svgs and all('id="declared-costs"' in p.read_text() for p in svgs)
    for name in ("csv/declared-drafter-costs-not-measured-on-the-device.csv", "tables.json", "tables.jsonl"):
        assert SOURCES[0] in (tmp_path / "bundle" / name).read_text()


def test_a_run_without_declared_drafters_says_nothing_of_them(run, tmp_path):
    measured = yaml.safe_load(PHONE.read_text())
    measured["drafters"] = [measured["drafters"][1]]
    del measured["drafters"][0]["declared"]
    (tmp_path / "measured.yaml").write_text(yaml.safe_dump(measured))
    code, output = invoke("run", run / "windows.jsonl", "--traces", run / "traces", "--profile",
                          tmp_path / "measured.yaml", "--methods", "target", "--method", "sd:W=9,drafter=anchor",
                          "--out", tmp_path / "r")
    assert code == 0, output
    code, text = invoke("report", tmp_path / "r", "--format", "md")
    assert code == 0 and "declared" not in text.lower()
    # and target-only rows on a profile with declared drafters used none of them
    code, output = invoke("run", run / "windows.jsonl", "--traces", run / "traces", "--profile", PHONE,
                          "--methods", "target", "--out", tmp_path / "t")
    assert code == 0, output
    assert "Declared" not in invoke("report", tmp_path / "t", "--format", "md")[1]
