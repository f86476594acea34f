"""`specbench profile | trace | run --native | demo` through the real runner on the tiny
fixtures (and one run of the demo on the real demo models when they are cached)."""

from __future__ import annotations

import json
import stat
import statistics
import sys
from dataclasses import replace

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from specbench.app.report import load_many
from specbench.cli import main
from specbench.core import metrics
from specbench.core.pricing import CLASS_FORWARDS
from specbench.errors import SpecbenchError
from specbench.schemas.placement import resolve
from specbench.schemas.profiles import load_profile
from specbench.schemas.results import ROW_FIELDS, Repeats, load_results
from specbench.schemas.traces import load_trace_dir
from specbench.schemas.windows import make_text_window, save_windows
from specbench.world.build import host_abi
from specbench.world.devices.local import LocalDevice
from specbench.world.profiling import ProfileRun, judged, samples_path, write_profile

# the study's split profile refuses co-scheduling ratios a busy host makes below 1 (a fresh clone of 1fb67ee met a
# rho_drafter of 0.33 against a floor of 0.35 with another test worker beside it)
pytestmark = pytest.mark.serial

TEXTS = ["hello the world", "in the heat", "a tale of the tin", "the end", "heat in the tin"]
SPECASR = "specasr:k_max=4,tau=0.3|0.6"


def invoke(*args, env=None):
    result = CliRunner().invoke(main, [str(a) for a in args], env=env)
    return result.exit_code, result.output


def error_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1, output
    assert lines[0].startswith("Error: "), output
    return lines[0]


@pytest.fixture(scope="module")
def study(tmp_path_factory, tiny, runner):
    """Profile, traces and windows made with the CLI once for the module."""
    root = tmp_path_factory.mktemp("native-cli")
    windows = root / "windows.jsonl"
    save_windows(windows, [make_text_window(f"w{i}", t, "Repeat this.", 16, "tiny", "dev" if i < 2 else "test",
                                            category="even" if i % 2 == 0 else "odd")
                           for i, t in enumerate(TEXTS)])
    profile = root / "profiles" / "local.yaml"
    code, profile_output = invoke("profile", "local", "--target", tiny.target, "--drafter", f"near={tiny.near}",
                                  "--max-width", 9, "--depths", "0,32", "--placement", "split", "--overheads-windows", 2,
                                  "--windows", windows, "--out", profile)
    assert code == 0, profile_output
    code, output = invoke("trace", windows, "--target", tiny.target, "--drafter", f"near={tiny.near}",
                          "--k-max", 8, "--specasr", SPECASR, "--threads", 1, "--out", root / "traces")
    assert code == 0, output
    return {"root": root, "windows": windows, "profile": profile, "traces": root / "traces", "tiny": tiny,
            "runner": runner, "profile_output": profile_output}


def native_args(study, out, *extra):
    tiny = study["tiny"]
    return ["run", study["windows"], "--device", "local", "--native", "--target", tiny.target,
            "--drafter", f"near={tiny.near}", "--methods", "target,sd", "--profile", study["profile"],
            "--out", out, *extra]


def replay_args(study, out):
    return ["run", study["windows"], "--traces", study["traces"], "--profile", study["profile"],
            "--methods", "target,sd", "--drafter", "near", "--out", out]


@pytest.fixture(scope="module")
def runs(study):
    """The study's native run of target and SD checked against its traces, and their replay, made once for
    the tests that read them (none writes into them)."""
    root = study["root"] / "runs"
    code, output = invoke(*native_args(study, root / "native", "--traces", study["traces"]))
    assert code == 0, output
    code, output = invoke(*replay_args(study, root / "replay"))
    assert code == 0, output
    return {"root": root, "native": root / "native", "replay": root / "replay"}


