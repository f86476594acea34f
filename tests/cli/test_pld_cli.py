"""`--drafter pld` (prompt lookup, no model) through the CLI on the tiny fixtures: profile,
trace, replay and native runs agree, and what pld cannot do is one line."""

from __future__ import annotations

import pytest

from specbench.core.methods.lookup import IDENTITY
from specbench.schemas.profiles import load_profile
from specbench.schemas.results import load_results
from specbench.schemas.traces import load_trace_dir
from specbench.schemas.windows import make_text_window, save_windows
from tests.cli.test_native_cli import error_line, invoke

TEXTS = ["the tin and the tin and the tin", "hello the world, hello the world", "in the heat"]
METHODS = ("--methods", "target", "--method", "sd:W=4|6,drafter=pld", "--method", "as2d:B=3,drafter=pld")


@pytest.fixture(scope="module")
def study(tmp_path_factory, tiny, runner):
    root = tmp_path_factory.mktemp("pld-cli")
    windows = root / "windows.jsonl"
    save_windows(windows, [make_text_window(f"w{i}", t, "Repeat this.", 16, "tiny", "test")
                           for i, t in enumerate(TEXTS)])
    profile = root / "local.yaml"
    code, output = invoke("profile", "local", "--target", tiny.target, "--drafter", "pld", "--max-width", 7,
                          "--depths", "0,32", "--placement", "split", "--out", profile)
    assert code == 0, output
    code, output = invoke("trace", windows, "--target", tiny.target, "--drafter", "pld", "--k-max", 8,
                          "--threads", 1, "--out", root / "traces")
    assert code == 0, output
    return {"root": root, "windows": windows, "profile": profile, "traces": root / "traces", "tiny": tiny}


def test_profile_and_trace_name_pld_by_its_identity(study):
    entry = load_profile(study["profile"]).drafter("pld")
    assert entry.model.sha256 == IDENTITY and entry.costs.widths() == [1] and entry.cosched is None
    traces = load_trace_dir(study["traces"])["pld"]
    assert traces.drafter.sha256 == IDENTITY and len(traces.windows) == len(TEXTS)
    assert all(w.drafts.lookup is not None and w.producer is not None for w in traces.windows.values())


def test_replay_makes_the_native_runs_decisions(study, tmp_path):
    code, output = invoke("run", study["windows"], "--traces", study["traces"], "--profile", study["profile"],
                          *METHODS, "--out", tmp_path / "replay")
    assert code == 0, output
    code, output = invoke("run", study["windows"], "--device", "local", "--native", "--target", study["tiny"].target,
                          "--drafter", "pld", *METHODS, "--profile", study["profile"], "--traces", study["traces"],
                          "--out", tmp_path / "native")
    assert code == 0, output
    replay, native = (load_results(tmp_path / sub)[1] for sub in ("replay", "native"))
    assert len(replay) == len(native) == 4 * len(TEXTS) and native["lossless"].all()
    both = native.merge(replay, on=["config", "window_id"], suffixes=("_n", "_r"))
    for column in ("tokens", "target_forwards", "proposed", "accepted", "drafter_forwards"):
        assert (both[f"{column}_n"] == both[f"{column}_r"]).all(), column
    code, report = invoke("report", tmp_path / "replay", tmp_path / "native", "--format", "md")
    assert code == 0, report
    assert "sd[W=4,drafter=pld]" in report and "as2d[B=3,drafter=pld]" in report


@pytest.mark.parametrize("args,needle", [
    (("--drafter", "pld=model.gguf"), "names the prompt-lookup drafter"),
    (("--drafter", "pld", "--specasr", "specasr:k_max=4,tau=0.5"), "has none"),
])
def test_what_pld_cannot_do_is_one_line(study, tmp_path, args, needle):
    code, output = invoke("trace", study["windows"], "--target", study["tiny"].target, *args, "--out", tmp_path)
    assert code == 1 and needle in error_line(output)


@pytest.mark.serial
def test_a_validation_of_pld_times_no_interims_between_its_passes(study, tmp_path):
    """A lookup drafter decodes nothing of its own to time again: its passes run back to back, and the block prices
    its decode ratios from its two refreshes."""
    code, output = invoke("validate", study["windows"], "--traces", study["traces"], "--target", study["tiny"].target,
                          "--drafter", "pld", "--method", "sd:W=4,drafter=pld", "--device", "local",
                          "--placement", "split", "--depths", "0", "--block-windows", 3, "--min-blocks", 1,
                          "--max-blocks", 1, "--probe-threshold", 100000, "--max-voids", 0, "--cooldown", 0,
                          "--repeats", 2, "--out", tmp_path / "val")
    assert code == 0, output
    where = tmp_path / "val" / "profiles" / "split-b000"
    assert (where / "profile.yaml").exists() and not list(where.glob("interim-*"))
    assert "timings between its passes" not in (where / "profile.yaml").read_text()
