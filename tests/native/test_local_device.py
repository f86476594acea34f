"""LocalDevice and specbench.world.runner on the tiny fixtures: jobs, errors, profiling, tracing and
native runs through the real runner binary."""

from __future__ import annotations

import json
import os
import stat
import sys
from dataclasses import replace

import pytest

from specbench.core.decomposition import after_producer
from specbench.core.methods.configs import SdConfig, TargetConfig
from specbench.core.pricing import decode_ratio
from specbench.core.stability import decode_warnings, stability_warnings
from specbench.errors import SpecbenchError
from specbench.schemas.fileio import load_yaml
from specbench.schemas.placement import resolve
from specbench.schemas.profiles import load_profile, profile_to_dict
from specbench.schemas.results import ROW_FIELDS, load_results
from specbench.schemas.traces import load_trace_dir, load_trace_file
from specbench.schemas.windows import make_text_window
from specbench.world.decode_run import NativePlan, native_steps, run_native
from specbench.world.devices.base import Device
from specbench.world.devices.local import LocalDevice
from specbench.world.overheads import decode_lanes, serial_forwards
from specbench.world.profiling import SweepPlan, profile_device, write_profile
from specbench.world.runner import run_job, version_info
from specbench.world.tracing import gguf_n_vocab, trace_windows

TEXTS = ["hello the world", "in the heat", "a tale of the tin", "the end", "heat in the tin", "the tea"]


def windows(n=len(TEXTS), cap=20):
    return [make_text_window(f"w{i}", text, "Repeat this.", cap, "tiny", "dev" if i < 2 else "test")
            for i, text in enumerate(TEXTS[:n])]


def test_local_device_is_a_device_and_describes_the_host(device):
    assert isinstance(device, Device)
    info = device.describe()
    assert info["name"] == "local" and info["abi"].endswith("-linux") and info["cores"] >= 1
    snap = device.snapshot()
    assert snap["cores"] >= 1 and len(snap["load"]) == 3 and "time" in snap
    assert device.runner().protocol == 1 and len(device.runner().sha256) == 64


def test_snapshot_reads_governor_and_thermal_where_present(tmp_path):
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/cpuinfo").write_text("processor\t: 0\nmodel name\t: Test CPU 9000\n")
    (tmp_path / "proc/loadavg").write_text("0.50 0.25 0.10 1/100 42\n")
    freq = tmp_path / "sys/devices/system/cpu/cpu0/cpufreq"
    freq.mkdir(parents=True)
    (freq / "scaling_governor").write_text("performance\n")
    (freq / "scaling_cur_freq").write_text("2400000\n")
    zone = tmp_path / "sys/class/thermal/thermal_zone0"
    zone.mkdir(parents=True)
    (zone / "temp").write_text("47500\n")
    (zone / "type").write_text("cpu-thermal\n")
    snap = LocalDevice(sys_root=tmp_path).snapshot()
    assert snap["cpu_model"] == "Test CPU 9000" and snap["load"] == [0.5, 0.25, 0.1]
    assert snap["governor"] == "performance" and snap["cpu0_freq_mhz"] == 2400
    assert snap["thermal_c"] == {"thermal_zone0:cpu-thermal": 47.5}
    assert "governor" not in LocalDevice(sys_root=tmp_path / "nothing").snapshot()


def test_sweep_streams_every_line_through_run_job(device, tiny):
    seen = []
    job = {"mode": "sweep", "threads": 1, "target": {"path": str(tiny.target)}, "widths": [1, 2],
           "depths": [0, 16], "repetitions": 5}
    out = device.run_job(job, seen.append)
    assert {(r["width"], r["depth"]) for r in out.results} == {(1, 0), (2, 0), (1, 16), (2, 16)}
    assert seen[0]["event"] == "runner" and seen[-1]["event"] == "done" and out.wall_s > 0


def test_runner_errors_become_specbench_errors(device, tiny, tmp_path):
    with pytest.raises(SpecbenchError, match=r"runner: unknown job key 'windwos'") as err:
        device.run_job({"mode": "decode", "target": {"path": str(tiny.target)}, "methods": [{"name": "target"}],
                        "windows": [{"prompt": [1], "cap": 2}], "windwos": []})
    assert "known keys" in err.value.hint
    with pytest.raises(SpecbenchError, match="target model file not found"):
        device.run_job({"mode": "sweep", "target": {"path": str(tmp_path / "missing.gguf")}})
    corrupt = tmp_path / "corrupt.gguf"
    corrupt.write_bytes(b"GGUF" + os.urandom(64))
    with pytest.raises(SpecbenchError, match="runner: "):
        device.run_job({"mode": "sweep", "target": {"path": str(corrupt)}})