def test_profile_is_a_loadable_profile(study):
    profile = load_profile(study["profile"])
    assert profile.name == "local@split" and profile.target_costs.widths() == list(range(1, 10))
    assert profile.drafter("near").costs.widths() == list(range(1, 10))
    assert profile.snapshot.before["cores"] >= 1 and profile.snapshot.after
    assert profile.runner.protocol == 1
    # AS2D's non-model costs come from a native as2d decode (microseconds, never negative)
    overheads = profile.overheads
    assert 0 <= overheads.producer_startup_s < 1 and 0 <= overheads.publish_s < 1 and 0 <= overheads.align_s < 1
    # --windows with --overheads-windows 2: the study's windows hold 80 of the two copies' 96 tokens, so all five
    # and the first again, each decoded twice by each method
    assert "overheads: native as2d[B=7] and sd[W=5], 2 runs of 6 windows of the workload (96 tokens of cap)" in \
        yaml.safe_load(study["profile"].read_text())["notes"]
    # every forward priced at its model's ratio in those SD and target-only decodes, each class at its own
    for table in (profile.target_costs, profile.drafter("near").costs):
        assert table.decode is not None and table.decode.single_forwards >= CLASS_FORWARDS
        assert table.decode.wider_forwards >= CLASS_FORWARDS and table.decode.realised > 0
        assert table.cost(1, 0) == pytest.approx(table.seconds[1][0] * table.decode.single)
        # and the host work those decodes did after each forward, timed from the runner's op starts
        host = table.decode.host
        assert host is not None and host.forwards == table.decode.forwards and host.single is not None
        assert 0 <= host.single < 1 and table.price(1, 0) == table.cost(1, 0) + host.single


def test_traces_load_and_replay_for_target_and_sd(study, runs):
    traces = load_trace_dir(study["traces"])
    assert list(traces) == ["near"] and len(traces["near"].windows) == len(TEXTS)
    _, rows = load_results(runs["replay"])
    assert len(rows) == len(TEXTS) * 5 and rows["lossless"].all()


def test_native_rows_have_the_replay_columns(runs):
    manifest, native = load_results(runs["native"])
    assert manifest.mode == "native" and manifest.reference == "trace"
    assert list(native.columns) == list(ROW_FIELDS)
    assert len(native) == len(TEXTS) * 5 and set(native["source"]) == {"native"}
    _, replay = load_results(runs["replay"])
    assert list(replay.columns) == list(native.columns)
    assert sorted(replay["config"].unique()) == sorted(native["config"].unique())
    # every row, native or replayed, carries its window's category
    for rows in (native, replay):
        assert (rows["category"] == rows["window_id"].map(lambda w: "even" if int(w[1:]) % 2 == 0 else "odd")).all()
    ok = native[native["lossless"]].merge(replay, on=["config", "window_id"], suffixes=("_n", "_r"))
    assert (ok["tokens_n"] == ok["tokens_r"]).all() and (ok["target_forwards_n"] == ok["target_forwards_r"]).all()
    # per-position acceptance: the runner's op log and replay count the same verifications
    assert (ok["reached_at_n"] == ok["reached_at_r"]).all() and (ok["accepted_at_n"] == ok["accepted_at_r"]).all()
    assert ok.loc[ok["config"] != "target", "reached_at_n"].map(len).gt(0).any()
    code, report = invoke("report", runs["native"], "--format", "md")
    assert code == 0 and "sd[W=5..8 mean,drafter=near]" in report


def test_replay_manifest_keeps_its_profiles_environment_and_the_bundle_lists_builds_and_models(study, runs,
                                                                                              tmp_path):
    replay = load_results(runs["replay"])[0]
    env = replay.environment
    # replay runs no runner on no device: its build, models and device are its profile's
    assert env.runner is None and env.device is None and env.models == () and env.argv == tuple(sys.argv)
    assert env.started <= env.finished  # one format (UTC, milliseconds, Z): text order is time order
    profiled = load_profile(study["profile"]).environment
    assert replay.profiles[0].environment == profiled
    code, output = invoke("report", runs["native"], runs["replay"], "--format", "md", "--bundle", tmp_path / "bundle")
    assert code == 0, output
    inputs = (tmp_path / "bundle" / "report.md").read_text().partition("## Inputs")[2].partition("## Reproduce")[0]
    rows = [line for line in inputs.splitlines() if line.startswith(f"| {runs['root']}")]
    target = next(m for m in profiled.models if m.role == "target")
    for row in rows:  # both runs name the runner build and the models llama.cpp loaded
        assert f"runner {profiled.runner.sha256[:12]}" in row and f"{target.n_params:,} params" in row
        assert f"target {target.name}: {target.desc}" in row


