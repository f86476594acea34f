"""The one-screen summary: it fits a terminal, and its verdicts are the profile's own costs.

tests/data/golden/demo/ holds a run of the demo's models and methods (its README says how it
was made): the replay results of both placements, a native run, and the two profiles."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from specbench.cli import main

DEMO = Path(__file__).resolve().parent.parent / "data" / "golden" / "demo"
SCREEN = (80, 40)


@pytest.fixture
def demo(tmp_path) -> list[Path]:
    """The demo's results directories, copied, their manifests naming the profiles where they now lie."""
    out = tmp_path / "demo"
    shutil.copytree(DEMO, out)
    results = sorted(p.parent for p in (out / "results").glob("*/manifest.json"))
    for directory in results:
        manifest = json.loads((directory / "manifest.json").read_text())
        for profile in manifest.get("profiles", []):
            profile["path"] = str(out / "device_profiles" / Path(profile["path"]).name)
        manifest["windows"]["path"] = str(out / "windows.jsonl")
        (directory / "manifest.json").write_text(json.dumps(manifest))
    return results


def report(*args, columns=SCREEN[0]):
    result = CliRunner().invoke(main, ["report", *map(str, args)], env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    return result.stdout


def _screen(output: str) -> list[str]:
    """What a terminal prints before the first detail table (the summary ends with a blank line)."""
    return output.split("\n\n")[0].splitlines()


def test_the_summary_fits_one_screen_and_is_the_golden(demo):
    lines = _screen(report(*demo))
    assert len(lines) <= SCREEN[1] and max(map(len, lines)) <= SCREEN[0], "\n".join(lines)
    assert "\n".join(lines) + "\n" == (DEMO / "summary.txt").read_text()
    # both placements, and a verdict under each method x drafter's best configuration
    for placement in ("split", "shared"):
        assert any(line.startswith(f"local@{placement}: target-only") for line in lines)
    configurations = [r for r in _summary(demo) if r["method"] != "target"]
    assert len(configurations) >= 6
    words = " ".join(" ".join(lines).split())  # a verdict's outcome may wrap onto its next line
    assert len(re.findall(r": (pays \d+%|does not pay: \d+%)", words)) == len(configurations)


def test_a_terminal_gets_one_screen_and_detail_rows_one_line_each(demo):
    """At 80 columns: the summary, a line per kind of warning with its count, where the tables are; with
    --detail every table, each of its rows on one line (the 282 unstable timings of the demo's profiles
    once took nine lines each, their profile paths folded)."""
    screen = report(*demo).splitlines()
    assert len(screen) <= 80 and max(map(len, screen)) <= 80, "\n".join(screen)
    words = " ".join(" ".join(screen).split())
    assert "warning: divergent windows, excluded from every table (1 of 7 windows on local@split); see --detail" in words
    assert "282 unstable profile timings (spread > 10% of the median); see --detail" in words
    # a fidelity flag says what else it holds besides the model's error, and where that is measured apart
    assert ("replay fidelity: 3 of 3 configurations on local@split off native by more than 10% (mean over windows; the host's "
            "drift and run-to-run noise included, which `specbench validate` measures apart); see --detail") in words
    assert "Unstable profile timings" not in words and "12 detail tables (" in words
    detail = report(*demo, "--detail").splitlines()
    assert max(map(len, detail)) <= 80
    records = [json.loads(line) for line in report(*demo, "--format", "jsonl").splitlines()]
    titles = list(dict.fromkeys(r["title"] for r in records if not r["title"].startswith("Summary")))
    rows = [sum(r["title"] == title for r in records) for title in titles]
    assert _table_bodies(detail) == rows  # one printed line per row, table after table: no row wraps
    assert 282 in rows
    unstable = next(i for i, line in enumerate(detail) if line.strip().startswith("Unstable profile timings"))
    assert "local-split.yaml" in "\n".join(detail[unstable:])  # a profile path in a footnote or a column


def test_prose_lines_wrap_between_words_with_their_continuations_indented():
    from specbench.render.summary import wrap_line

    path = "/a/results/directory/of/a/demo/whose/name/is/longer/than/the/forty/columns/report.md"
    text = f"  local@split: budget as2d[B=1,drafter=gemma3] chosen on 2 dev windows; see {path}"
    lines = wrap_line(text, 40)
    assert lines[0].startswith("  local@split:") and all(line.startswith("    ") for line in lines[1:])
    assert path in [line.strip() for line in lines]  # a path longer than a line stays whole
    assert all(len(line) <= 40 and line == line.rstrip() for line in lines if path not in line)
    assert " ".join(" ".join(lines).split()) == " ".join(text.split())  # every word, in order
    assert wrap_line("", 40) == [""]


def _table_bodies(lines: list[str]) -> list[int]:
    """Per printed table, in order, the lines between its header rule and its caption."""
    bodies, i = [], 0
    while i < len(lines):
        if lines[i].strip() and set(lines[i].strip()) == {"─"}:
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("aggregation:"))
            bodies.append(end - i - 1)
            i = end
        i += 1
    return bodies