def test_a_crash_is_an_error_with_the_stderr_tail(tmp_path):
    fake = tmp_path / "fake-runner"
    fake.write_text(f"#!{sys.executable}\nimport sys, os\nprint('{{\"event\": \"runner\"}}', flush=True)\n"
                    "print('ggml: something broke', file=sys.stderr, flush=True)\nos.abort()\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    with pytest.raises(SpecbenchError, match=r"runner exited with signal SIGABRT on a sweep job .*something broke"):
        run_job(fake, {"mode": "sweep"})


def fake_version(tmp_path, doc: dict):
    """A runner whose --version prints `doc`."""
    fake = tmp_path / "fake-runner"
    fake.write_text(f"#!{sys.executable}\nprint({json.dumps(json.dumps(doc))})\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    return fake


VERSION = {"runner": "specbench-runner", "version": "0.1.0", "protocol": 1, "llama_cpp_commit": "abc",
           "modes": ["decode", "sweep"], "methods": ["sd", "target"], "system_info": ""}


def test_version_lists_the_modes_and_methods_a_device_offers(tmp_path):
    device = LocalDevice(runner=fake_version(tmp_path, VERSION))
    assert device.runner().modes == ("decode", "sweep") and device.runner().methods == ("sd", "target")


@pytest.mark.parametrize("key", ["methods", "modes"])
def test_a_runner_whose_version_lacks_modes_or_methods_is_refused_naming_it(tmp_path, key):
    fake = fake_version(tmp_path, {k: v for k, v in VERSION.items() if k != key})
    with pytest.raises(SpecbenchError, match=f"^{fake}: --version key '{key}': expected a list of names, got None"):
        LocalDevice(runner=fake).runner()



def test_version_output_names_the_runner_file_it_came_from(tmp_path):
    shown = "phone S1: runners/aarch64-linux/specbench-runner"
    assert version_info("Illegal instruction\n", tmp_path, shown, "0" * 64) is None  # the caller says why
    with pytest.raises(SpecbenchError, match=f"^{shown}: runner protocol 2 is not one this specbench speaks"):
        version_info(json.dumps(VERSION | {"protocol": 2}), tmp_path, shown, "0" * 64)

def split_placement(device):
    if len(device.cpus()) < 2:
        pytest.skip("the split placement needs two CPUs")
    return resolve("split", device.cpus(), device.processors())


# serial: its co-scheduling cells must clear the ratio floor on load, and a test beside it on two cores once
# drove a tiny model's ratio to 0.35 (floor 0.40) in a fresh-clone run
@pytest.mark.serial
def test_profile_of_the_tiny_models_loads(device, models, tmp_path):
    target, near = models
    plan = SweepPlan(tuple(range(1, 10)), tuple(range(1, 9)), (0, 32), split_placement(device), 5)
    ticks = []
    run = profile_device(device, target, [near], plan, ticks.append)
    assert sum(ticks) == plan.forwards([near])
    write_profile(tmp_path / "p.yaml", run)
    profile = load_profile(tmp_path / "p.yaml")
    assert profile.target_costs.widths() == list(range(1, 10)) and list(profile.target_costs.depths) == [0, 32]
    assert profile.drafter("near").costs.widths() == list(range(1, 9))
    assert profile.target_model.sha256 == target.sha256
    assert profile.snapshot.before and profile.snapshot.after
    # the one writer keeps every field the profile measured: notes, threads, spreads, repetitions
    assert profile_to_dict(profile) == profile_to_dict(run.profile) == load_yaml(tmp_path / "p.yaml")
    assert profile.notes.startswith("sweep: warmup 1, 5 repetitions")
    assert (profile.target_threads, profile.drafter("near").threads) == (1, 1)
    assert set(profile.target_costs.spread) == set(profile.target_costs.repetitions) == set(range(1, 10))
    assert all((n == 5).all() for n in profile.target_costs.repetitions.values())
    assert profile.target_costs.precision is None  # a fixed count
    samples = [json.loads(line) for line in (tmp_path / "p.samples.jsonl").read_text().splitlines()]
    forwards = [s for s in samples if s["kind"] == "forward"]
    assert len(forwards) == plan.forwards([near]) and all(len(s["samples_us"]) == 5 for s in forwards)
    # the co-scheduling records keep their samples too, per width and depth measured
    cosched = [s for s in samples if s["kind"] == "cosched"]
    assert {(s["width"], s["depth"]) for s in cosched} == {(w, d) for w in plan.widths for d in plan.depths}
    assert all(s["model_name"] == "near" and len(s["samples"]["target_alone_us"]) == 5 for s in cosched)
    # one runner job of the fixed count, its seeded width order recorded with the cell
    assert all(len(s["jobs"]) == 1 and s["jobs"][0]["width_order"][s["jobs"][0]["order"]] == s["width"]
               for s in cosched)
    # the overheads decodes' op logs are kept, and the target's decode ratio comes back from them alone
    decodes = [s for s in samples if s["kind"] == "decode"]
    assert {s["model_name"] for s in decodes} == {"near"}
    assert {s["method"]["name"] for s in decodes} == {"target", "as2d", "sd"}
    again = decode_ratio(serial_forwards(decodes)["target"], profile.target_costs)
    assert again is not None and again.realised == pytest.approx(profile.target_costs.decode.realised)
    # every stored warning is one of these samples' timings, judged by the same rule, or a decode ratio below 1
    # the profile prices as 1 (tiny models' decodes in split can realise one)
    assert list(profile.warnings) == stability_warnings(samples) + decode_warnings(list(profile.drafters.values()))
    # the placement is recorded, with each lane's CPU set as the kernel reported it back
    assert profile.placement == plan.placement and profile.name == "local@split"
    lanes = profile.pinning
    assert lanes["target"].read_back == (device.cpus()[0],) and lanes["drafter"].read_back == (device.cpus()[1],)
    cosched = profile.drafter("near").cosched  # measured at every profiled depth
    assert list(cosched.depths) == [0, 32] and all(len(v) == 2 for v in cosched.rho_target.values())
    assert cosched.precision is None and all((n == 5).all() for n in cosched.repetitions.values())
    assert set(cosched.achieved_precision) == set(cosched.rho_target)
    # the overheads' AS2D decodes gave the target's ratio as a decode meets it, priced from then on
    assert cosched.decode is not None and cosched.decode.forwards >= 1
    # at every depth, each width at its class's ratio (single-token steps, verifications), else at the cells'
    # ratio as the decodes calibrate them
    cells = replace(cosched, decode=None)
    for width in (1, 2, 9):
        by_class = cosched.decode.target(width)
        for depth in (0, 32):
            expected = (by_class if by_class is not None
                        else cells.ratios(width, depth)[0] * cosched.decode.calibration)
            assert cosched.ratios(width, depth)[0] == pytest.approx(expected)
    assert "the target's co-scheduling ratio priced as those AS2D decodes realised it" in profile.notes
    # and the producer's pace against the target's from one decode of a window to the next: 3 windows, each twice
    assert cosched.decode.pace_pairs == 3 and 0 <= cosched.decode.pace_sigma < 1
    assert "AS2D priced at the mean over the producer's pace scatter" in profile.notes
    # the target's forwards after the producer's last step, by width, their time over their solo work, as the stored
    # AS2D decodes give them; whether any ran there is the host's timing (a slow producer outlasts the target)
    after, again = cosched.decode.after, after_producer(decode_lanes(decodes), profile.target_costs)
    assert (after is None) == (again is None)
    if after is not None:
        assert after.widths.keys() == again.widths.keys() and sum(n for _, _, n in after.widths.values()) >= 1
        assert all(seconds == pytest.approx(s) and solo == pytest.approx(o) and n == m and seconds > 0 and solo > 0
                   for (seconds, solo, n), (s, o, m) in zip(after.widths.values(), again.widths.values(), strict=True))
    assert ("once the producer is done, the target alone at the ratio" in profile.notes) == (after is not None)


def test_trace_appends_per_window_and_resumes(device, models, tmp_path):
    target, near = models
    items = windows()
    path, count = trace_windows(device, items[:2], target, near, tmp_path, k_max=8, threads=1)
    assert count == 2 and set(load_trace_file(path).windows) == {"w0", "w1"}
    with pytest.raises(SpecbenchError, match="already exists"):
        trace_windows(device, items, target, near, tmp_path, k_max=8)
    with open(path, "a") as handle:  # an interrupted write: half a line
        handle.write('{"window_id": "w2", "y": [1')
    path, count = trace_windows(device, items, target, near, tmp_path, k_max=8, resume=True, threads=1)
    assert count == len(items) - 2
    traces = load_trace_dir(tmp_path)["near"]
    assert list(traces.windows) == [w.window_id for w in items]
    assert traces.target.sha256 == target.sha256 and traces.windows["w0"].drafts.k_max == 8
    # the header's vocabulary sizes (read from the GGUF metadata) are what the runner loaded
    loaded = device.loaded()[device.model_path(target.path)]
    assert traces.target.n_vocab == traces.drafter.n_vocab == loaded["n_vocab"] == gguf_n_vocab(near.path)


def test_native_rows_have_the_replay_columns_and_resume(device, models, tmp_path):
    target, near = models
    items = windows(4)
    configs = [TargetConfig(), SdConfig(3), SdConfig(5)]
    plan = NativePlan(device, items[:2], target, (near,), configs, split_placement(device), windows_path="w.jsonl")
    outcome = run_native(plan, tmp_path / "r", resume=False)
    added, diverged = outcome.added, outcome.diverged
    assert added == 6
    manifest, rows = load_results(tmp_path / "r")
    assert list(rows.columns) == list(ROW_FIELDS) and manifest.mode == "native"
    assert manifest.placement == plan.placement and (rows["placement"] == plan.placement.key).all()
    pinning = [json.loads(line) for line in (tmp_path / "r" / "pinning.jsonl").read_text().splitlines()]
    read_back = {lane["lane"]: lane["read_back"] for lane in pinning[0]["read_back"]["lanes"]}
    assert read_back == {"target": list(plan.placement.target.cpus), "drafter": list(plan.placement.drafter.cpus)}
    assert (rows["source"] == "native").all() and rows["lossless"].sum() == 6 - diverged
    ok = rows[rows["lossless"]]
    assert (ok["decode_s"] > 0).all() and (abs(ok["d_s"] + ok["v_s"] + ok["h_s"] - ok["decode_s"]) < 1e-3).all()
    target_rows = ok[ok["method"] == "target"]
    assert (target_rows["target_forwards"] == target_rows["tokens"]).all()
    # resume over all four windows: only the two new ones run
    full = NativePlan(device, items, target, (near,), configs, split_placement(device), windows_path="w.jsonl")
    with pytest.raises(SpecbenchError, match="differs"):
        run_native(full, tmp_path / "r", resume=True)  # another windows file is another run


def test_native_resume_skips_finished_windows(device, models, tmp_path):
    target, near = models
    items = windows(3)
    configs = [TargetConfig(), SdConfig(4)]
    plan = NativePlan(device, items, target, (near,), configs, split_placement(device), windows_path="w.jsonl")
    added = run_native(plan, tmp_path / "r", resume=False).added
    assert added == 6
    rows_path = tmp_path / "r" / "rows.jsonl"
    lines = rows_path.read_text().splitlines()
    rows_path.write_text("\n".join(lines[:2]) + "\n" + lines[2][:30])  # "killed" during window 2
    added = run_native(plan, tmp_path / "r", resume=True).added
    assert added == 4
    _, rows = load_results(tmp_path / "r")
    assert len(rows) == 6 and sorted(rows["window_id"].unique()) == ["w0", "w1", "w2"]
    assert rows.duplicated(["config", "window_id"]).sum() == 0


def test_repeated_native_runs_count_samples_and_resume_whole_windows(device, models, tmp_path):
    target, near = models
    items = windows(3)
    configs = [TargetConfig(), SdConfig(4)]
    plan = NativePlan(device, items, target, (near,), configs, split_placement(device), windows_path="w.jsonl",
                      runs=2, warmup=1)
    ticks = []
    added = run_native(plan, tmp_path / "r", resume=False, progress=ticks.append).added
    assert added == 6 and ticks == [1] * (3 * 2) and sum(ticks) == native_steps(plan)  # one per sample of a window
    _, rows = load_results(tmp_path / "r")
    assert all(len(s) == 2 for s in rows.loc[rows["lossless"], "samples_s"])
    rows_path = tmp_path / "r" / "rows.jsonl"
    lines = rows_path.read_text().splitlines()
    rows_path.write_text("\n".join(lines[:2]) + "\n")  # killed during window 1: its samples are not rows yet
    ticks.clear()
    added = run_native(plan, tmp_path / "r", resume=True, progress=ticks.append).added
    assert added == 4 and sum(ticks) == native_steps(plan)
    _, rows = load_results(tmp_path / "r")
    assert len(rows) == 6 and all(len(s) == 2 for s in rows.loc[rows["lossless"], "samples_s"])


@pytest.mark.parametrize("runs, warmup, flag", [(0, 0, "--runs 0"), (1, -1, "--warmup -1"), (True, 0, "--runs True")])
def test_repeat_counts_out_of_range_are_refused_naming_the_flag(device, models, runs, warmup, flag):
    target, near = models
    with pytest.raises(SpecbenchError, match=f"^{flag}: expected an integer >= "):
        NativePlan(device, windows(1), target, (near,), [TargetConfig()], split_placement(device), runs=runs,
                   warmup=warmup)
