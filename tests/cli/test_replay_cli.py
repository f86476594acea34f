"""`specbench run | report | select-budget` on a small synthetic study, and every bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from specbench.cli import COMMANDS, main
from specbench.schemas.profiles import VERSION
from specbench.schemas.results import load_results
from specbench.schemas.traces import VERSIONS as TRACE_VERSIONS
from specbench.schemas.traces import save_trace_file
from tests.helpers import write_study


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    root = tmp_path_factory.mktemp("study")
    data, windows, traces, profiles = write_study(root, n_windows=10, n_devices=2)
    dev_traces = root / "dev_traces"
    dev_ids = [w.window_id for w in data.windows if w.split.value == "dev"]
    for name, trace_file in data.traces.items():
        save_trace_file(dev_traces / f"{name}.jsonl", trace_file.target, trace_file.drafter,
                        [trace_file.windows[i] for i in dev_ids])
    return {"root": root, "windows": windows, "traces": traces, "profiles": profiles, "dev_traces": dev_traces,
            "data": data}


def invoke(*args):
    result = CliRunner().invoke(main, [str(a) for a in args])
    return result.exit_code, result.output


def run_args(study, out, *extra):
    return ["run", study["windows"], "--traces", study["traces"], "--profile", study["profiles"][0],
            "--drafter", "small", "--out", out, *extra]


def test_every_command_has_help_with_an_example():
    for name in COMMANDS:
        code, output = invoke(name, "--help")
        assert code == 0, name
        assert "Example:" in output, f"{name} --help has no example"


SUMMARY = "Summary: each method's best configuration per device@placement"
SUMMARY_CSV = "summary-each-method-s-best-configuration-per-device-placement.csv,"


def test_run_then_report_in_every_format(study, tmp_path):
    out = tmp_path / "results"
    code, output = invoke(*run_args(study, out, "--methods", "target,sd,specasr", "--method", "as2d:B=3|7",
                                     "--sensitivity"))
    assert code == 0, output
    manifest, rows = load_results(out)
    # 10 windows x (target + sd W=5..8 + specasr + 2 as2d), again with depths extended linearly,
    # and 2 x 2 as2d rows per window with the min and max co-scheduling ratio
    assert len(rows) == 2 * 10 * (1 + 4 + 1 + 2) + 10 * 2 * 2
    assert manifest.methods[0] == "target" and manifest.mode == "replay"
    assert rows["lossless"].all()

    code, md = invoke("report", out, "--format", "md")
    assert code == 0
    assert "### Pooled decode throughput" in md and "sd[W=5..8 mean,drafter=small]" in md
    assert "### Sensitivity to extrapolated co-scheduling ratios (tokens/s)" in md
    assert "### Sensitivity to KV depths beyond the measured ones: depth-flat vs depth-linear (tokens/s)" in md
    assert "_Aggregation: per device x configuration: sum(tokens) / sum(decode_s)" in md
    code, output = invoke("report", out, "--format", "csv", "--output", tmp_path / "csv")
    assert code == 0, output
    index = (tmp_path / "csv" / "index.csv").read_text().splitlines()
    assert index[0] == "file,title,aggregation,rows" and index[1].startswith(SUMMARY_CSV)
    assert index[2].startswith("pooled-decode-throughput.csv,")
    pooled_csv = (tmp_path / "csv" / "pooled-decode-throughput.csv").read_text()
    assert pooled_csv.startswith("device,config,windows,tokens,decode_s,tokens_per_s,speedup,speedup_low,speedup_high")
    code, jsonl = invoke("report", out, "--format", "jsonl")
    assert code == 0 and json.loads(jsonl.splitlines()[0])["title"] == SUMMARY
    code, text = invoke("report", out, "--format", "json")
    tables = json.loads(text)
    assert [t["title"] for t in tables][:3] == [SUMMARY, "Pooled decode throughput",
                                                "Windows faster / slower than target-only"]
    pooled = {r["config"]: r for r in tables[1]["rows"]}
    target = rows[rows["config"] == "target"]
    assert pooled["target"]["tokens_per_s"] == pytest.approx(target["tokens"].sum() / target["decode_s"].sum())
    assert pooled["target"]["speedup"] == 1.0


def test_report_sensitivity_replays_what_the_run_did_not(study, tmp_path):
    out = tmp_path / "results"
    assert invoke(*run_args(study, out, "--methods", "target,sd,as2d"))[0] == 0
    code, text = invoke("report", out, "--sensitivity", "--format", "json")
    assert code == 0, text
    tables = {t["title"]: t["rows"] for t in json.loads(text)}
    ratios = tables["Sensitivity to extrapolated co-scheduling ratios (tokens/s)"]
    assert [r["config"] for r in ratios] == ["as2d[B=7,drafter=small]"]
    depths = tables["Sensitivity to KV depths beyond the measured ones: depth-flat vs depth-linear (tokens/s)"]
    # every method prices depths; the synthetic profile measures past every window's depth: no range
    assert len(depths) == 1 + 4 + 1
    assert all(r["depth-flat"] == r["depth-linear"] and r["range_pct"] == 0 and r["flagged"] == 0 for r in depths)


def test_interrupted_run_resumes_without_redoing_rows(study, tmp_path):
    out = tmp_path / "results"
    assert invoke(*run_args(study, out, "--methods", "target,sd"))[0] == 0
    rows_path = out / "rows.jsonl"
    lines = rows_path.read_text().splitlines(keepends=True)
    rows_path.write_text("".join(lines[:7]) + lines[7][:25])  # an interruption cut the 8th row short
    code, output = invoke(*run_args(study, out, "--methods", "target,sd"))
    assert code == 1 and "results already exist" in output and "--resume" in output
    code, output = invoke(*run_args(study, out, "--methods", "target,sd", "--resume"))
    assert code == 0, output
    _, rows = load_results(out)
    assert len(rows) == 10 * 5
    assert not rows.duplicated(["device", "config", "window_id", "cost_fit"]).any()
    assert rows_path.read_text().splitlines()[:7] == [line.rstrip("\n") for line in lines[:7]]


def test_resume_refuses_changed_inputs(study, tmp_path):
    out = tmp_path / "results"
    assert invoke(*run_args(study, out, "--methods", "target"))[0] == 0
    code, output = invoke(*run_args(study, out, "--methods", "target,sd", "--resume"))
    assert code == 1
    assert "cannot resume: manifest field 'methods' differs" in output


def test_select_budget_writes_a_budget_that_run_accepts(study, tmp_path):
    budget = tmp_path / "budget.yaml"
    code, output = invoke("select-budget", study["windows"], "--traces", study["dev_traces"],
                          "--profile", study["profiles"][0], "--catalog", "as2d:B=1..6", "--out", budget)
    assert code == 0, output
    doc = yaml.safe_load(budget.read_text())
    assert doc["kind"] == "specbench.budget" and doc["device"] == "synthetic-A"
    assert doc["as2d"]["drafter"] in ("small", "large") and 1 <= doc["as2d"]["B"] <= 6
    assert len(doc["selection"]["runners_up"]) == 3
    assert f"as2d[B={doc['as2d']['B']},drafter={doc['as2d']['drafter']}]" in output
    out = tmp_path / "results"
    code, output = invoke(*run_args(study, out, "--methods", "target,as2d", "--budget", budget))
    assert code == 0, output
    _, rows = load_results(out)
    assert set(rows["config"]) == {"target", f"as2d[B={doc['as2d']['B']},drafter={doc['as2d']['drafter']}]"}


def test_the_demos_protocol_chooses_on_dev_windows_and_deploys_on_test_windows(study, tmp_path):
    """The paper's protocol as the demo runs it (app.demo.deploy_budget), on the synthetic study."""
    from specbench.app.demo import deploy_budget
    from specbench.core.methods.configs import parse_method_specs

    catalog = parse_method_specs(["as2d:B=1..4,drafter=small|large"])
    messages = []
    deployment = deploy_budget(tmp_path, study["windows"], study["traces"], Path(study["profiles"][0]), catalog,
                               messages.append)
    splits = {w.window_id: w.split.value for w in study["data"].windows}
    dev = sum(split == "dev" for split in splits.values())
    assert messages == [f"using {dev} dev windows, leaving out {len(splits) - dev} test windows"]
    budget = yaml.safe_load(deployment.budget_path.read_text())
    assert deployment.config == f"as2d[B={budget['as2d']['B']},drafter={budget['as2d']['drafter']}]"
    assert deployment.dev_windows == dev == budget["selection"]["dev_windows"]
    _, rows = load_results(deployment.results)
    assert {splits[w] for w in rows["window_id"]} == {"test"} and deployment.test_windows == len(splits) - dev
    assert set(rows["config"]) == {"target"} | {c.label for c in catalog}
    chosen = rows[rows["config"] == deployment.config]
    assert deployment.deployed_tokens_per_s == pytest.approx(chosen["tokens"].sum() / chosen["decode_s"].sum())
    best = rows[rows["method"] == "as2d"].groupby("window_id").agg(tokens=("tokens", "first"),
                                                                   decode_s=("decode_s", "min"))
    assert deployment.oracle_tokens_per_s == pytest.approx(best["tokens"].sum() / best["decode_s"].sum())
    assert deployment.gap_pct == pytest.approx(100 * (1 - deployment.deployed_tokens_per_s /
                                                      deployment.oracle_tokens_per_s))
    assert 0 <= deployment.gap_pct < 100


