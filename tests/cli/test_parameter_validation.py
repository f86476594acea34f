"""Method parameters are checked where they enter: one line naming the key, the value and
the range, exit status 1, and nothing written."""

from __future__ import annotations

import pytest
import yaml
from click.testing import CliRunner

from specbench.cli import main
from specbench.schemas.results import load_results
from tests.helpers import write_study

INTEGER_2 = "an integer >= 2"
INTEGER_1 = "an integer >= 1"
UNIT = "a finite number in [0, 1]"

INVALID = [
    ("sd:W=0", "W=0", INTEGER_2),
    ("sd:W=1", "W=1", INTEGER_2),
    ("sd:W=1..8", "W=1", INTEGER_2),
    ("sd:p_min=1.5", "p_min=1.5", UNIT),
    ("sd:p_min=-0.1", "p_min=-0.1", UNIT),
    ("sd:p_min=nan", "p_min=nan", UNIT),
    ("specasr:k_max=0", "k_max=0", INTEGER_1),
    ("specasr:tau=1.01", "tau=1.01", UNIT),
    ("specasr:tau=nan", "tau=nan", UNIT),
    ("as2d:B=0", "B=0", INTEGER_1),
    ("as2d:B=-3..4", "B=-3", INTEGER_1),
    ("as2d:batch=0", "batch=0", INTEGER_1),
    ("as2d:H=0", "H=0", INTEGER_1),
    ("as2d:conf_stop=inf", "conf_stop=inf", UNIT),
    ("as2d:conf_stop=2", "conf_stop=2", UNIT),
]


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    root = tmp_path_factory.mktemp("study")
    _, windows, traces, profiles = write_study(root, n_windows=4, n_devices=1)
    return {"windows": windows, "traces": traces, "profile": profiles[0]}


def invoke(*args):
    result = CliRunner().invoke(main, [str(a) for a in args])
    return result.exit_code, result.output


def run_args(study, out, *extra, profile=None):
    return ["run", study["windows"], "--traces", study["traces"], "--profile", profile or study["profile"],
            "--drafter", "small", "--out", out, *extra]


def error_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.startswith("Error: ")]
    assert len(lines) == 1, output
    assert "Traceback" not in output
    return lines[0]


@pytest.mark.parametrize("spec,value,expected", INVALID)
def test_replay_refuses_an_out_of_range_parameter(study, tmp_path, spec, value, expected):
    out = tmp_path / "r"
    code, output = invoke(*run_args(study, out, "--method", spec))
    assert code == 1
    assert error_line(output) == f"Error: method spec '{spec}': {value} is out of range (expected {expected})"
    assert not out.exists()


def test_native_run_refuses_an_out_of_range_parameter(study, tmp_path):
    """Refused before any model file is read or runner started (the model need not be real)."""
    fake = tmp_path / "fake.gguf"
    fake.write_bytes(b"GGUF")
    out = tmp_path / "native"
    code, output = invoke("run", study["windows"], "--native", "--device", "local", "--target", fake,
                          "--drafter", f"small={fake}", "--method", "sd:p_min=nan", "--out", out)
    assert code == 1
    assert error_line(output) == f"Error: method spec 'sd:p_min=nan': p_min=nan is out of range (expected {UNIT})"
    assert not out.exists()


def test_select_budget_refuses_an_out_of_range_catalog(study, tmp_path):
    budget = tmp_path / "budget.yaml"
    code, output = invoke("select-budget", study["windows"], "--traces", study["traces"],
                          "--profile", study["profile"], "--catalog", "as2d:B=0..15", "--out", budget)
    assert code == 1
    assert error_line(output) == f"Error: method spec 'as2d:B=0..15': B=0 is out of range (expected {INTEGER_1})"
    assert not budget.exists()


def test_trace_refuses_an_out_of_range_recycling_spec(study, tmp_path):
    out = tmp_path / "traces"
    code, output = invoke("trace", study["windows"], "--target", tmp_path / "t.gguf", "--drafter",
                          f"small={tmp_path / 'd.gguf'}", "--specasr", "specasr:tau=2", "--out", out)
    assert code == 1
    assert error_line(output) == f"Error: method spec 'specasr:tau=2': tau=2 is out of range (expected {UNIT})"
    assert not out.exists()


