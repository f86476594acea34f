"""Nothing lost, nothing silent (issue 31): two writers on one directory, inputs that must be
refused, and I/O failures, each one line naming the file, key or flag, with a non-zero exit and
nothing half-written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from specbench.cli import main
from specbench.schemas.results import ROWS, load_results
from tests.helpers import write_study


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    root = tmp_path_factory.mktemp("study")
    data, windows, traces, profiles = write_study(root, n_windows=6, n_devices=1)
    results = root / "results"
    code, output = invoke("run", windows, "--traces", traces, "--profile", profiles[0], "--drafter", "small",
                          "--methods", "target,sd", "--out", results)
    assert code == 0, output
    return {"root": root, "windows": windows, "traces": traces, "profile": profiles[0], "results": results,
            "data": data}


def invoke(*args):
    result = CliRunner().invoke(main, [str(a) for a in args])
    return result.exit_code, result.output


def error_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.startswith("Error: ")]
    assert len(lines) == 1, output
    assert "Traceback" not in output
    return lines[0]


def copy_results(study, tmp_path, edit=None) -> Path:
    """The study's results directory copied, its rows.jsonl text passed through `edit`."""
    out = tmp_path / "copy"
    out.mkdir()
    for name in ("manifest.json", ROWS):
        (out / name).write_bytes((study["results"] / name).read_bytes())
    if edit is not None:
        rows = out / ROWS
        rows.write_text(edit(rows.read_text()))
    return out


def edit_row(line: int, **changes):
    """An edit of rows.jsonl that changes keys of its line `line` (1-based)."""
    def edit(text: str) -> str:
        lines = text.splitlines(keepends=True)
        doc = json.loads(lines[line - 1])
        doc.update(changes)
        lines[line - 1] = json.dumps(doc) + "\n"
        return "".join(lines)
    return edit


# --- one writer per results directory ---------------------------------------------------------------

def test_two_runs_at_once_on_one_directory_never_duplicate_a_row(study, tmp_path):
    """Two real processes resume one directory at once: one writes, the other is refused naming the
    holder's pid; the rows hold each window once, and report reads them."""
    out = tmp_path / "r"
    args = [sys.executable, "-m", "specbench", "run", str(study["windows"]), "--traces", str(study["traces"]),
            "--profile", str(study["profile"]), "--drafter", "small", "--methods", "target,sd,specasr",
            "--method", "as2d:B=1..6", "--out", str(out), "--resume"]
    procs = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [p.communicate(timeout=300) for p in procs]
    codes = [p.returncode for p in procs]
    assert sorted(codes) in ([0, 0], [0, 1]), outputs
    for proc, (_, err), code in zip(procs, outputs, codes, strict=True):
        if code == 1:
            other = next(p.pid for p in procs if p is not proc)
            lines = [line for line in err.splitlines() if line.startswith("Error: ")]
            assert lines == [f"Error: {out}: another specbench process (pid {other}) is writing this results "
                             "directory (hint: wait for it to finish, or write to another path)"], err
    _, rows = load_results(out)
    assert not rows.duplicated(["device", "config", "window_id", "cost_fit"]).any()
    assert len(rows) == 6 * (1 + 4 + 1 + 6)
    code, output = invoke("report", out, "--format", "md")
    assert code == 0, output


def test_a_second_writer_is_refused_naming_the_holder(study, tmp_path):
    from specbench.schemas.fileio import WriterLock

    out = tmp_path / "r"
    out.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom specbench.schemas.fileio import "
                               f"WriterLock\nWriterLock({str(out)!r}, 'x')\nprint('held', flush=True)\n"
                               "sys.stdin.read()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        code, output = invoke("run", study["windows"], "--traces", study["traces"], "--profile", study["profile"],
                              "--drafter", "small", "--methods", "target", "--out", out)
        assert code == 1
        assert error_line(output) == (f"Error: {out}: another specbench process (pid {holder.pid}) is writing this "
                                      "results directory (hint: wait for it to finish, or write to another path)")
        assert sorted(p.name for p in out.iterdir()) == [".specbench-lock"]  # no manifest, no rows
    finally:
        holder.communicate("")
    lock = WriterLock(out, "results directory")  # the holder's end gave it back
    lock.release()
    code, output = invoke("run", study["windows"], "--traces", study["traces"], "--profile", study["profile"],
                          "--drafter", "small", "--methods", "target", "--out", out)
    assert code == 0, output