def test_traced_specasr_configurations_replay_as_they_run_natively(study, tmp_path):
    """`trace --specasr` records the recycling queries; replay then makes the runner's decisions."""
    code, output = invoke("run", study["windows"], "--traces", study["traces"], "--profile", study["profile"],
                          "--method", SPECASR, "--drafter", "near", "--out", tmp_path / "replay")
    assert code == 0, output
    tiny = study["tiny"]
    code, output = invoke("run", study["windows"], "--device", "local", "--native", "--target", tiny.target,
                          "--drafter", f"near={tiny.near}", "--method", SPECASR, "--profile", study["profile"],
                          "--out", tmp_path / "native")
    assert code == 0, output
    replay, native = (load_results(tmp_path / sub)[1] for sub in ("replay", "native"))
    replay, native = (rows[rows["method"] == "specasr"] for rows in (replay, native))
    assert len(replay) == len(native) == 2 * len(TEXTS) and native["lossless"].all()
    keys = ["config", "window_id"]
    both = native.merge(replay, on=keys, suffixes=("_n", "_r"))
    for column in ("tokens", "target_forwards", "proposed", "accepted", "drafter_forwards", "reached_at",
                   "accepted_at"):
        assert (both[f"{column}_n"] == both[f"{column}_r"]).all(), column


def test_trace_refuses_a_non_specasr_recycling_spec(study, tmp_path):
    code, output = invoke("trace", study["windows"], "--target", study["tiny"].target, "--drafter",
                          f"near={study['tiny'].near}", "--specasr", "sd:W=5", "--out", tmp_path / "t")
    assert code == 1 and "--specasr sd:W=5: expected specasr configurations" in error_line(output)


def test_native_run_resumes_without_redoing_finished_windows(study, tmp_path):
    out = tmp_path / "native"
    code, output = invoke(*native_args(study, out))
    assert code == 0, output
    rows_path = out / "rows.jsonl"
    lines = rows_path.read_text().splitlines()
    per_window = 5
    rows_path.write_text("\n".join(lines[:2 * per_window]) + "\n")  # as if killed after two windows
    code, output = invoke(*native_args(study, out))
    assert code == 1 and "--resume" in error_line(output)
    code, output = invoke(*native_args(study, out, "--resume"))
    assert code == 0, output
    assert f"{(len(TEXTS) - 2) * per_window} rows written" in output
    _, rows = load_results(out)
    assert len(rows) == len(TEXTS) * per_window and not rows.duplicated(["config", "window_id"]).any()
    kept = [json.loads(line) for line in rows_path.read_text().splitlines()[:2 * per_window]]
    assert kept == [json.loads(line) for line in lines[:2 * per_window]]


def test_runs_keep_every_sample_and_the_row_is_their_median(study, tmp_path):
    out = tmp_path / "native"
    repeats = ("--traces", study["traces"], "--runs", 3, "--warmup", 1)
    code, output = invoke(*native_args(study, out, *repeats))
    assert code == 0, output
    manifest, rows = load_results(out)
    assert manifest.repeats == Repeats(3, 1) and len(rows) == len(TEXTS) * 5
    ok = rows[rows["lossless"]]
    assert len(ok) and all(len(s) == 3 for s in ok["samples_s"])
    assert (ok["decode_s"] == ok["samples_s"].map(statistics.median)).all()
    assert rows.loc[~rows["lossless"], "samples_s"].isna().all()
    # the request clock of a row is its median decode's
    clocks = [json.loads(line) for line in (out / "request_clocks.jsonl").read_text().splitlines()]
    decode_us = {(c["config"], c["window_id"]): c["decode_us"] for c in clocks}
    assert all(decode_us[r.config, r.window_id] == round(r.decode_s * 1e6) for r in ok.itertuples())
    code, report = invoke("report", out, "--format", "md")
    assert code == 0 and "Native decode spread over repeated runs" in report
    # a resume must take every sample of a window: other counts are another run
    code, output = invoke(*native_args(study, out, "--traces", study["traces"], "--runs", 2, "--resume"))
    assert code == 1 and "manifest field 'repeats' differs" in error_line(output)
    lines = (out / "rows.jsonl").read_text().splitlines()
    (out / "rows.jsonl").write_text("\n".join(lines[:5]) + "\n")  # as if killed after one window
    code, output = invoke(*native_args(study, out, *repeats, "--resume"))
    assert code == 0 and f"{(len(TEXTS) - 1) * 5} rows written" in output
    _, rows = load_results(out)
    assert len(rows) == len(TEXTS) * 5 and all(len(s) == 3 for s in rows.loc[rows["lossless"], "samples_s"])


