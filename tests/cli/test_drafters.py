"""`run --native` with several drafters, on the demo models through the real runner: each configuration
decodes with the drafter it names (its rows' sha256 say which), a configuration naming a drafter the run
was not given is refused before anything runs, and decisions that differ from the trace's (a drafter
file swapped under a traced name) are caught (docs/METHODS.md §6.4 Drafters and decisions checked
against the trace)."""

from __future__ import annotations

import json

import pytest

from specbench.schemas.fileio import file_sha256
from specbench.schemas.results import load_results
from specbench.schemas.windows import make_text_window, save_windows
from tests.cli.test_native_cli import error_line, invoke

TEXTS = ["List three colors of the rainbow.", "Name two planets of the solar system."]
SD = "sd:W=5,drafter=smollm2"
AS2D_GEMMA = "as2d:B=3,drafter=gemma3"


@pytest.fixture(scope="module")
def demo(tmp_path_factory, demo_model_path, runner):
    """Two short windows traced with both demo drafters (Gemma with its own turn format)."""
    root = tmp_path_factory.mktemp("drafters")
    windows = root / "windows.jsonl"
    save_windows(windows, [make_text_window(f"w{i}", t, "Answer briefly.", 12, "demo", "test")
                           for i, t in enumerate(TEXTS)])
    models = {"target": demo_model_path("smollm2-135m-f16"), "smollm2": demo_model_path("smollm2-135m"),
              "gemma3": demo_model_path("gemma3-270m")}
    code, output = invoke("trace", windows, "--target", models["target"], "--drafter", f"smollm2={models['smollm2']}",
                          "--drafter", f"gemma3={models['gemma3']}", "--template", "gemma3=gemma", "--k-max", 4,
                          "--threads", 1, "--out", root / "traces")
    assert code == 0, output
    return {"root": root, "windows": windows, "traces": root / "traces", "models": models,
            "sha": {name: file_sha256(path) for name, path in models.items()}}


def native(demo, out, *flags):
    return ["run", demo["windows"], "--native", "--device", "local", "--target", demo["models"]["target"],
            "--placement", "shared", "--traces", demo["traces"], "--out", out, *flags]


def test_each_configuration_decodes_with_the_drafter_it_names(demo, tmp_path):
    sm, gm = demo["models"]["smollm2"], demo["models"]["gemma3"]
    methods = ["--method", "target", "--method", SD, "--method", AS2D_GEMMA]
    # the flag order of the report, and the other one: --template names a model whatever the order
    for out, flags in ((tmp_path / "a", ["--drafter", f"smollm2={sm}", "--drafter", f"gemma3={gm}",
                                         "--template", "gemma3=gemma"]),
                       (tmp_path / "b", ["--template", "gemma3=gemma", "--drafter", f"gemma3={gm}",
                                         "--drafter", f"smollm2={sm}"])):
        code, output = invoke(*native(demo, out, *flags, *methods))
        assert code == 0, output
        manifest, rows = load_results(out)
        assert {d.name: d.sha256 for d in manifest.drafters} == {"smollm2": demo["sha"]["smollm2"],
                                                                 "gemma3": demo["sha"]["gemma3"]}
        assert manifest.templates["gemma3"] == "gemma" and manifest.templates["smollm2"] == "model"
        sha = dict(zip(rows["config"], rows["drafter_sha256"], strict=False))
        assert sha == {"target": None, "sd[W=5,drafter=smollm2]": demo["sha"]["smollm2"],
                       "as2d[B=3,drafter=gemma3]": demo["sha"]["gemma3"]}
        drafted = rows[(rows["method"] != "target") & rows["lossless"]]
        assert set(drafted["config"]) == {"sd[W=5,drafter=smollm2]", "as2d[B=3,drafter=gemma3]"}
        assert drafted["decisions_match"].map(lambda v: v is True).all()  # checked, and as the trace decided
        assert rows.loc[rows["method"] == "target", "decisions_match"].isna().all()
        assert not (out / "decisions.jsonl").exists()


