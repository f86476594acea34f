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
                                  f"{row['config']} on {row['device']} (replay, cost_fit median) is also on line 3 "
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
    assert error_line(output) == (f"Error: {out / ROWS}: key 'line 2.decode_s': expected seconds in [0, 86400], "
                                  "got 1e+308")


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


# --- inputs refused where they enter -----------------------------------------------------------------

def replay(study, out, *extra, traces=None, windows=None, profile=None):
    return invoke("run", windows or study["windows"], "--traces", traces or study["traces"], "--profile",
                  profile or study["profile"], "--drafter", "small", "--methods", "target,sd", "--out", out, *extra)


@pytest.mark.parametrize("shorter", [False, True])
def test_a_trace_whose_window_line_appears_twice_is_refused(study, tmp_path, shorter):
    traces = tmp_path / "traces"
    traces.mkdir()
    for path in study["traces"].glob("*.jsonl"):
        lines = path.read_text().splitlines(keepends=True)
        again = json.loads(lines[3])
        if shorter:
            again["y"] = again["y"][:3]
            again.pop("drafts", None), again.pop("producer", None), again.pop("recycle", None)
        (traces / path.name).write_text("".join(lines) + json.dumps(again) + "\n")
    out = tmp_path / "r"
    code, output = replay(study, out, traces=traces)
    assert code == 1
    first = sorted(traces.glob("*.jsonl"))[0]
    n = len(first.read_text().splitlines())
    window = json.loads(first.read_text().splitlines()[3])["window_id"]
    assert error_line(output) == (f"Error: {first}:{n}: window_id = '{window}', expected a window not yet in the "
                                  "file (line 4 holds it) (hint: keep one line per window)")
    assert not out.exists()


def test_windows_refuses_an_unknown_template(tmp_path):
    source = tmp_path / "manifest.jsonl"
    source.write_text("")
    out = tmp_path / "windows.jsonl"
    code, output = invoke("windows", source, "--template", "nosuchtemplate", "--out", out)
    assert code == 1
    assert error_line(output).startswith("Error: --template = 'nosuchtemplate', expected 'model' or a llama.cpp "
                                         "built-in chat template (bailing, bailing-think, ")
    assert not out.exists()


def test_a_windows_file_naming_an_unknown_template_is_refused(study, tmp_path):
    lines = study["windows"].read_text().splitlines()
    doc = json.loads(lines[1])
    doc["template"] = "nosuchtemplate"
    windows = tmp_path / "windows.jsonl"
    windows.write_text("\n".join([lines[0], json.dumps(doc), *lines[2:]]) + "\n")
    code, output = replay(study, tmp_path / "r", windows=windows)
    assert code == 1
    assert error_line(output) == (f"Error: {windows}:2: template = 'nosuchtemplate', expected 'model' or a llama.cpp "
                                  "built-in chat template (chatml, gemma, llama3, ...)")


def test_a_budget_selected_for_another_device_is_refused(study, tmp_path):
    budget = tmp_path / "budget.yaml"
    budget.write_text(yaml.safe_dump({"kind": "specbench.budget", "schema_version": 1, "device": "pixel8@shared",
                                      "as2d": {"B": 3, "drafter": "small"}}))
    out = tmp_path / "r"
    code, output = replay(study, out, "--budget", budget)
    assert code == 1
    assert error_line(output) == (f"Error: {budget}: device = 'pixel8@shared', expected one of the profiled devices "
                                  "(synthetic-A) (hint: select a budget for that device with `specbench "
                                  "select-budget --profile` of its profile)")
    assert not out.exists()


def test_select_budget_refuses_a_profile_of_another_target(study, tmp_path):
    doc = yaml.safe_load(study["profile"].read_text())
    doc["target"]["model"]["sha256"] = "f" * 64
    profile = tmp_path / "other.yaml"
    profile.write_text(yaml.safe_dump(doc, sort_keys=False))
    out = tmp_path / "budget.yaml"
    code, output = invoke("select-budget", study["windows"], "--traces", study["traces"], "--profile", profile,
                          "--out", out)
    assert code == 1
    target = json.loads(next(study["traces"].glob("*.jsonl")).read_text().splitlines()[0])["target"]["sha256"]
    assert error_line(output) == (f"Error: profile {profile}: measured for target model sha256 {'f' * 64}, but the "
                                  f"traces are of {target}")
    assert not out.exists()