@pytest.mark.parametrize("flags, line", [
    (("--runs", 0), "Error: --runs 0: expected an integer >= 1"),
    (("--runs", "three"), "Error: --runs three: expected an integer"),
    (("--warmup", -1), "Error: --warmup -1: expected an integer >= 0"),
])
def test_bad_repeat_counts_are_one_line_and_write_nothing(study, tmp_path, flags, line):
    code, output = invoke(*native_args(study, tmp_path / "o", *flags))
    assert code == 1 and error_line(output) == line
    assert not (tmp_path / "o").exists()


def test_replay_refuses_repeat_counts(study, tmp_path):
    code, output = invoke("run", study["windows"], "--traces", study["traces"], "--profile", study["profile"],
                          "--methods", "target", "--drafter", "near", "--runs", 3, "--out", tmp_path / "o")
    assert code == 1 and error_line(output).startswith("Error: --runs is for --native runs")
    assert not (tmp_path / "o").exists()


def test_profile_prints_the_warnings_it_stores(study):
    """Whether this host's timings were stable is chance; what is stored is what was printed."""
    warnings = load_profile(study["profile"]).warnings
    output = study["profile_output"]
    assert [line for line in output.splitlines() if line.startswith("warning: ")] == \
        [f"warning: local: {w.message()}" for w in warnings]
    assert ("hint: " in output) == bool(warnings)


def noisy_profile(study, path, noisy):
    """The study's profile judged again on its own samples made quiet (every sample the median, no
    co-scheduling ratio below 1, in its cells or its decodes), but for target width 3 at depth 32 when `noisy` (one sample 1.5 x the median)."""
    samples = [json.loads(line) for line in samples_path(study["profile"]).read_text().splitlines()]
    for record in samples:
        if record["kind"] == "forward":
            median = record["median_us"]
            loud = noisy and record["model"] == "target" and (record["width"], record["depth"]) == (3, 32)
            record["samples_us"] = [median] * 4 + [median * (1.5 if loud else 1)]
        elif record["kind"] == "cosched":  # the overheads decodes' op logs are not judged
            record["samples"] = {k: [float(np.median(v))] * len(v) for k, v in record["samples"].items() if v}
            record.pop("below_one", None)
    profile = load_profile(study["profile"])
    drafters = {name: replace(d, cosched=replace(d.cosched, decode=replace(d.cosched.decode, below_one={})))
                if d.cosched is not None and d.cosched.decode is not None else d for name, d in profile.drafters.items()}
    write_profile(path, judged(ProfileRun(replace(profile, drafters=drafters), samples)))
    return path