def _summary(demo: list[Path]) -> list[dict]:
    """The summary table's rows, from the JSON-lines report."""
    records = [json.loads(line) for line in report(*demo, "--format", "jsonl").splitlines()]
    return [r for r in records if r["title"].startswith("Summary")]


def _rows(directory: Path) -> list[dict]:
    return [json.loads(line) for line in (directory / "rows.jsonl").read_text().splitlines()]


def _at(depths: list[float], values: list[float], depth: float) -> float:
    """Linear between measured depths, flat outside (docs/METHODS.md §5.3 Between and beyond measurements, and the flags), worked by hand."""
    if depth <= depths[0]:
        return values[0]
    for (d0, v0), (d1, v1) in zip(zip(depths, values), zip(depths[1:], values[1:])):
        if depth <= d1:
            return v0 + (v1 - v0) * (depth - d0) / (d1 - d0)
    return values[-1]


def test_each_verdict_is_the_profiles_costs_at_the_stated_depth(demo):
    summary = _summary(demo)
    # a window whose native output diverged leaves every table of its device (docs/METHODS.md §7.6 Divergent windows)
    diverged = {(r["device"], r["window_id"]) for d in demo for r in _rows(d) if not r["lossless"]}
    replay = [r for r in _rows(next(d for d in demo if d.name == "replay"))
              if r["cost_fit"] == "median" and (r["device"], r["window_id"]) not in diverged]
    checked = disagreed = mixes = 0
    for row in summary:
        placement = row["device"].split("@")[1]
        profile = yaml.safe_load((demo[0].parent.parent / "device_profiles" / f"local-{placement}.yaml").read_text())
        target = profile["target"]["costs"]
        depth = (target["depths"][0] + target["depths"][-1]) / 2
        assert row["depth"] == depth

        def ct(width):
            return _at(target["depths"], target["seconds"][width], depth)

        if row["method"] == "target":  # the baseline: CT(1) a token
            assert row["ms_per_token"] == pytest.approx(1e3 * ct(1), rel=1e-12)
            continue
        mine = [r for r in replay if r["device"] == row["device"] and r["config"] == row["config"]]
        tokens, forwards = sum(r["tokens"] for r in mine), sum(r["target_forwards"] for r in mine)
        drafter_forwards, proposed = sum(r["drafter_forwards"] for r in mine), sum(r["proposed"] for r in mine)
        verifications = sum(r["reached_at"][0] for r in mine if r["reached_at"])  # forwards with a candidate
        single = 1 - verifications / forwards  # the single-token steps' share
        drafter = next(d for d in profile["drafters"] if d["name"] == row["drafter"])
        cd = _at(drafter["costs"]["depths"], drafter["costs"]["seconds"][1], depth)
        width = (min(sorted(target["seconds"]), key=lambda w: abs(w - (1 + proposed / verifications)))
                 if verifications else 1)  # nearest measured to the verifications' mean
        tau = tokens / forwards
        mixed = 0 < single < 1 and width > 1
        if row["method"] == "as2d":
            def rho(w):
                return _at(drafter["cosched"]["depths"], drafter["cosched"]["ratios"][w]["rho_target"], depth)

            per_token = (single * rho(1) * ct(1) + (1 - single) * rho(width) * ct(width)) / tau
            verify = f"CT({width}) {1e3 * ct(width):.1f} ms × ρT {rho(width):.2f}"
            forward = (f"{single:.2f} × CT(1) {1e3 * ct(1):.1f} ms × ρT {rho(1):.2f} + {1 - single:.2f} × {verify}"
                       if mixed else verify)
            assert f"{forward} for τ = {tau:.2f} tokens" in row["verdict"]
        else:
            per_token = (drafter_forwards / forwards * cd + single * ct(1) + (1 - single) * ct(width)) / tau
            f = drafter_forwards / forwards
            verify = f"CT({width}) {1e3 * ct(width):.1f} ms"
            forward = f"{single:.2f} × CT(1) {1e3 * ct(1):.1f} ms + {1 - single:.2f} × {verify}" if mixed else verify
            assert (f"{f:.1f} drafter forwards ({f:.1f} × {1e3 * cd:.1f} ms) + {forward} "
                    f"for τ = {tau:.2f} tokens") in row["verdict"]
        mixes += mixed
        pays = 100 * (ct(1) / per_token - 1)
        assert row["ms_per_token"] == pytest.approx(1e3 * per_token, rel=1e-12)
        assert row["pays_pct"] == pytest.approx(pays, rel=1e-12)
        outcome = f"pays {pays:.0f}%" if pays > 0 else f"does not pay: {-pays:.0f}%"
        # more than 10% from the replayed speedup, or on the other side of 1, the verdict says so and names both
        implied, replayed = ct(1) / per_token, row["speedup"]
        apart = max(implied / replayed, replayed / implied) > 1.1 or (implied > 1) != (replayed > 1)
        clause = f"; replay says {replayed:.2f}x, this round {implied:.2f}x: read the speedup" if apart else ""
        disagreed += bool(clause)
        text = row["verdict"].removesuffix(clause)
        assert clause in row["verdict"] and "replay says" not in text
        assert text.endswith(f"= {1e3 * per_token:.1f} ms a token against CT(1) {1e3 * ct(1):.1f} ms: "
                             f"{outcome}") or f": {outcome}; producer" in text
        checked += 1
    assert checked == len([r for r in summary if r["method"] != "target"]) >= 6
    assert 0 < disagreed < checked  # the golden has verdicts that agree with replay and ones that do not
    assert 0 < mixes < checked  # and verdicts of single steps and verifications mixed, and of one kind


