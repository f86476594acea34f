"""`specbench validate` on emulated phones: end to end on the arm phone (the aarch64 runner under
qemu, the tiny models), and a block voided by a CPU slowdown injected mid-block."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from specbench.cli import main
from specbench.emuphone.faults import SlowFault
from specbench.schemas.profiles import load_profile
from specbench.schemas.validation import BlockRecord, DecodeRecord, ProbeRecord, SummaryRecord, load_records
from specbench.schemas.windows import make_text_window, save_windows

pytestmark = pytest.mark.serial  # the void rule keeps the quiet block only when nothing runs beside it


def invoke(*args):
    result = CliRunner().invoke(main, [str(a) for a in args])
    return result.exit_code, result.output


def study(tmp_path, tiny, serial, cap=10):
    windows = tmp_path / "windows.jsonl"
    save_windows(windows, [make_text_window(f"w{i}", t, "Repeat this.", cap, "tiny", "dev")
                           for i, t in enumerate(["hello the world", "in the heat"])])
    code, output = invoke("trace", windows, "--target", tiny.target, "--drafter", f"near={tiny.near}", "--k-max", 4,
                          "--device", serial, "--out", tmp_path / "traces")
    assert code == 0, output
    return windows


def validate_args(tmp_path, tiny, serial, windows, *extra):
    return ["validate", windows, "--traces", tmp_path / "traces", "--target", tiny.target, "--drafter",
            f"near={tiny.near}", "--method", "sd:W=3", "--device", serial, "--placement", "shared", "--depths", "0,16",
            "--overheads-windows", 1, "--out", tmp_path / "val", *extra]  # one copy: each refresh's serial decodes


@pytest.mark.slow
def test_validate_end_to_end_on_the_arm_phone(arm_phone, aarch64_runner, tiny, tmp_path):
    windows = study(tmp_path, tiny, arm_phone.serial)
    code, output = invoke(*validate_args(tmp_path, tiny, arm_phone.serial, windows, "--block-windows", 1,
                                         "--min-blocks", 2, "--max-blocks", 2, "--probe-threshold", 100000,
                                         "--cooldown", 0, "--seed", 7, "--precision", 0.5, "--max-repetitions", 7))
    assert code == 0, output
    out = tmp_path / "val"
    # the profile cells are measured as `profile --precision` measures them, within the bounds asked
    full = load_profile(out / "profiles" / "full-shared.yaml")
    assert full.target_costs.precision == 0.5
    counts = [n for per_depth in full.target_costs.repetitions.values() for n in per_depth]
    assert counts and all(5 <= n <= 7 for n in counts)
    # SD alone is never charged AS2D's overheads, so the validation does not time them
    assert "overheads not measured (cost tables only)" in full.notes and full.overheads.align_s == 0
    device = f"{arm_phone.serial}@shared"
    blocks = load_records(out, BlockRecord)
    assert [(b.device, b.block, b.attempt, b.voided, b.windows) for b in blocks] == \
        [(device, 0, 0, False, ["w0"]), (device, 1, 0, False, ["w1"])]
    assert all(b.seed == 7 and b.methods == {"near": ["sd[W=3,drafter=near]"]} for b in blocks)
    decodes = load_records(out, DecodeRecord)
    # per block and window: Na = [target, sd], Nb = [sd, target]
    assert sorted((d.block, d.run, d.slot, d.config) for d in decodes) == sorted(
        (b, run, slot, name) for b in (0, 1) for run in "ab" for slot, name in enumerate(["target", "sd[W=3,drafter=near]"]))
    probes = load_records(out, ProbeRecord)
    for b in (0, 1):  # around both refreshes, and in each pass (Na, then Nb) before the first window and after each
        mine = [(p.series, p.where, p.window_id) for p in probes if p.block == b]
        assert mine == [("refresh:near", "refresh-1 before", None), ("refresh:near", "refresh-1 after", None),
                        ("decode:near a0", "start", None), ("decode:near a0", "after", f"w{b}"),
                        ("decode:near b0", "start", None), ("decode:near b0", "after", f"w{b}"),
                        ("refresh:near", "refresh-2 before", None), ("refresh:near", "refresh-2 after", None)]
    summary = {(s.config, s.metric): s for s in load_records(out, SummaryRecord)}
    assert set(summary) == {("target", "throughput"), ("sd[W=3,drafter=near]", "throughput"),
                            ("sd[W=3,drafter=near]", "speedup")}
    for s in summary.values():
        assert s.device == device and s.blocks == 2 and s.observations == 1 + 1
        assert s.bias_low is not None and s.bias_low <= s.bias <= s.bias_high
        assert s.verdict.startswith(("within", "not shown"))
    for name in ("validation.md", "figures/validation-speedup.png", "profiles/shared-b001/profile.yaml"):
        assert (out / name).exists(), name
    code, report = invoke("report", out, "--format", "jsonl")
    assert code == 0, report
    titles = {json.loads(line)["title"] for line in report.splitlines()}
    assert "Replay fidelity: speedup over target-only (native: against the target-only decode beside it)" in titles
    assert "Sweep vs decode, per forward" in titles
    # each kept block's bias beside the pooled one: the two blocks, and their range
    [row] = [r for r in map(json.loads, report.splitlines()) if r["title"] == "Speedup bias per block"]
    assert row["config"] == "sd[W=3,drafter=near]" and {"block 0", "block 1", "range"} <= set(row)


@pytest.mark.slow
def test_a_block_slowed_mid_block_is_voided_and_redone_and_the_quiet_redo_kept(x86_phone, demo_model_path, tmp_path):
    """Real weights (SmolLM2-135M Q4_1 drafting for itself): a forward lasts milliseconds, so CPU
    contention shows in the probes (a tiny model's 50 µs forward fits between preemptions). A window voids
    when both its probes moved from those around the refreshes by more than the threshold and 3 times the
    probes' scatter (on a busy host single probes move tens of percent, and scatter as much). Each probe
    keeps its burst."""
    model = demo_model_path("smollm2-135m")
    models = type("Models", (), {"target": model, "near": model})
    windows = study(tmp_path, models, x86_phone.serial, cap=8)
    # the block's first decode pass (Na: the only jobs decoding with probes between windows; the refreshes'
    # serial decodes alternate their methods without) runs beside 3 busy processes per CPU: its forwards slow
    # about fourfold
    x86_phone.phone.faults.add_slowdowns(SlowFault(b'"runs": 1, "warmup_runs": 0, "probe"', hogs_per_cpu=3), 1)
    code, output = invoke(*validate_args(tmp_path, models, x86_phone.serial, windows, "--block-windows", 2,
                                         "--min-blocks", 1, "--max-blocks", 1, "--probe-threshold", 40,
                                         "--max-voids", 2, "--cooldown", 0))
    assert code == 0, output
    blocks = load_records(tmp_path / "val", BlockRecord)
    # the slowed attempt is voided and a quiet redo kept; on a busy host a redo may move past the threshold too
    # (one redo of 2026-12-05 moved 42.6%), and the rule voids it as well
    voided = [(b.attempt, b.voided) for b in blocks]
    assert voided[0] == (0, True) and voided[-1] == (len(blocks) - 1, False) and len(blocks) <= 3, \
        [b.drift_pct for b in blocks]
    assert "decode:near" in blocks[0].drift_series  # the slowed job's window, against the refreshes
    assert blocks[0].drift_pct > blocks[0].allowance_pct >= 40 and blocks[-1].drift_pct <= blocks[-1].allowance_pct
    probes = load_records(tmp_path / "val", ProbeRecord)
    assert probes and all(len(p.target_samples_us) == len(p.drafter_samples_us) == 5 for p in probes)
    assert "voided" in output  # every void is reported
    decodes = load_records(tmp_path / "val", DecodeRecord)
    assert {d.attempt for d in decodes} == {b.attempt for b in blocks}  # every attempt recorded; the last is kept
    summary = load_records(tmp_path / "val", SummaryRecord)
    assert summary and all(s.blocks == 1 and s.bias_low is None for s in summary)
    assert all(s.verdict == "not shown: 1 block (an interval needs at least 2)" for s in summary)


@pytest.mark.parametrize("flag,value,expected", [
    ("--block-windows", "0", "Invalid value for '--block-windows'"),
    ("--probe-threshold", "-1", "Invalid value for '--probe-threshold'"),
    ("--probe-spreads", "-1", "Invalid value for '--probe-spreads'"),
    ("--max-blocks", "0", "Invalid value for '--max-blocks'"),
    ("--precision", "0", "Invalid value for '--precision'"),
    ("--max-repetitions", "4", "Invalid value for '--max-repetitions'"),
    ("--overheads-windows", "0", "Invalid value for '--overheads-windows'"),
])
def test_bad_validate_flags_are_refused_before_any_work(tmp_path, tiny, flag, value, expected):
    windows = tmp_path / "w.jsonl"
    save_windows(windows, [make_text_window("w0", "hello", "Repeat.", 8, "tiny", "dev")])
    (tmp_path / "traces").mkdir()
    code, output = invoke("validate", windows, "--traces", tmp_path / "traces", "--target", tiny.target,
                          "--drafter", f"near={tiny.near}", flag, value)
    assert code == 2 and expected in output