def test_the_report_shows_the_unstable_timings_of_the_runs_profiles(study, tmp_path):
    for name, noisy in (("quiet", False), ("noisy", True)):
        profile = noisy_profile(study, tmp_path / f"{name}.yaml", noisy)
        methods = ("--methods", "target", "--method", "sd:W=5")
        code, output = invoke("run", study["windows"], "--traces", study["traces"], "--profile", profile, *methods,
                              "--drafter", "near", "--out", tmp_path / f"replay-{name}")
        assert code == 0, output
        tiny = study["tiny"]
        code, output = invoke("run", study["windows"], "--device", "local", "--native", "--target", tiny.target,
                              "--drafter", f"near={tiny.near}", *methods, "--profile", profile,
                              "--out", tmp_path / f"native-{name}")
        assert code == 0, output
        code, output = invoke("report", tmp_path / f"replay-{name}", tmp_path / f"native-{name}", "--format", "json",
                              "--output", tmp_path / f"{name}.json")
        assert code == 0, output
        tables = {t["title"]: t for t in json.loads((tmp_path / f"{name}.json").read_text())}
        unstable = [t for title, t in tables.items() if title.startswith("Unstable profile timings")]
        if not noisy:
            assert unstable == []
            continue
        warnings = load_profile(profile).warnings
        assert [(w.model, w.table, w.width, w.depth) for w in warnings] == [("target", "CT", 3, 32)]
        replay, native = (load_results(tmp_path / f"{kind}-{name}")[0] for kind in ("replay", "native"))
        assert replay.profiles[0].warnings == native.placement_profile.warnings == warnings
        # one row, though both runs used the profile: the replay's and the native manifest carry it
        assert [(r["device"], r["table"], r["width"], r["depth"]) for r in unstable[0]["rows"]] == \
            [("local@split", "CT", 3, 32)]


def test_missing_model_file_is_one_line(study, tmp_path):
    code, output = invoke("trace", study["windows"], "--target", tmp_path / "nope.gguf", "--drafter",
                          f"near={study['tiny'].near}", "--out", tmp_path / "t")
    assert code == 1 and "model file not found" in error_line(output)
    code, output = invoke("profile", "local", "--target", study["tiny"].target, "--drafter",
                          f"d={tmp_path / 'nope.gguf'}", "--out", tmp_path / "p.yaml")
    assert code == 1 and "nope.gguf" in error_line(output)


def test_corrupt_model_is_one_line(study, tmp_path):
    corrupt = tmp_path / "corrupt.gguf"
    corrupt.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 200)
    code, output = invoke("profile", "local", "--target", corrupt, "--depths", "0", "--max-width", 2,
                          "--out", tmp_path / "p.yaml")
    assert code == 1 and error_line(output).startswith("Error: runner: ")
    assert not (tmp_path / "p.yaml").exists()


def test_unknown_job_key_is_one_line(study, tmp_path):
    """A runner that sees a job key it does not know (here injected by a wrapper) fails cleanly."""
    wrapper = tmp_path / "runner-with-typo"
    wrapper.write_text(
        f"#!{sys.executable}\nimport json, subprocess, sys\nreal = {str(study['runner'])!r}\n"
        "if sys.argv[1].startswith('--'):\n    sys.exit(subprocess.call([real] + sys.argv[1:]))\n"
        "job = json.load(open(sys.argv[1]))\njob['captain'] = 1\n"
        "sys.exit(subprocess.run([real, '-'], input=json.dumps(job), text=True).returncode)\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    code, output = invoke("trace", study["windows"], "--target", study["tiny"].target, "--drafter",
                          f"near={study['tiny'].near}", "--out", tmp_path / "t", env={"SPECBENCH_RUNNER": str(wrapper)})
    line = error_line(output)
    assert code == 1 and "unknown job key 'captain'" in line and "known keys" in line


def test_runner_dir_is_looked_in_first(study, tmp_path, monkeypatch):
    """--runner DIR (a directory of <abi>/specbench-runner) wins over the user data dir and the checkout's runners/."""
    monkeypatch.delenv("SPECBENCH_RUNNER", raising=False)
    monkeypatch.setenv("SPECBENCH_RUNNERS", "")  # --runner sets it for the process; restored after the test
    marker = tmp_path / "used"
    wrapper = tmp_path / "mine" / host_abi() / "specbench-runner"
    wrapper.parent.mkdir(parents=True)
    wrapper.write_text(f"#!/bin/sh\ntouch {marker}\nexec {study['runner']} \"$@\"\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    code, output = invoke("trace", study["windows"], "--target", study["tiny"].target, "--drafter",
                          f"near={study['tiny'].near}", "--k-max", 4, "--runner", tmp_path / "mine",
                          "--out", tmp_path / "t")
    assert code == 0, output
    assert marker.exists() and (tmp_path / "t" / "near.jsonl").exists()