def test_fidelity_is_shown_where_native_rows_exist(demo):
    summary = _summary(demo)
    native = {(r["device"], r["config"]) for d in demo if d.name != "replay" for r in _rows(d)}
    for row in summary:
        assert (row["fidelity_pct"] is not None) == ((row["device"], row["config"]) in native)


def test_without_its_profile_the_summary_keeps_the_speedups_and_says_why(demo):
    for path in (demo[0].parent.parent / "device_profiles").glob("*.yaml"):
        path.unlink()
    lines = _screen(report(*demo))
    assert any("no verdict: profile" in line for line in lines)
    assert not any("pays" in line for line in lines)


def test_the_summary_leads_every_format(demo):
    markdown = report(*demo, "--format", "md")
    assert markdown.startswith("### Summary: each method's best configuration per device@placement")
    assert markdown.index("### Summary") < markdown.index("### Pooled decode throughput")


@pytest.mark.parametrize("implied, replayed, flagged", [
    (1.03, 0.98, True),   # "pays 3%" beside a replayed loss: within 10%, yet it would contradict the row
    (0.97, 1.02, True),   # and the other way round
    (1.03, 1.01, False),  # the same side of 1 and close: the verdict's approximation
    (0.90, 0.95, False),
    (1.30, 1.10, True),   # more than 10% apart on the same side
])
def test_a_verdict_on_the_other_side_of_1_from_replay_names_both(implied, replayed, flagged):
    from specbench.core.verdict import Verdict, disagreement

    found = Verdict("sd", 64.0, 7, 6.41, 6.3, 0.0, 0.0281, 0.0073, 0.012, 1.0, 1.0, 1.0, 0.012 / implied)
    clause = disagreement(found, replayed)
    assert bool(clause) == flagged
    if flagged:
        assert clause == f"; replay says {replayed:.2f}x, this round {implied:.2f}x: read the speedup"
    assert found.outcome.startswith("pays") == (implied > 1)


def test_the_as2d_verdicts_producer_carries_its_host_work_as_replay_charges_it():
    from dataclasses import replace

    from specbench.core.pricing import DecodeContention
    from specbench.core.verdict import ForwardCounts, verdict
    from specbench.schemas.profiles import Overheads
    from tests.helpers import make_profile

    # CD(1) = 0.25 s beside ρD 2: 0.5 s a draft; 0.3 s of host work measured beside a producer ratio of 2 is
    # 0.15 s solo, stretched back to 0.3 s; the verifier spends 1 s x ρT 1 a token (single steps, τ = 1)
    profile = make_profile(rho=(1.0, 2.0), overheads=Overheads(producer_step_s=0.3))
    drafter = profile.drafters["drafter"]
    met = DecodeContention(1.0, 1.0, 40, producer=2.0, producer_priced=2.0, producer_forwards=40)
    profile = replace(profile, drafters={"drafter": replace(drafter, cosched=replace(drafter.cosched, decode=met))})
    counts = ForwardCounts(target_forwards=4, tokens=4, drafter_forwards=4, proposed=0, accepted=0, verifications=0)
    found = verdict(profile, "as2d", "drafter", counts, 0.0)
    assert found.host_s == pytest.approx(0.3)
    assert found.text.endswith("producer CD(1) 250.0 ms × ρD 2.00 + host 300.0 ms = 800.0 ms, keeps up")
    # host work that would print as 0.0 ms stays in the sum, out of the sentence
    tiny = replace(found, host_s=1e-5)
    assert tiny.text.endswith("producer CD(1) 250.0 ms × ρD 2.00 = 500.0 ms, keeps up")