def test_outputs_land_under_results_by_default(study, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    profile = Path(study["profiles"][0])
    code, output = invoke("run", study["windows"], "--traces", study["traces"], "--profile", profile,
                          "--drafter", "small", "--methods", "target")
    assert code == 0, output
    _, rows = load_results(tmp_path / "results" / profile.stem)
    assert set(rows["config"]) == {"target"}
    code, output = invoke("select-budget", study["windows"], "--traces", study["dev_traces"],
                          "--profile", profile, "--catalog", "as2d:B=1..2")
    assert code == 0, output
    assert yaml.safe_load((tmp_path / "results" / "budgets" / f"{profile.stem}.yaml").read_text())["as2d"]["B"] in (1, 2)


# --- bad inputs: one clean line, non-zero exit, nothing half-written ---------------------


def error_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.startswith("Error: ")]
    assert len(lines) == 1, output
    assert "Traceback" not in output
    return lines[0]


def test_select_budget_on_a_mixed_trace_directory_uses_its_dev_windows(study, tmp_path):
    """Traces of dev and test windows together: the budget is chosen on the dev windows alone,
    as if only they had been traced, and stderr says how many of each."""
    dev = sum(w.split.value == "dev" for w in study["data"].windows)
    test = len(study["data"].windows) - dev
    assert dev and test
    choices, outputs = {}, {}
    for name, traces in (("mixed", study["traces"]), ("dev", study["dev_traces"])):
        budget = tmp_path / f"{name}.yaml"
        code, outputs[name] = invoke("select-budget", study["windows"], "--traces", traces, "--profile",
                                     study["profiles"][0], "--catalog", "as2d:B=1..6", "--out", budget)
        assert code == 0, outputs[name]
        choices[name] = yaml.safe_load(budget.read_text())
    assert f"using {dev} dev windows, leaving out {test} test windows" in outputs["mixed"]
    assert f"using {dev} dev windows" in outputs["dev"] and "leaving out" not in outputs["dev"]
    assert choices["mixed"]["as2d"] == choices["dev"]["as2d"]
    assert choices["mixed"]["selection"]["dev_windows"] == dev
    assert choices["mixed"]["selection"]["tokens_per_s"] == choices["dev"]["selection"]["tokens_per_s"]


