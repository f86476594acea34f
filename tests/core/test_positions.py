"""Per-position acceptance: the counts, their storage in rows, the report's table and the flag
on a drafter that contributed nothing."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from specbench.cli import main
from specbench.core import metrics
from specbench.core.positions import position_counts, summed
from specbench.errors import SpecbenchError
from specbench.schemas.results import load_results
from tests.helpers import write_study


def test_counts_of_hand_made_verifications():
    # (proposed, accepted): all 3 kept; rejected at 2; no candidates; both kept; rejected at 1
    reached, accepted = position_counts([3, 3, 0, 2, 4], [3, 1, 0, 2, 0])
    # position 1: reached by the four that proposed, accepted by three (the last rejected it)
    # position 2: reached by (3,3), (3,1) and (2,2); accepted by (3,3) and (2,2)
    # position 3: reached only by (3,3), which accepted it; position 4 never reached
    assert reached == (4, 3, 1) and accepted == (3, 2, 1)
    assert sum(accepted) == 3 + 1 + 2


def test_nothing_proposed_has_no_positions():
    assert position_counts([0, 0], [0, 0]) == ((), ())
    assert position_counts([], []) == ((), ())


def test_summed_pads_short_vectors():
    assert summed([(2, 1), (3,), ()]).tolist() == [5, 1]
    assert summed([(2, 1), (3,)], 3).tolist() == [5, 1, 0]


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    root = tmp_path_factory.mktemp("positions")
    data, windows, traces, profiles = write_study(root, n_windows=8, n_devices=1)
    out = root / "results"
    # conf_stop 1.0: the AS2D producer's candidates are all cut (no confidence reaches 1), so it proposes nothing
    result = CliRunner().invoke(main, ["run", str(windows), "--traces", str(traces), "--profile", str(profiles[0]),
                                       "--drafter", "small", "--methods", "target,sd", "--method", "as2d:B=3",
                                       "--method", "as2d:B=3,conf_stop=1.0", "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out


def test_rows_carry_counts_consistent_with_their_totals(study):
    _, rows = load_results(study)
    drafted = rows[rows["method"] != "target"]
    assert drafted["reached_at"].map(len).gt(0).any()
    for reached, accepted, total in zip(rows["reached_at"], rows["accepted_at"], rows["accepted"]):
        assert len(reached) == len(accepted) and sum(accepted) == total
        assert all(a <= r for r, a in zip(reached, accepted))
        # reaching k + 1 needs k accepted
        assert all(r_next <= a for a, r_next in zip(accepted, reached[1:]))
    assert (rows.loc[rows["method"] == "target", "reached_at"].map(len) == 0).all()
    sd5 = rows[rows["config"] == "sd[W=5,drafter=small]"]
    assert sd5["reached_at"].map(len).max() <= 4  # W = 5 drafts at most 4


def test_report_table_is_the_ratio_of_summed_counts(study):
    _, rows = load_results(study)
    table = metrics.per_position(rows)
    mine = rows[rows["config"] == "sd[W=8,drafter=small]"]
    reached, accepted = summed(mine["reached_at"]), summed(mine["accepted_at"])
    got = table[table["config"] == "sd[W=8,drafter=small]"].sort_values("position")
    assert got["position"].tolist() == list(range(1, len(reached) + 1))
    np.testing.assert_allclose(got["acceptance"].to_numpy(), accepted / reached)
    result = CliRunner().invoke(main, ["report", str(study), "--format", "json"])
    titles = [t["title"] for t in json.loads(result.stdout)]
    assert "Per-position acceptance P(accept at k | reached k)" in titles


def test_a_drafter_that_contributed_nothing_is_flagged(study, tmp_path):
    result = CliRunner().invoke(main, ["report", str(study), "--format", "md"])
    assert result.exit_code == 0, result.output
    assert "warning: drafter contributed nothing (1 dataset x configuration" in result.stderr
    section = result.stdout.split("WARNING: drafter contributed nothing")[1].split("###")[0]
    assert "as2d[B=3,drafter=small,conf_stop=1]" in section and "proposed no candidate" in section
    assert "as2d[B=3,drafter=small] " not in section
    figures = tmp_path / "figures"
    result = CliRunner().invoke(main, ["report", str(study), "--plots", str(figures)])
    assert result.exit_code == 0, result.output
    assert list(figures.glob("positions-*.png")) and list(figures.glob("positions-*.svg"))


def test_inconsistent_counts_are_refused(study, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "manifest.json").write_text((study / "manifest.json").read_text())
    lines = (study / "rows.jsonl").read_text().splitlines()
    docs = [json.loads(line) for line in lines]
    index = next(i for i, d in enumerate(docs) if d["accepted_at"])
    docs[index]["accepted_at"] = [a + 1 for a in docs[index]["accepted_at"]]
    (broken / "rows.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    with pytest.raises(SpecbenchError, match=rf"row {index + 1}.*accepted_at"):
        load_results(broken)
    docs[index]["accepted_at"] = ["x"]
    (broken / "rows.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    with pytest.raises(SpecbenchError, match="accepted_at"):
        load_results(broken)