def test_validate_refuses_a_target_that_is_not_the_traced_one_before_any_profiling(study, tmp_path):
    from specbench.schemas.fileio import file_sha256
    from specbench.schemas.traces import load_trace_dir

    model = tmp_path / "other.gguf"
    model.write_bytes(b"GGUF not the traced target")
    out = tmp_path / "validation"
    code, output = invoke("validate", study["windows"], "--traces", study["traces"], "--target", model,
                          "--drafter", f"small={model}", "--out", out)
    assert code == 1
    first = next(iter(load_trace_dir(study["traces"]).values()))
    assert error_line(output) == (f"Error: {first.path}: traced with target {first.target.name} "
                                  f"({first.target.sha256[:12]}), not {model} ({file_sha256(model)[:12]}) "
                                  "(hint: pass the target the traces were made with)")
    assert not out.exists()


# --- file systems that refuse writes -----------------------------------------------------------------

@pytest.fixture
def unwritable(tmp_path):
    """A directory this process cannot create files in: a read-only one for other users, /sys for root
    (chmod does not stop root)."""
    if os.geteuid() != 0:
        directory = tmp_path / "read-only"
        directory.mkdir()
        directory.chmod(0o555)
        yield directory
        directory.chmod(0o755)
        return
    probe = Path("/sys") / f"specbench-probe-{os.getpid()}"
    try:
        probe.write_text("x")
    except OSError:
        yield Path("/sys")
        return
    probe.unlink()
    pytest.skip("no directory refuses root's writes here (/sys is writable)")


@pytest.fixture
def full(tmp_path):
    """A file system with no room left: a small tmpfs filled to the brim (root and mount needed)."""
    directory = tmp_path / "full"
    directory.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(directory)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs to fill ({mounted.stderr.decode().strip()})")
    try:
        fill(directory / "filler", None)
        yield directory
    finally:
        subprocess.run(["umount", str(directory)], check=True)


def fill(path: Path, size: int | None) -> None:
    """Write `size` bytes to `path` (None: until the file system is full)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        while size is None or size > 0:
            written = os.write(fd, b"\0" * min(4096, 4096 if size is None else size))
            size = None if size is None else size - written
    except OSError:
        pass
    finally:
        os.close(fd)


@pytest.mark.parametrize("where", ["unwritable", "full"])
def test_every_output_on_a_file_system_that_refuses_writes_is_one_line_before_any_work(study, tmp_path, request,
                                                                                       where):
    directory = request.getfixturevalue(where)
    reason = "Permission denied" if where == "unwritable" else "No space left on device"
    before = sorted(p.name for p in directory.iterdir())
    cases = [
        (["run", study["windows"], "--traces", study["traces"], "--profile", study["profile"], "--drafter", "small",
          "--out", directory / "r"], f"{directory}: cannot write the output r there ({reason})"),
        (["report", study["results"], "--output", directory / "report.md"],
         f"--output {directory}: cannot write the output report.md there ({reason})"),
        (["select-budget", study["windows"], "--traces", study["traces"], "--profile", study["profile"],
          "--out", directory / "budget.yaml"], f"{directory}: cannot write the output budget.yaml there ({reason})"),
        (["profile", "local", "--target", study["profile"], "--out", directory / "p.yaml"],
         f"{directory}: cannot write the profile there ({reason})"),
    ]
    for args, expected in cases:
        code, output = invoke(*args)
        assert code == 1, (args, output)
        assert error_line(output) == f"Error: {expected}", args
    assert sorted(p.name for p in directory.iterdir()) == before


def test_a_write_that_fails_midway_is_one_line_and_leaves_the_old_file(study, tmp_path, full):
    """The output check passed (a small file fits), the report does not: one line naming the file."""
    fill(full / "filler", 64 * 1024 - 8 * 1024)  # about 8 KB left: the check's 4 KB probe fits, a report does not
    code, output = invoke("report", study["results"], "--format", "md", "--output", full / "report.md")
    assert code == 1
    assert error_line(output) == f"Error: {full / 'report.md'}: cannot write (No space left on device)"
    assert sorted(p.name for p in full.iterdir()) == ["filler"]


def test_a_profile_that_cannot_be_written_after_measuring_is_kept(tmp_path, full, tiny, runner):
    import tempfile

    from specbench.schemas.profiles import load_profile

    fill(full / "filler", 64 * 1024 - 6 * 1024)  # the check's 4 KB probe fits, the profile and its samples do not
    out = full / "p.yaml"
    code, output = invoke("profile", "local", "--target", tiny.target, "--depths", "0", "--max-width", 2,
                          "--repetitions", 5, "--no-cosched", "--out", out)
    assert code == 1
    kept = Path(tempfile.gettempdir()) / f"specbench-kept-{os.getpid()}-p.yaml"
    try:
        line = error_line(output)
        assert line.startswith(f"Error: {full}/") and "cannot write (No space left on device)" in line
        assert line.endswith(f"; the measurement is kept in {kept} (hint: copy it (and "
                             f"{kept.stem}.samples.jsonl) where it belongs)")
        assert load_profile(kept).target_costs.widths() == [1, 2]
        assert not out.exists()
    finally:
        kept.unlink(missing_ok=True)
        kept.with_name(f"{kept.stem}.samples.jsonl").unlink(missing_ok=True)


# --- interruptions ------------------------------------------------------------------------------------

def test_sigterm_stops_a_job_and_removes_its_folder(tmp_path, tiny, runner):
    import signal
    import time

    temp = tmp_path / "tmp"
    temp.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "specbench", "profile", "local", "--target", str(tiny.target),
                             "--drafter", f"near={tiny.near}", "--depths", "0,64", "--max-width", "8", "--repetitions",
                             "20", "--out", str(tmp_path / "p.yaml")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "TMPDIR": str(temp)})
    try:
        for _ in range(6000):  # until a job is in flight (its folder exists), at most a minute
            if list(temp.glob(f"specbench-job-{proc.pid}-*")) or proc.poll() is not None:
                break
            time.sleep(0.01)
        assert proc.poll() is None, "the profile ended before a job was seen"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Interrupted; profile keeps only the files it finished (run it again for the rest)." in err
    assert "Traceback" not in err and "--resume" not in err
    assert not list(temp.glob("specbench-job-*"))
    assert not (tmp_path / "p.yaml").exists()


def test_a_killed_process_job_folder_is_swept_at_the_next_job(tmp_path, monkeypatch, tiny, runner):
    import tempfile

    from specbench.world import runner as runner_module

    gone = subprocess.Popen(["true"])
    gone.wait()
    stale = tmp_path / f"specbench-job-{gone.pid}-abc"
    stale.mkdir()
    (stale / "job.json").write_text("{}")
    alive = tmp_path / f"specbench-job-{os.getppid()}-def"  # a process that still runs keeps its folder
    alive.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(runner_module, "_swept", False)
    out = runner_module.run_job(runner, {"mode": "tokenize", "model": {"path": str(tiny.target)}, "texts": ["hi"]})
    assert out.results and not stale.exists() and alive.exists()


def test_an_interrupt_right_after_the_job_folder_is_made_still_removes_it(tmp_path, monkeypatch):
    """The SIGTERM test's race made certain: the interrupt lands as the mkdir returns."""
    import tempfile

    from specbench.world import runner as runner_module

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    make = Path.mkdir

    def make_then_interrupt(self, *args, **kwargs):
        make(self, *args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "mkdir", make_then_interrupt)
    with pytest.raises(KeyboardInterrupt), runner_module.job_folder():
        pytest.fail("the body must not run")
    assert list(tmp_path.iterdir()) == []