def test_a_native_run_in_another_placement_than_its_profile_is_refused(study, tmp_path):
    code, output = invoke(*native_args(study, tmp_path / "o", "--placement", "shared"))
    profile = load_profile(study["profile"])
    shared = resolve("shared", LocalDevice().cpus(), LocalDevice().processors())
    assert code == 1 and error_line(output).startswith(
        f"Error: --placement {shared.key} differs from the placement of profile {study['profile']} "
        f"({profile.placement.key})")
    assert not (tmp_path / "o").exists()


def test_replay_and_native_rows_of_different_placements_are_never_paired(study, tmp_path):
    """Fidelity pairs a native row only with the replay of its own placement's profile."""
    code, output = invoke("run", study["windows"], "--traces", study["traces"], "--profile", study["profile"],
                          "--methods", "target", "--drafter", "near", "--out", tmp_path / "replay")
    assert code == 0, output
    tiny = study["tiny"]
    code, output = invoke("run", study["windows"], "--device", "local", "--native", "--target", tiny.target,
                          "--methods", "target", "--placement", "shared", "--out", tmp_path / "shared")
    assert code == 0, output
    loaded = load_many([tmp_path / "replay", tmp_path / "shared"])
    assert set(loaded.frame["device"]) == {"local@split", "local@shared"}
    with pytest.raises(SpecbenchError, match="no window was both replayed and run natively"):
        metrics.replay_fidelity(loaded.frame)
    code, output = invoke(*native_args(study, tmp_path / "split", "--methods", "target"))
    assert code == 0, output
    table = metrics.replay_fidelity(load_many([tmp_path / "replay", tmp_path / "split"]).frame)
    assert table["device"].tolist() == ["local@split"] and table["windows"].tolist() == [len(TEXTS)]


def test_native_refuses_replay_options_and_unknown_devices(study, tmp_path):
    code, output = invoke("run", study["windows"], "--device", "pixel9", "--native", "--target",
                          study["tiny"].target, "--out", tmp_path / "o")
    assert code == 1 and "Unknown device 'pixel9'. Available: local" in error_line(output)
    code, output = invoke("run", study["windows"], "--out", tmp_path / "o")
    assert code == 1 and "--traces and --profile" in error_line(output)


def _demo_models_cached() -> bool:
    from specbench.errors import SpecbenchError
    from specbench.world.demo_models import demo_model
    from specbench.world.runner import runner_path

    try:
        [demo_model(n, download=False) for n in ("smollm2-135m", "smollm2-135m-f16", "gemma3-270m")]
    except SpecbenchError:
        return False
    return runner_path().exists()


