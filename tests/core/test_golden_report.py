"""Fixed results files produce exactly the expected tables; figures carry the right series."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from specbench.app.report import load_many
from specbench.cli import main
from specbench.core import metrics
from specbench.render import plots
from specbench.schemas.results import VERSION

GOLDEN = Path(__file__).resolve().parent.parent / "data" / "golden"


def report(*args):
    result = CliRunner().invoke(main, ["report", *map(str, args)])
    return result.exit_code, result.output


@pytest.mark.parametrize("fmt", ["md", "jsonl"])
def test_golden_tables(fmt):
    code, output = report(GOLDEN / "results", "--format", fmt)
    assert code == 0, output
    assert output == (GOLDEN / f"report.{fmt}").read_text()


def _files(directory: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(directory.iterdir())}


def test_golden_csv_is_one_flat_file_per_table_with_an_index(tmp_path):
    code, output = report(GOLDEN / "results", "--format", "csv", "--output", tmp_path / "csv")
    assert code == 0, output
    assert _files(tmp_path / "csv") == _files(GOLDEN / "csv")
    index = pd.read_csv(tmp_path / "csv" / "index.csv")
    titles = [json.loads(line)["title"] for line in (GOLDEN / "report.jsonl").read_text().splitlines()]
    assert list(index["title"]) == list(dict.fromkeys(titles))  # the jsonl's tables, in order
    for record in index.to_dict("records"):
        text = (tmp_path / "csv" / record["file"]).read_text()
        assert not text.startswith("#") and len(text.splitlines()) == 1 + record["rows"]  # a header, then rows
    pooled = pd.read_csv(tmp_path / "csv" / "pooled-decode-throughput.csv")
    assert list(pooled.columns[:10]) == ["device", "config", "windows", "tokens", "decode_s", "tokens_per_s",
                                         "speedup", "speedup_low", "speedup_high", "mean_window_speedup"]


def test_jsonl_records_are_the_json_rows_with_their_table():
    records = [json.loads(line) for line in (GOLDEN / "report.jsonl").read_text().splitlines()]
    code, text = report(GOLDEN / "results", "--format", "json")
    assert code == 0
    expected = [{"title": t["title"], "aggregation": t["aggregation"], **row}
                for t in json.loads(text) for row in t["rows"]]
    assert records == expected
    pooled = [r for r in records if r["title"] == "Pooled decode throughput"]
    assert len(pooled) == 9 and "95% paired bootstrap over windows (BCa" in pooled[0]["aggregation"]


def test_results_of_the_previous_version_are_refused_naming_both_versions(tmp_path):
    shutil.copytree(GOLDEN / "results", tmp_path / "r")
    manifest = tmp_path / "r" / "manifest.json"
    manifest.write_text(manifest.read_text().replace(f'"schema_version": {VERSION}', f'"schema_version": {VERSION - 1}'))
    code, output = report(tmp_path / "r", "--format", "md")
    assert code == 1 and output.splitlines() == [f"Error: {manifest}: schema_version {VERSION - 1}, this specbench "
                                                 f"reads {VERSION} (hint: write the file again with this specbench)"]


def test_csv_to_stdout_is_refused_naming_the_flag():
    code, output = report(GOLDEN / "results", "--format", "csv")
    assert code == 1
    assert output.splitlines() == [("Error: --format csv writes one file per table: pass --output DIR (hint: or "
                                    "--format jsonl for one stream on stdout)")]


def test_every_export_from_one_call_equals_its_own_format(tmp_path):
    code, output = report(GOLDEN / "results", "--format", "md", "--output", tmp_path / "out.md",
                          "--export-json", tmp_path / "r.json", "--export-jsonl", tmp_path / "r.jsonl",
                          "--export-csv", tmp_path / "csv", "--export-md", tmp_path / "r.md")
    assert code == 0, output
    assert (tmp_path / "out.md").read_text() == (tmp_path / "r.md").read_text() == (GOLDEN / "report.md").read_text()
    assert (tmp_path / "r.jsonl").read_text() == (GOLDEN / "report.jsonl").read_text()
    assert (tmp_path / "r.json").read_text() == report(GOLDEN / "results", "--format", "json")[1]
    assert _files(tmp_path / "csv") == _files(GOLDEN / "csv")
    assert not [p for p in tmp_path.rglob(".*")]  # no temporary file left behind


def test_a_csv_directory_holds_one_report_only(tmp_path):
    out = tmp_path / "csv"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    stale = "sensitivity-to-extrapolated-co-scheduling-ratios-tokens-s.csv"
    pd.DataFrame([{"file": stale, "title": "t", "aggregation": "a", "rows": 0}]).to_csv(out / "index.csv", index=False)
    (out / stale).write_text("old\n")
    assert report(GOLDEN / "results", "--export-csv", out, "--format", "md", "--output", tmp_path / "r.md")[0] == 0
    assert _files(out) == {**_files(GOLDEN / "csv"), "notes.txt": "mine"}  # the stale table gone, other files kept


@pytest.mark.parametrize("args, line", [
    (["--export-md", "{tmp}/missing/r.md"],
     "Error: --export-md {tmp}/missing/r.md: directory {tmp}/missing does not exist"),
    (["--export-json", "{tmp}"], "Error: --export-json {tmp}: is a directory, expected a file path"),
    (["--export-csv", "{tmp}/file"], "Error: --export-csv {tmp}/file: is a file, expected a directory"),
    (["--format", "csv", "--output", "{tmp}/file"], "Error: --output {tmp}/file: is a file, expected a directory"),
    (["--export-md", "{tmp}/r.md", "--export-jsonl", "{tmp}/r.md"],
     "Error: --export-jsonl {tmp}/r.md: also named by --export-md"),
])
def test_bad_export_paths_are_refused_before_any_work(tmp_path, args, line):
    (tmp_path / "file").write_text("keep")
    # an unreadable results directory: refused later, so the path error must come first
    (tmp_path / "results").mkdir()
    code, output = report(tmp_path / "results", *[a.format(tmp=tmp_path) for a in args])
    assert code == 1 and output.splitlines() == [line.format(tmp=tmp_path)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "results"]
    assert (tmp_path / "file").read_text() == "keep"


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
    titles = [t["title"] for t in json.loads((tmp_path / "bundle" / "tables.json").read_text())]
    assert titles[:2] == ["Summary: each method's best configuration per device@placement", "Pooled decode throughput"]
    assert (tmp_path / "bundle" / "tables.jsonl").read_text() == (GOLDEN / "report.jsonl").read_text()
    assert _files(tmp_path / "bundle" / "csv") == _files(GOLDEN / "csv")
    assert not (tmp_path / "bundle" / "tables.csv").exists()


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
    code, output = report(a, b, "--allow-mixed", "--format", "jsonl")
    assert code == 0
    assert _tables(output)["Overrides"][0]["note"].startswith("--allow-mixed: field 'profile of synthetic-A' differs")


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
    code, output = report(a, b, "--format", "jsonl")
    assert code == 0, output
    first = _tables(output)["Replay fidelity (replay vs native throughput)"][0]
    assert list(first) == ["device", "config", "windows", "mean_abs_error_pct", "max_abs_error_pct", "flagged"]
    # native is 1.25x slower: |replay - native| / native = 0.25 -> 25 %, flagged (> 10 %)
    assert first == {"device": "synthetic-A", "config": "target", "windows": 4, "mean_abs_error_pct": pytest.approx(25),
                     "max_abs_error_pct": pytest.approx(25), "flagged": True}


def test_golden_results_have_no_text_so_the_golden_files_stay():
    # The golden rows predate `text`: no Transcripts / lossless-in-text tables in report.md,
    # report.jsonl and csv/ (test_golden_tables); rows load with text "".
    frame = load_many([GOLDEN / "results"]).frame
    assert (frame["text"] == "").all()
    code, output = report(GOLDEN / "results", "--format", "md")
    assert code == 0 and "Lossless in text" not in output and "Transcripts" not in output


ANSWERS = {"syn-0000": "language English<asr_text>The cat sat.", "syn-0001": "a b c x", "syn-0002": "anything",
           "syn-0003": "no reference"}
REFERENCES = {"syn-0000": "the cat sat", "syn-0001": "A b c d", "syn-0002": "", "syn-0003": None}


def _with_text(tmp_path, answer=lambda row: ANSWERS[row["window_id"]]):
    """The golden run with answer texts, and a windows file with the references (audio views:
    their sha256 is not recomputed, so the golden window hashes can be kept)."""
    from specbench.schemas.windows import InputView, Split, Window, save_windows

    results = _copy_with(tmp_path, "text", None, lambda r: {**r, "text": answer(r)})
    rows = [json.loads(line) for line in (results / "rows.jsonl").read_text().splitlines()]
    shas = {r["window_id"]: (r["window_sha256"], r["dataset"], r["split"]) for r in rows}
    windows = [Window(w, sha, InputView("audio", audio_path=f"{w}.flac", duration_s=1.0), "Transcribe.", "chatml", 64,
                      dataset, Split(split), REFERENCES[w]) for w, (sha, dataset, split) in sorted(shas.items())]
    save_windows(tmp_path / "windows.jsonl", windows)
    return results, tmp_path / "windows.jsonl"


def _tables(jsonl: str) -> dict[str, list[dict]]:
    """title -> rows of a JSON-lines report (without the title and aggregation fields)."""
    tables: dict[str, list[dict]] = {}
    for line in jsonl.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            title = record.pop("title")
            record.pop("aggregation")
            tables.setdefault(title, []).append(record)
    return tables


def test_transcripts_and_lossless_text_in_every_format(tmp_path):
    results, windows = _with_text(tmp_path)
    code, output = report(results, "--windows", windows, "--format", "jsonl")
    assert code == 0, output
    block = _tables(output)["Transcripts: WER / CER against the reference (%)"]
    # syn-0000: 0 / 3 words, 0 / 11 chars (prefix, case, punctuation normalised away);
    # syn-0001: 1 / 4 words, 1 / 7 chars; syn-0002: empty reference; syn-0003: no reference.
    # pooled WER 1 / 7, mean (0 + 25) / 2; pooled CER 1 / 18, mean (0 + 1/7) / 2
    assert block[0] == {"dataset": "synthetic", "device": "synthetic-A", "config": "target", "windows": 2,
                        "empty_reference": 1, "unscored": 1, "ref_words": 7, "wer_pct": pytest.approx(100 / 7),
                        "wer_mean_pct": pytest.approx(12.5), "cer_pct": pytest.approx(100 / 18),
                        "cer_mean_pct": pytest.approx(100 / 14)}
    assert len(block) == 8  # one row per configuration (all answered the same text)
    assert _tables(output)["Lossless in text (answer texts identical across methods)"] == [
        {"windows_checked": 4, "identical": 4, "differing": 0, "rows_compared": 32, "rows_without_text": 0}]
    assert "WARNING" not in output
    code, md = report(results, "--windows", windows, "--format", "md")
    assert "### Transcripts: WER / CER against the reference (%)" in md and "specbench-text-1" in md
    assert "note: 8 rows (window x configuration) had an empty reference: no WER/CER for them" in md
    code, text = report(results, "--windows", windows, "--format", "json")
    titles = [t["title"] for t in json.loads(text)]
    assert "Transcripts: WER / CER against the reference (%)" in titles
    assert "Lossless in text (answer texts identical across methods)" in titles
    code, rich = report(results, "--windows", windows, "--detail")
    assert code == 0 and "Lossless in text" in rich and "Transcripts" in rich


def test_a_method_whose_text_differs_is_flagged(tmp_path):
    def answer(row):
        if row["window_id"] == "syn-0001" and row["config"] == "as2d[B=7,drafter=small]":
            return "a b c y"
        return ANSWERS[row["window_id"]]

    results, windows = _with_text(tmp_path, answer)
    code, output = report(results, "--windows", windows, "--format", "jsonl", "--bundle", tmp_path / "bundle")
    assert code == 0, output
    assert "warning: answer text differs between methods (1 of 4 windows on synthetic-A); see that table" in output
    tables = _tables(output)
    assert tables["Lossless in text (answer texts identical across methods)"][0]["differing"] == 1
    differs = tables["WARNING: answer text differs between methods (1 of 4 windows on synthetic-A)"]
    assert [tuple(r.values()) for r in differs] == [("synthetic", "synthetic-A", "syn-0001", "as2d[B=7,drafter=small]",
                                                     "replay", "target (replay)", 6, "a b c x", "a b c y")]
    bundled = (tmp_path / "bundle" / "report.md").read_text()
    assert "### WARNING: answer text differs between methods (1 of 4 windows on synthetic-A)" in bundled
    assert "### Transcripts: WER / CER" in bundled
    index = pd.read_csv(tmp_path / "bundle" / "csv" / "index.csv")
    assert "WARNING: answer text differs between methods (1 of 4 windows on synthetic-A)" in set(index["title"])
    code, screen = report(results, "--windows", windows)
    assert code == 0 and ("lossless in text: every configuration's transcript is target-only's on 3 of 4 windows on "
                          "synthetic-A; the others differ, see --detail") in " ".join(screen.split())


def test_without_references_the_text_check_stays_and_a_note_says_why(tmp_path, monkeypatch):
    results, _ = _with_text(tmp_path)
    monkeypatch.chdir(tmp_path / "text")  # the manifest's relative windows.jsonl is not there
    code, output = report(results, "--format", "jsonl")
    assert code == 0, output
    assert "no reference texts from windows.jsonl (not found); pass --windows FILE for WER/CER" in output
    assert "Transcripts" not in output and "Lossless in text (answer texts identical across methods)" in _tables(output)
    code, output = report(results, "--windows", tmp_path / "missing.jsonl")
    assert code == 2 and "missing.jsonl" in output
    (tmp_path / "bad.jsonl").write_text('{"kind": "specbench.trace", "schema_version": 1}\n')
    code, output = report(results, "--windows", tmp_path / "bad.jsonl")
    errors = [line for line in output.splitlines() if line.startswith("Error:")]
    assert code == 1 and len(errors) == 1 and "bad.jsonl" in errors[0] and "specbench.windows" in errors[0]


def test_macro_prints_each_dataset_and_their_mean(tmp_path):
    datasets = {"syn-0000": "news", "syn-0001": "news", "syn-0002": "chat", "syn-0003": "chat"}
    results = _copy_with(tmp_path, "two", None, lambda r: {**r, "dataset": datasets[r["window_id"]]})
    code, output = report(results, "--macro", "--format", "jsonl")
    assert code == 0, output
    macro = _tables(output)["Macro-average over datasets"]
    rows = pd.read_json(results / "rows.jsonl", lines=True)

    def pooled(config, dataset):
        part = rows[(rows["config"] == config) & (rows["dataset"] == dataset)]
        return part["tokens"].sum() / part["decode_s"].sum()

    b3 = [r for r in macro if r["config"] == "as2d[B=3,drafter=small]"]
    assert [r["dataset"] for r in b3] == ["news", "chat", "mean over datasets"]
    for r in b3[:2]:
        assert r["datasets"] == 1 and r["windows"] == 2
        assert r["tokens_per_s"] == pytest.approx(pooled("as2d[B=3,drafter=small]", r["dataset"]))
        assert r["speedup"] == pytest.approx(r["tokens_per_s"] / pooled("target", r["dataset"]))
    assert b3[2]["datasets"] == 2 and b3[2]["windows"] == 4
    assert b3[2]["tokens_per_s"] == pytest.approx((b3[0]["tokens_per_s"] + b3[1]["tokens_per_s"]) / 2)
    assert b3[2]["speedup"] == pytest.approx((b3[0]["speedup"] + b3[1]["speedup"]) / 2)
    assert len(macro) == 3 * 9  # each configuration, the SD mean over W included: two datasets and the mean


def _pooled_on(columns):
    result = CliRunner().invoke(main, ["report", str(GOLDEN / "results"), "--detail"], env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    return result.output.split("Pooled decode throughput")[1].split("Windows faster / slower")[0]


def _row(text, *identity):
    """The printed row whose last columns are `identity` (method, drafter, W/B)."""
    return next(line.split() for line in text.splitlines() if line.split()[-len(identity):] == list(identity))


def test_a_narrow_terminal_names_the_intervals_it_leaves_out():
    narrow, wide = _pooled_on(64), _pooled_on(140)
    assert max(map(len, narrow.splitlines())) <= 64 and "…" not in narrow
    assert ("left out at this width (--format md or jsonl has them): speedup_low, speedup_high, mean_window_speedup"
            in " ".join(narrow.split()))
    assert "left out at this width" not in wide and max(map(len, wide.splitlines())) <= 140
    # the interval and the Spec-Bench column beside the point estimate; without them on 64 columns
    assert _row(wide, "as2d", "small", "3")[3:8] == ["39.30", "1.119", "1.004", "1.414", "1.268"]
    assert _row(narrow, "as2d", "small", "3")[3:6] == ["39.30", "1.119", "as2d"]


def test_the_config_label_is_left_out_where_method_drafter_and_w_b_name_the_row():
    # at 80 columns a label column folded each row over several lines; method, drafter and W/B name it
    pooled = _pooled_on(80)
    assert "as2d[B=3" not in pooled and "config left out: method, drafter, W/B name each row" in pooled
    assert _row(pooled, "as2d", "small", "3")[3:7] == ["39.30", "1.119", "1.004", "1.414"]  # one line, interval kept
    assert sum(" sd      small " in line for line in pooled.splitlines()) == 5  # W = 5..8 and the mean
    # two configurations the columns do not tell apart keep their labels
    from specbench.render.tables import Table, _rich_table

    frame = pd.DataFrame({"device": ["d", "d"], "config": ["specasr[tau=0.5]", "specasr[tau=0.7]"], "tps": [1.0, 2.0],
                          "method": ["specasr", "specasr"], "drafter": ["s", "s"], "W/B": [None, None]})
    table = Table("t", "o", frame, keys=("device", "method", "drafter", "W/B"), label="config")
    assert "config" in [c.header for c in _rich_table(table, 80).columns]
    assert "config" not in [c.header for c in _rich_table(Table("t", "o", frame.iloc[:1], keys=table.keys,
                                                                label="config"), 80).columns]