def test_an_interrupt_during_the_job_folders_removal_finishes_it_then_is_raised(tmp_path, monkeypatch):
    import shutil
    import tempfile

    from specbench.world import runner as runner_module

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    remove = shutil.rmtree
    calls = []

    def interrupted_once(path, *args, **kwargs):
        calls.append(path)
        if len(calls) == 1:
            (Path(path) / "job.json").unlink()  # midway: part removed
            raise KeyboardInterrupt
        remove(path, *args, **kwargs)

    monkeypatch.setattr(runner_module.shutil, "rmtree", interrupted_once)
    with pytest.raises(KeyboardInterrupt), runner_module.job_folder() as folder:
        (folder / "job.json").write_text("{}")
        (folder / "out.jsonl").write_text("")
    assert len(calls) == 2 and list(tmp_path.iterdir()) == []


def test_a_refused_run_removes_only_what_it_created(tmp_path):
    from specbench.errors import SpecbenchError
    from specbench.schemas.results import ResultsDir, removed_if_refused
    from tests.helpers import results_manifest

    out = tmp_path / "r"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(SpecbenchError), removed_if_refused(out):
        ResultsDir(out).open(results_manifest(), resume=False)
        (out / "snapshots.jsonl").write_text("{}\n")
        raise SpecbenchError("refused")
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    with pytest.raises(SpecbenchError), removed_if_refused(out):  # rows written: kept for --resume
        ResultsDir(out).open(results_manifest(), resume=False)
        (out / ROWS).write_text("{}\n")
        raise SpecbenchError("refused")
    assert (out / ROWS).exists()
    with pytest.raises(SpecbenchError, match="results already exist"), removed_if_refused(out):
        ResultsDir(out).open(results_manifest(), resume=False)  # another run's directory: left as it is
    assert (out / ROWS).read_text() == "{}\n"