# serial: whether the target takes single-token steps beside the Q4_1 producer in the one overheads window rests on
# the producer keeping ahead, which a test beside it on two cores changed once in four runs (0 single steps of 19)
@pytest.mark.serial
@pytest.mark.slow
@pytest.mark.skipif(not _demo_models_cached(), reason="demo models or runner not cached (run `specbench demo` once)")
def test_demo_quick_on_the_real_demo_models(tmp_path, runner):
    """The one test with real models: `demo --quick --placement split` (3 windows, one configuration per
    method and drafter, profile cells at a fixed 5 forwards, one placement: the other is the same code)."""
    result = CliRunner().invoke(main, ["demo", "--quick", "--placement", "split", "--out", str(tmp_path / "demo")],
                                env={"SPECBENCH_RUNNER": str(runner), "COLUMNS": "80"})
    code, output = result.exit_code, result.output
    assert code == 0, output
    # a terminal gets one screen: the summary, the budget protocol, a line per kind of warning, where the
    # tables are; every line fits 80 columns, so no row wraps
    screen = result.stdout.splitlines()
    assert len(screen) <= 80 and max(map(len, screen)) <= 80, result.stdout
    assert "Pooled decode throughput" not in result.stdout
    words = " ".join(result.stdout.split())
    assert " detail tables (" in words and "pooled decode throughput, " in words
    assert f"{tmp_path / 'demo' / 'report.md'}" in "".join(result.stdout.split())
    report = (tmp_path / "demo" / "report.md").read_text()
    assert "Pooled decode throughput" in report and "Replay fidelity" in report
    for sub in ("windows.jsonl", "device_profiles/local-split.yaml", "traces/split/smollm2.jsonl", "report.md"):
        assert (tmp_path / "demo" / sub).exists(), sub
    assert not (tmp_path / "demo" / "device_profiles" / "local-shared.yaml").exists()  # --placement split only
    # each producer drafts its whole overheads decode (a prompt of arbitrary token ids sent Gemma to its end of
    # sequence after 8 steps), so the target's single-token steps beside it give their own ratio
    profile = load_profile(tmp_path / "demo" / "device_profiles" / "local-split.yaml")
    for drafter in profile.drafters.values():
        assert drafter.cosched.decode.single_forwards >= CLASS_FORWARDS, drafter.name
    # Gemma's GGUF stores no chat template: the demo names Gemma's own turn format for it
    traces = load_trace_dir(tmp_path / "demo" / "traces" / "split")
    assert traces["gemma3"].templates == {"target": "model", "drafter": "gemma"}
    assert traces["smollm2"].templates == {"target": "model", "drafter": "model"}
    # traced with the placement's lane threads (split: 1 a lane), as its native run decodes
    for trace in traces.values():
        assert trace.environment is not None
        assert {m.role: m.threads for m in trace.environment.models} == {"target": 1, "drafter": 1}
    assert not (tmp_path / "demo" / "traces" / "shared").exists()
    _, replay = load_results(tmp_path / "demo" / "results" / "replay-split")
    # --quick: one configuration per method and drafter, replayed and native
    assert set(replay["config"]) == {"target", "sd[W=5,drafter=smollm2]", "specasr[k_max=8,tau=0.5,drafter=smollm2]",
                                     "as2d[B=3,drafter=smollm2]", "sd[W=5,drafter=gemma3]", "as2d[B=3,drafter=gemma3]"}
    assert set(replay["device"]) == {"local@split"}
    manifest, native = load_results(tmp_path / "demo" / "results" / "native-split")
    # one native run per placement, each configuration drafted by the drafter it names, checked against its trace
    assert set(native["config"]) == {"target", "sd[W=5,drafter=smollm2]", "specasr[k_max=8,tau=0.5,drafter=smollm2]",
                                     "as2d[B=3,drafter=smollm2]", "sd[W=5,drafter=gemma3]", "as2d[B=3,drafter=gemma3]"}
    sha = {d.name: d.sha256 for d in manifest.drafters}
    assert list(sha) == ["smollm2", "gemma3"]
    drafted = native[native["method"] != "target"]
    assert (drafted["drafter_sha256"] == drafted["drafter"].map(sha)).all()
    assert drafted.loc[drafted["lossless"], "decisions_match"].map(lambda v: v is True).all()
    assert set(native["device"]) == {"local@split"}
    assert not (tmp_path / "demo" / "results" / "native-shared").exists()
    assert "speedup_vs_best_target" in report
    # the paper's protocol: a budget chosen on the dev windows, deployed on the test ones, the gap to the oracle
    words = " ".join(output.split())  # the protocol's lines wrap at 80 columns
    assert "The paper's protocol: an AS2D budget chosen on the dev windows" in words
    assert "local@split: budget as2d[B=" in words and "chosen on 2 dev windows; on 1 test window " in words
    assert (tmp_path / "demo" / "results" / "budgets" / "local-split.yaml").exists()
    assert "gap " in (tmp_path / "demo" / "report.md").read_text().split("### Summary")[0]


def test_demo_refuses_an_unknown_placement_before_any_work(tmp_path):
    code, output = invoke("demo", "--placement", "both", "--out", tmp_path / "demo")
    assert code == 2
    assert "Invalid value for '--placement': 'both' is not one of 'split', 'shared'." in output
    assert not (tmp_path / "demo").exists()
