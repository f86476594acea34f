"""The environment block of native results, profiles and trace headers, from the real runner
on the tiny fixtures: the build that ran, the models as llama.cpp loaded them (checked against
the GGUF files read with `gguf`), the host, the command line and the session times."""

from __future__ import annotations

import json
import sys
from datetime import datetime

from specbench.core.methods.configs import SdConfig, TargetConfig
from specbench.schemas.environment import Environment, manifest_environment
from specbench.schemas.fileio import Where, file_sha256, load_yaml
from specbench.schemas.placement import resolve
from specbench.schemas.profiles import load_profile
from specbench.schemas.results import load_results
from specbench.schemas.traces import load_trace_dir
from specbench.schemas.windows import make_text_window
from specbench.world.decode_run import NativePlan, run_native
from specbench.world.devices.local import LocalDevice
from specbench.world.model_files import ModelFile
from specbench.world.profiling import SweepPlan, profile_device, write_profile
from specbench.world.tracing import trace_windows

TEXTS = ["hello the world", "in the heat", "a tale of the tin"]


def windows(n=len(TEXTS)):
    return [make_text_window(f"w{i}", text, "Repeat this.", 12, "tiny", "test") for i, text in enumerate(TEXTS[:n])]


def moment(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def clock() -> datetime:
    """Now, cut to the block's milliseconds."""
    now = datetime.now().astimezone()
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def gguf_counts(path) -> tuple[int, int]:
    """(parameters, tensor bytes) of a GGUF file, summed over its tensors by the `gguf` reader."""
    from gguf import GGUFReader

    tensors = GGUFReader(str(path)).tensors
    return sum(int(t.n_elements) for t in tensors), sum(int(t.n_bytes) for t in tensors)


def check_models(env: Environment, expected: list[tuple[str, ModelFile]]) -> None:
    assert [(m.role, m.name, m.sha256) for m in env.models] == [(r, f.name, file_sha256(f.path)) for r, f in expected]
    for loaded, (_, model) in zip(env.models, expected):
        n_params, n_bytes = gguf_counts(model.path)
        assert loaded.n_params == n_params and loaded.size_bytes == n_bytes
        assert loaded.size_bytes < model.path.stat().st_size  # the file adds its header and vocabulary
        assert loaded.desc.startswith("qwen3 ")  # llama_model_desc: architecture, size class, file type


def check_host(env: Environment, runner, started_after: datetime) -> None:
    assert env.runner.sha256 == file_sha256(runner) and env.runner.system_info.startswith("CPU :")
    assert env.argv == tuple(sys.argv)
    assert started_after <= moment(env.started) <= moment(env.finished)
    host = env.device
    assert host.kind == "local" and host.cores == LocalDevice().describe()["cores"] > 0
    assert set(host.snapshot) == {"before", "after"} and "time" in host.snapshot["after"]
    assert host.governor == host.snapshot["before"].get("governor")  # None where cpufreq is hidden, never a guess


def test_native_manifest_records_build_models_host_and_times(device, models, runner, tmp_path):
    target, near = models
    placement = resolve("split", device.cpus(), device.processors())
    plan = NativePlan(device, windows(2), target, (near,), [TargetConfig(), SdConfig(3)], placement,
                      windows_path="w.jsonl")
    started = clock()
    run_native(plan, tmp_path / "r", resume=False)
    manifest, _ = load_results(tmp_path / "r")
    env = manifest.environment
    check_host(env, runner, started)
    check_models(env, [("target", target), ("drafter", near)])
    raw = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert env.resumes == () and "runner" not in raw and "command" not in raw  # one record of each

    # a resume keeps the first session and lists the new one; the end moves to the resume's end
    rows = tmp_path / "r" / "rows.jsonl"
    rows.write_text("\n".join(rows.read_text().splitlines()[:2]) + "\n")
    resumed_at = clock()
    run_native(plan, tmp_path / "r", resume=True)
    again = load_results(tmp_path / "r")[0].environment
    assert (again.started, again.argv, again.models, again.runner) == (env.started, env.argv, env.models, env.runner)
    assert len(again.resumes) == 1 and moment(again.resumes[0].started) >= resumed_at
    assert moment(again.finished) >= moment(again.resumes[0].started) >= moment(env.finished)


def test_profile_records_build_models_host_and_times(device, models, runner, tmp_path):
    target, near = models
    plan = SweepPlan((1, 2), (1, 2), (0,), resolve("split", device.cpus(), device.processors()), 5)
    started = clock()
    write_profile(tmp_path / "p.yaml", profile_device(device, target, [near], plan))
    profile = load_profile(tmp_path / "p.yaml")
    check_host(profile.environment, runner, started)
    check_models(profile.environment, [("target", target), ("drafter", near)])
    # the build is kept once, in the environment; the profile's runner is read from there
    assert profile.runner.sha256 == file_sha256(runner) and "runner" not in load_yaml(tmp_path / "p.yaml")


def test_trace_header_records_build_models_and_each_session(device, models, runner, tmp_path):
    target, near = models
    started = clock()
    path, _ = trace_windows(device, windows(1), target, near, tmp_path, k_max=4, threads=1)
    env = load_trace_dir(tmp_path)["near"].environment
    assert env.runner.sha256 == file_sha256(runner) and env.argv == tuple(sys.argv)
    assert started <= moment(env.started) <= moment(env.finished)
    check_models(env, [("target", target), ("drafter", near)])
    first_window = path.read_text().splitlines()[1]
    trace_windows(device, windows(3), target, near, tmp_path, k_max=4, resume=True, threads=1)
    lines = path.read_text().splitlines()
    again = load_trace_dir(tmp_path)["near"]
    assert lines[1] == first_window and len(again.windows) == 3  # the header is replaced, the windows kept
    assert again.environment.started == env.started and len(again.environment.resumes) == 1
    assert moment(again.environment.finished) >= moment(again.environment.resumes[0].started)
    assert json.loads(lines[0])["environment"]["models"] == json.loads(json.dumps(
        [vars(m) for m in env.models]))