def test_run_refuses_a_budget_file_with_an_out_of_range_parameter(study, tmp_path):
    budget = tmp_path / "budget.yaml"
    budget.write_text(yaml.safe_dump({"kind": "specbench.budget", "schema_version": 1, "device": "synthetic-A",
                                      "as2d": {"B": 3, "drafter": "small", "conf_stop": 1.5}}))
    out = tmp_path / "r"
    code, output = invoke(*run_args(study, out, "--methods", "target,as2d", "--budget", budget))
    assert code == 1
    assert error_line(output) == f"Error: {budget}: conf_stop=1.5 is out of range (expected {UNIT})"
    assert not out.exists()


def test_a_target_width_beyond_the_profile_is_refused_before_writing(study, tmp_path):
    out = tmp_path / "r"
    code, output = invoke(*run_args(study, out, "--method", "sd:W=20"))
    assert code == 1
    assert error_line(output) == (f"Error: sd[W=20,drafter=small]: profile {study['profile']} target: no measured "
                                  "cost for width 17 (measured widths: 1..16) "
                                  "(hint: profile the device with a larger --max-width)")
    assert not out.exists()


def test_a_drafter_width_beyond_the_profile_is_refused_before_writing(study, tmp_path):
    doc = yaml.safe_load(study["profile"].read_text())
    small = next(d for d in doc["drafters"] if d["name"] == "small")
    small["costs"]["seconds"] = {w: s for w, s in small["costs"]["seconds"].items() if w <= 4}
    profile = tmp_path / "narrow.yaml"
    profile.write_text(yaml.safe_dump(doc))
    out = tmp_path / "r"
    code, output = invoke(*run_args(study, out, "--method", "specasr:k_max=8,tau=0.5", profile=profile))
    assert code == 1
    line = error_line(output)
    assert line.startswith("Error: specasr[k_max=8,tau=0.5,drafter=small]: ")
    assert "no measured cost for width 5 (measured widths: 1..4)" in line
    assert not out.exists()


def test_method_alone_runs_only_what_it_names(study, tmp_path):
    out = tmp_path / "r"
    code, output = invoke(*run_args(study, out, "--method", "sd:W=5"))
    assert code == 0, output
    _, rows = load_results(out)
    assert set(rows["config"]) == {"sd[W=5,drafter=small]"} and len(rows) == 4


def test_neither_methods_nor_method_runs_the_default_set(study, tmp_path):
    out = tmp_path / "r"
    code, output = invoke(*run_args(study, out))
    assert code == 0, output
    _, rows = load_results(out)
    assert set(rows["method"]) == {"target", "sd", "specasr", "as2d"}
    assert {c for c in rows["config"] if c.startswith("sd[")} == {f"sd[W={w},drafter=small]" for w in (5, 6, 7, 8)}


@pytest.mark.parametrize("flags,code,expected", [
    (["--precision", "0"], 2, "Invalid value for '--precision': 0.0 is not in the range 0<x<1."),
    (["--precision", "1.5"], 2, "Invalid value for '--precision': 1.5 is not in the range 0<x<1."),
    (["--min-repetitions", "4"], 2, "Invalid value for '--min-repetitions': 4 is not in the range x>=5."),
    (["--max-repetitions", "1001"], 2, "Invalid value for '--max-repetitions': 1001 is not in the range 5<=x<=1000."),
    (["--min-repetitions", "12", "--max-repetitions", "10"], 1,
     "--max-repetitions 10: expected between --min-repetitions (12) and 1000"),
    (["--repetitions", "7", "--precision", "0.05"], 1, "--repetitions 7 (a fixed count) goes without --precision"),
    (["--overheads-windows", "0"], 2, "Invalid value for '--overheads-windows': 0 is not in the range 1<=x<=50."),
    (["--overheads-windows", "51"], 2, "Invalid value for '--overheads-windows': 51 is not in the range 1<=x<=50."),
])
def test_profile_refuses_out_of_range_repetition_flags(tmp_path, flags, code, expected):
    out = tmp_path / "p.yaml"
    status, output = invoke("profile", "local", "--target", tmp_path / "t.gguf", *flags, "--out", out)
    assert status == code and error_line(output) == f"Error: {expected}"
    assert not out.exists()


def test_profile_refuses_a_windows_file_it_cannot_read_before_measuring(tmp_path):
    empty, out = tmp_path / "w.jsonl", tmp_path / "p.yaml"
    empty.write_text("")
    status, output = invoke("profile", "local", "--target", tmp_path / "t.gguf", "--windows", empty, "--out", out)
    assert status == 1 and error_line(output) == f"Error: {empty}: empty file; expected a specbench.windows header line"
    assert not out.exists()