@pytest.mark.parametrize("drafters, method, line", [
    (["smollm2"], AS2D_GEMMA, "as2d[B=3,drafter=gemma3]: names drafter 'gemma3', which this run was not given "
                              "(--drafter: smollm2)"),
    (["smollm2", "gemma3"], "sd:W=5", "sd[W=5]: name its drafter (drafter=NAME); this run has several "
                                      "(--drafter: smollm2, gemma3)"),
])
def test_a_method_naming_an_absent_drafter_is_one_line_and_writes_nothing(demo, tmp_path, drafters, method, line):
    flags = [f for name in drafters for f in ("--drafter", f"{name}={demo['models'][name]}")]
    code, output = invoke(*native(demo, tmp_path / "out", *flags, "--template", "gemma3=gemma"
                                  if "gemma3" in drafters else "target=model", "--method", method))
    assert code == 1 and error_line(output).startswith(f"Error: {line}")
    assert not (tmp_path / "out").exists()


def test_replay_takes_one_drafter(demo, tmp_path):
    code, output = invoke("run", demo["windows"], "--traces", demo["traces"], "--profile", demo["windows"],
                          "--drafter", "smollm2", "--drafter", "gemma3", "--out", tmp_path / "replay")
    assert code == 1 and "--drafter given 2 times (smollm2, gemma3): replay takes one" in error_line(output)
    assert not (tmp_path / "replay").exists()


def test_a_drafter_file_swapped_under_a_traced_name_is_caught(demo, tmp_path):
    """gemma3's trace was recorded with Gemma; this run gives the Q4_1 SmolLM2 file under that name (rendered
    with the traced template): every output is still the target's, but its drafts are not the trace's."""
    out = tmp_path / "swapped"
    code, output = invoke(*native(demo, out, "--drafter", f"gemma3={demo['models']['smollm2']}", "--template",
                                  "gemma3=gemma", "--method", "target", "--method", "sd:W=5,drafter=gemma3",
                                  "--method", AS2D_GEMMA))
    assert code == 1, output
    last = output.strip().splitlines()[-1]
    assert last.startswith("Error: decisions differ from the trace: ") and f"see {out / 'decisions.jsonl'}" in last
    assert f"drafter sha256 {demo['sha']['smollm2'][:12]}, the trace's {demo['sha']['gemma3'][:12]}" in last
    _, rows = load_results(out)  # the rows are kept, marked
    drafted = rows[(rows["method"] != "target") & rows["lossless"]]
    assert len(drafted) and drafted["decisions_match"].map(lambda v: v is False).all()
    assert set(drafted["drafter_sha256"]) == {demo["sha"]["smollm2"]}
    found = [json.loads(line) for line in (out / "decisions.jsonl").read_text().splitlines()]
    assert {(d["window_id"], d["config"]) for d in found} == set(zip(drafted["window_id"], drafted["config"],
                                                                     strict=True))
    assert all(d["trace_drafter_sha256"] == demo["sha"]["gemma3"] for d in found)
    code, report = invoke("report", out, "--format", "md")
    if len(set(rows["window_id"])) == len(set(drafted["window_id"])):  # every window is left out
        assert code == 1 and f"{len(drafted)} rows' decisions differ from the trace" in error_line(report)
    else:
        assert code == 0 and "Native decisions differ from the trace" in report, report


def test_a_configuration_the_trace_cannot_replay_is_named_and_left_unchecked(demo, tmp_path):
    """The traces hold 4 drafts per row, SD at W=8 verifies 7: its decisions cannot be checked, which the run says."""
    out = tmp_path / "wide"
    code, output = invoke(*native(demo, out, "--drafter", f"smollm2={demo['models']['smollm2']}",
                                  "--method", "sd:W=8,drafter=smollm2"))
    assert code == 0, output
    assert "warning: sd[W=8,drafter=smollm2]: decisions not checked against the trace (" in " ".join(output.split())
    _, rows = load_results(out)
    assert rows["decisions_match"].isna().all() and set(rows["drafter_sha256"]) == {demo["sha"]["smollm2"]}