def test_select_budget_refuses_test_windows_asked_for_explicitly(study, tmp_path):
    budget = tmp_path / "budget.yaml"
    code, output = invoke("select-budget", study["windows"], "--traces", study["traces"],
                          "--profile", study["profiles"][0], "--split", "test", "--out", budget)
    assert code == 1
    assert error_line(output).startswith("Error: --split test: budget selection uses development windows only")
    assert not budget.exists()


def test_unknown_method_lists_the_known_ones(study, tmp_path):
    code, output = invoke(*run_args(study, tmp_path / "r", "--methods", "target,sdd"))
    assert code == 1
    assert error_line(output) == "Error: Unknown method 'sdd'. Available: as2d, sd, specasr, target"
    assert not (tmp_path / "r").exists()


def test_unknown_method_key_names_the_known_keys(study, tmp_path):
    code, output = invoke(*run_args(study, tmp_path / "r", "--method", "sd:width=5"))
    assert code == 1
    assert "unknown key 'width' for sd (known: W, p_min, drafter)" in error_line(output)


def test_malformed_profile_yaml(study, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: specbench.profile\nschema_version: 1\ndevice: [unclosed\n")
    code, output = invoke("run", study["windows"], "--traces", study["traces"], "--profile", bad,
                          "--out", tmp_path / "r")
    assert code == 1
    assert f"{bad}: line" in error_line(output) and "is not valid YAML" in output
    assert not (tmp_path / "r").exists()


def test_unknown_profile_version(study, tmp_path):
    doc = yaml.safe_load(study["profiles"][0].read_text())
    doc["schema_version"] = VERSION + 1
    bad = tmp_path / "next.yaml"
    bad.write_text(yaml.safe_dump(doc))
    code, output = invoke("run", study["windows"], "--traces", study["traces"], "--profile", bad,
                          "--out", tmp_path / "r")
    assert code == 1
    assert error_line(output) == (f"Error: {bad}: schema_version {VERSION + 1}, this specbench reads {VERSION} "
                                  "(hint: write the file again with this specbench)")


def test_profile_lacking_a_needed_width(study, tmp_path):
    doc = yaml.safe_load(study["profiles"][0].read_text())
    del doc["target"]["costs"]["seconds"][8]
    bad = tmp_path / "no8.yaml"
    bad.write_text(yaml.safe_dump(doc))
    code, output = invoke(*run_args({**study, "profiles": [bad]}, tmp_path / "r", "--methods", "target,sd"))
    assert code == 1
    line = error_line(output)
    assert f"profile {bad} target: no measured cost for width 8" in line
    assert "--max-width" in line
    assert not (tmp_path / "r").exists()


def test_malformed_windows_json(study, tmp_path):
    bad = tmp_path / "windows.jsonl"
    lines = study["windows"].read_text().splitlines()
    bad.write_text("\n".join(lines[:3] + ['{"window_id": "x",'] + lines[3:]) + "\n")
    code, output = invoke("run", bad, "--traces", study["traces"], "--profile", study["profiles"][0],
                          "--out", tmp_path / "r")
    assert code == 1
    assert error_line(output) == f"Error: {bad}: line 4 is not valid JSON (Expecting property name enclosed in double quotes)"


def test_unknown_windows_version_and_missing_key(study, tmp_path):
    lines = study["windows"].read_text().splitlines()
    bad = tmp_path / "v3.jsonl"
    bad.write_text("\n".join(['{"kind": "specbench.windows", "schema_version": 3}'] + lines[1:]) + "\n")
    code, output = invoke("run", bad, "--traces", study["traces"], "--profile", study["profiles"][0],
                          "--out", tmp_path / "r")
    assert code == 1 and error_line(output) == (f"Error: {bad}: line 1: schema_version 3, this specbench reads 1 "
                                                "or 2 (hint: write the file again with this specbench)")
    # a category is a version 2 key: a version 1 file with one is refused, naming it
    v1 = tmp_path / "v1.jsonl"
    v1.write_text("\n".join(['{"kind": "specbench.windows", "schema_version": 1}',
                             json.dumps({**json.loads(lines[1]), "category": "math"})]) + "\n")
    code, output = invoke("run", v1, "--traces", study["traces"], "--profile", study["profiles"][0],
                          "--out", tmp_path / "r")
    assert code == 1 and error_line(output).startswith(f"Error: {v1}: key 'line 2.category': expected one of the "
                                                        "known keys")
    row = json.loads(lines[1])
    del row["cap"]
    missing = tmp_path / "nocap.jsonl"
    missing.write_text("\n".join([lines[0], json.dumps(row)]) + "\n")
    code, output = invoke("run", missing, "--traces", study["traces"], "--profile", study["profiles"][0],
                          "--out", tmp_path / "r")
    assert code == 1
    assert error_line(output) == f"Error: {missing}: key 'line 2.cap': expected an integer (missing)"


def _traces_with_first_window_changed(study, tmp_path, change) -> tuple[Path, dict, dict]:
    """A copy of the study's traces whose first window line (line 3) `change` edits in place;
    returns (the directory, that edited row, the last file's header)."""
    traces = tmp_path / "traces"
    traces.mkdir()
    for path in study["traces"].glob("*.jsonl"):
        lines = path.read_text().splitlines()
        row = json.loads(lines[2])
        change(row)
        (traces / path.name).write_text("\n".join(lines[:2] + [json.dumps(row)] + lines[3:]) + "\n")
    return traces, row, json.loads(lines[0])


def test_trace_of_a_different_window_content(study, tmp_path):
    traces, row, _ = _traces_with_first_window_changed(study, tmp_path, lambda r: r.update(window_sha256="f" * 64))
    code, output = invoke("run", study["windows"], "--traces", traces, "--profile", study["profiles"][0],
                          "--out", tmp_path / "r")
    assert code == 1
    line = error_line(output)
    assert f"window '{row['window_id']}': window_sha256 {'f' * 64} differs from the windows file's" in line
    assert "trace it again" in line
    assert not (tmp_path / "r").exists()


def test_a_token_id_outside_the_vocabulary_is_one_line_and_nothing_is_written(study, tmp_path):
    """A y holding 10^9 with the header's vocabulary of 4000 tokens is refused where it enters."""
    traces, _, header = _traces_with_first_window_changed(study, tmp_path, lambda r: r["y"].__setitem__(3, 10 ** 9))
    n_vocab = header["target"]["n_vocab"]
    out = tmp_path / "r"
    code, output = invoke("run", study["windows"], "--traces", traces, "--profile", study["profiles"][0], "--out", out)
    assert code == 1
    assert error_line(output) == (f"Error: {min(traces.glob('*.jsonl'))}:3: y[3] = 1000000000, expected a token id "
                                  f"in [0, {n_vocab}) (target vocabulary)")
    assert not out.exists()


def test_unknown_trace_version(study, tmp_path):
    traces = tmp_path / "traces"
    traces.mkdir()
    for path in study["traces"].glob("*.jsonl"):
        lines = path.read_text().splitlines()
        header = json.loads(lines[0])
        header["schema_version"] = 0
        (traces / path.name).write_text("\n".join([json.dumps(header)] + lines[1:]) + "\n")
    code, output = invoke("run", study["windows"], "--traces", traces, "--profile", study["profiles"][0],
                          "--out", tmp_path / "r")
    reads = " or ".join(str(v) for v in TRACE_VERSIONS)
    assert code == 1 and f"line 1: schema_version 0, this specbench reads {reads} (hint:" in error_line(output)


def test_report_of_a_directory_without_results(tmp_path):
    code, output = invoke("report", tmp_path)
    assert code == 1
    assert error_line(output) == f"Error: {tmp_path}: not a results directory (no manifest.json) (hint: pass the --out directory of `specbench run`)"


def test_report_of_target_only_rows(study, tmp_path):
    """Nothing to compare yet: the pooled table has the baseline, the comparison tables are empty."""
    out = tmp_path / "target-only"
    code, output = invoke(*run_args(study, out, "--methods", "target"))
    assert code == 0, output
    code, md = invoke("report", out, "--format", "md")
    assert code == 0, md
    assert "| target " in md.split("### Pooled decode throughput")[1].split("###")[0]


def test_same_vocabulary_sd_wider_than_the_traced_rows_is_refused(study, tmp_path):
    """Rows hold k_max drafts: W - 1 > k_max would price truncated drafts, so nothing is written."""
    import dataclasses

    traces = tmp_path / "short"
    for name, trace_file in study["data"].traces.items():
        short = [dataclasses.replace(t, drafts=dataclasses.replace(t.drafts, tokens=t.drafts.tokens[:, :4],
                                                                   conf=t.drafts.conf[:, :4]))
                 for t in trace_file.windows.values()]
        save_trace_file(traces / f"{name}.jsonl", trace_file.target, trace_file.drafter, short)
    code, output = invoke(*run_args({**study, "traces": traces}, tmp_path / "r", "--method", "sd:W=6"))
    assert code == 1
    line = error_line(output)
    assert "sd[W=6,drafter=small]: drafts up to W-1 = 5 tokens" in line and "holds k_max = 4 drafts per row" in line
    assert "--k-max 5" in line
    assert not (tmp_path / "r").exists()
    code, output = invoke(*run_args({**study, "traces": traces}, tmp_path / "ok", "--method", "sd:W=5"))
    assert code == 0, output  # W - 1 = k_max: every draft a row holds, none missing