def test_report_names_a_duplicated_row_as_one(study, tmp_path):
    out = copy_results(study, tmp_path, lambda text: text + text.splitlines(keepends=True)[2])
    code, output = invoke("report", out)
    assert code == 1
    row = json.loads((study["results"] / ROWS).read_text().splitlines()[2])
    n = len((study["results"] / ROWS).read_text().splitlines())
    assert error_line(output) == (f"Error: {out / ROWS}:{n + 1}: a duplicated row: window '{row['window_id']}' of "
                                  f"{row['config']} on {row['device']} (cost_fit median) is also on line 3 "
                                  "(hint: the directory had two writers; rerun into a fresh --out)")


def test_report_of_one_run_given_twice_names_both_directories(study, tmp_path):
    out = copy_results(study, tmp_path)
    code, output = invoke("report", study["results"], out)
    assert code == 1
    assert " appears in more than one results directory " in error_line(output)
    assert f"({study['results']}, {out})" in error_line(output)


# --- results rows read by report ---------------------------------------------------------------------

def test_a_row_cut_mid_line_is_warned_about_and_every_method_pooled_over_the_same_windows(study, tmp_path):
    def cut(text: str) -> str:
        return text[: len(text) - len(text.splitlines(keepends=True)[-1]) // 2]
    out = copy_results(study, tmp_path, cut)
    n = len((study["results"] / ROWS).read_text().splitlines())
    code, output = invoke("report", out, "--format", "jsonl")
    assert code == 0, output
    assert f"warning: {out / ROWS}:{n}: a row cut short by an interrupted write is left out" in output
    assert f"warning: {out / ROWS}: 1 window(s) lack a row of some configuration; every configuration is pooled " \
           "over the windows they all have" in output
    pooled = [json.loads(line) for line in output.splitlines() if line.startswith('{"title": "Pooled decode')]
    assert len(pooled) == 6 and {doc["windows"] for doc in pooled} == {5}  # target, sd W=5..8 and their mean


def test_an_unfinished_run_says_so_and_pools_over_the_same_windows(study, tmp_path):
    def drop_last(text: str) -> str:
        return "".join(text.splitlines(keepends=True)[:-1])
    out = copy_results(study, tmp_path, drop_last)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["environment"]["finished"] = None
    (out / "manifest.json").write_text(json.dumps(manifest))
    code, output = invoke("report", out, "--format", "md")
    assert code == 0, output
    assert "1 window(s) lack a row of some configuration (the run did not finish); every configuration is pooled " \
           "over the windows they all have" in output


def test_an_unknown_key_in_a_row_is_refused(study, tmp_path):
    out = copy_results(study, tmp_path, edit_row(2, speed=3))
    code, output = invoke("report", out)
    assert code == 1
    assert error_line(output).startswith(f"Error: {out / ROWS}: key 'line 2.speed': expected one of the known keys [")
    assert error_line(output).endswith("(unknown key), got 3") or "(unknown key)" in error_line(output)


def test_an_absurd_time_in_a_row_is_refused(study, tmp_path):
    """(every range of a row: tests/core/test_result_rows.py)"""
    out = copy_results(study, tmp_path, edit_row(2, decode_s=1e308))
    code, output = invoke("report", out)
    assert code == 1
    assert error_line(output) == f"Error: {out / ROWS}: key 'line 2.decode_s': expected seconds in [0, 86400], got 1e+308"


def test_windows_with_no_token_after_the_prefill_are_one_line(study, tmp_path):
    def no_tokens(text: str) -> str:
        docs = [json.loads(line) for line in text.splitlines()]
        for doc in docs:
            doc.update(tokens=0, proposed=0, accepted=0, multi_token_forwards=0, reached_at=[], accepted_at=[])
        return "".join(json.dumps(doc) + "\n" for doc in docs)
    out = copy_results(study, tmp_path, no_tokens)
    code, output = invoke("report", out)
    assert code == 1
    assert error_line(output) == (f"Error: {out / ROWS}: every window of synthetic-A committed no token after "
                                  "the prefill; there is no throughput to report")


@pytest.mark.parametrize("empty", [True, False])
def test_report_of_a_directory_without_rows_names_it(study, tmp_path, empty):
    out = copy_results(study, tmp_path, lambda text: "")
    if not empty:
        (out / ROWS).unlink()
    code, output = invoke("report", out)
    assert code == 1
    assert error_line(output) == (f"Error: {out / ROWS}: no result rows to report (the run wrote none) "
                                  "(hint: run it again with --resume, or report another directory)")
