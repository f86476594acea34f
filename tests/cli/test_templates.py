"""Each model renders a window with its own chat template: `--template NAME=TEMPLATE`, else
the window's named template, else the one in its GGUF; none at all is a one-line error.
Through the real runner on the tiny fixtures (one drafter stores no template), and on the
real Gemma 3 drafter when the demo models are cached."""

from __future__ import annotations

import json

import pytest

from specbench.errors import SpecbenchError
from specbench.schemas.results import load_results
from specbench.schemas.traces import VERSION, load_trace_dir, load_trace_file
from specbench.schemas.windows import make_text_window, save_windows
from specbench.world.devices.local import LocalDevice
from specbench.world.model_files import ModelFile, with_templates
from specbench.world.tracing import model_templates, prompts_for
from tests.cli.test_native_cli import error_line, invoke

TEXTS = ["hello the world", "in the heat", "the end"]
INSTRUCTION = "Repeat this."
GEMMA_TURN = "<start_of_turn>user\n"


def write_windows(path, template="model", texts=TEXTS, cap=12):
    save_windows(path, [make_text_window(f"w{i}", t, INSTRUCTION, cap, "tiny", "dev", template=template)
                        for i, t in enumerate(texts)])
    return path


def trace_args(windows, target, bare, out, *extra):
    return ["trace", windows, "--target", target, "--drafter", f"bare={bare}", "--k-max", 4, "--threads", 1,
            "--out", out, *extra]


def native_args(windows, target, bare, out, *extra):
    return ["run", windows, "--device", "local", "--native", "--target", target, "--drafter", f"bare={bare}",
            "--methods", "target,sd", "--placement", "split", "--out", out, *extra]


def header(trace_dir, name="bare") -> dict:
    return json.loads((trace_dir / f"{name}.jsonl").read_text().splitlines()[0])


def detokenize(device, path, tokens) -> str:
    out = device.run_job({"mode": "detokenize", "model": {"path": str(path)}, "tokens": [tokens], "special": True})
    return out.results[0]["text"]


def test_a_model_without_a_template_and_none_named_is_one_line_and_writes_nothing(tmp_path, tiny, tiny_no_template):
    windows = write_windows(tmp_path / "windows.jsonl")
    for args in (trace_args(windows, tiny.target, tiny_no_template, tmp_path / "traces"),
                 native_args(windows, tiny.target, tiny_no_template, tmp_path / "native")):
        code, output = invoke(*args)
        line = error_line(output)
        assert code == 1 and f"{tiny_no_template} stores no chat template" in line, line
        assert "--template bare=TEMPLATE" in line
    assert not (tmp_path / "traces").exists() and not (tmp_path / "native").exists()


def test_the_named_template_renders_that_model_and_native_runs_render_the_same(tmp_path, tiny, tiny_no_template,
                                                                               runner):
    windows = write_windows(tmp_path / "windows.jsonl")
    traces = tmp_path / "traces"
    code, output = invoke(*trace_args(windows, tiny.target, tiny_no_template, traces, "--template", "bare=gemma"))
    assert code == 0, output
    assert header(traces)["templates"] == {"target": "model", "drafter": "gemma"}
    assert load_trace_dir(traces)["bare"].templates == {"target": "model", "drafter": "gemma"}

    device = LocalDevice(runner=runner)
    target, drafter = ModelFile("t", tiny.target), ModelFile("bare", tiny_no_template, template="gemma")
    prompts = prompts_for(device, target, drafter, [make_text_window("w", "the end", INSTRUCTION, 12, "tiny", "dev")])
    assert detokenize(device, tiny_no_template, prompts.drafter["w"]) == \
        f"{GEMMA_TURN}{INSTRUCTION}\n\nthe end<end_of_turn>\n<start_of_turn>model\n"
    assert detokenize(device, tiny.target, prompts.target["w"]).startswith(f"<|im_start|>user\n{INSTRUCTION}")

    code, output = invoke(*native_args(windows, tiny.target, tiny_no_template, tmp_path / "native",
                                       "--traces", traces, "--template", "bare=gemma"))
    assert code == 0, output
    manifest, rows = load_results(tmp_path / "native")
    assert manifest.templates == {"target": "model", "bare": "gemma"} and rows["lossless"].all()

    code, output = invoke(*native_args(windows, tiny.target, tiny_no_template, tmp_path / "other",
                                       "--traces", traces, "--template", "bare=chatml"))
    assert code == 1 and "the drafter was traced with chat template 'gemma', this run renders 'chatml'" in \
        error_line(output)
    assert not (tmp_path / "other").exists()
    code, output = invoke(*trace_args(windows, tiny.target, tiny_no_template, traces, "--template", "bare=chatml",
                                      "--resume"))
    assert code == 1 and "cannot resume: the chat templates differ" in error_line(output)


def test_bad_template_values_are_one_line(tmp_path, tiny, tiny_no_template):
    windows = write_windows(tmp_path / "windows.jsonl")
    out = tmp_path / "traces"
    cases = {"nosuch=gemma": "no model named 'nosuch'", "gemma": "expected NAME=TEMPLATE",
             "bare=": "expected NAME=TEMPLATE", "=gemma": "expected NAME=TEMPLATE",
             "bare=no-such-template": "llama.cpp cannot apply template 'no-such-template' "
                                      "(--template bare=no-such-template)"}
    for spec, expected in cases.items():
        code, output = invoke(*trace_args(windows, tiny.target, tiny_no_template, out, "--template", spec))
        assert code == 1 and expected in error_line(output), (spec, output)
    code, output = invoke(*native_args(windows, tiny.target, tiny_no_template, tmp_path / "native",
                                       "--template", "nosuch=gemma"))
    assert code == 1 and "no model named 'nosuch' (hint: models: target, bare)" in error_line(output)
    code, output = invoke("run", windows, "--traces", tmp_path, "--profile", windows, "--template", "bare=gemma",
                          "--out", tmp_path / "replay")
    assert code == 1 and "--template is for --native runs" in error_line(output)
    assert not out.exists() and not (tmp_path / "native").exists() and not (tmp_path / "replay").exists()


def test_a_windows_named_template_renders_every_model_unless_one_is_named(tmp_path, tiny, tiny_no_template):
    windows = write_windows(tmp_path / "windows.jsonl", template="chatml")
    code, output = invoke(*trace_args(windows, tiny.target, tiny_no_template, tmp_path / "traces"))
    assert code == 0, output
    assert header(tmp_path / "traces")["templates"] == {"target": "chatml", "drafter": "chatml"}


def test_resolution_order_and_names():
    """--template for a model > the windows' named template > "model" (the GGUF's own)."""
    target, drafter = ModelFile("SmolLM2-135M", "t.gguf"), ModelFile("gemma3", "g.gguf")
    own = [make_text_window("w", "x", "Say.", 4, "d", "dev")]
    chatml = [make_text_window("w", "x", "Say.", 4, "d", "dev", template="chatml")]
    assert model_templates(target, drafter, own) == {"target": "model", "drafter": "model"}
    assert model_templates(target, drafter, chatml) == {"target": "chatml", "drafter": "chatml"}
    named_target, (named,) = with_templates(target, [drafter], ("gemma3=gemma", "target=model"))
    assert model_templates(named_target, named, chatml) == {"target": "model", "drafter": "gemma"}
    by_stem, _ = with_templates(target, [drafter], ("SmolLM2-135M=llama3",))
    assert by_stem.template == "llama3"
    with pytest.raises(SpecbenchError, match="no model named 'gemma'.*models: target, SmolLM2-135M, gemma3"):
        with_templates(target, [drafter], ("gemma=gemma",))
    with pytest.raises(SpecbenchError, match="the windows name different templates \\(chatml, model\\)"):
        model_templates(target, drafter, own + chatml)


def test_trace_headers_without_templates_still_load(tmp_path):
    old = tmp_path / "old.jsonl"
    old.write_text('{"kind":"specbench.trace","schema_version":%d,"target":{"name":"t","sha256":"a","n_vocab":8},'
                   '"drafter":{"name":"d","sha256":"b","n_vocab":8}}\n'
                   '{"window_id":"w","window_sha256":"c","y":[1],"stop_reason":"eos","n_prompt":3}\n' % VERSION)
    assert load_trace_file(old).templates is None
    bad = tmp_path / "bad.jsonl"
    bad.write_text(old.read_text().replace(f'"schema_version":{VERSION},',
                                           f'"schema_version":{VERSION},"templates":{{"target":"x"}},'))
    with pytest.raises(SpecbenchError, match="templates': expected"):
        load_trace_file(bad)


def test_gemma_is_prompted_with_its_own_turns(tmp_path, runner, demo_model_path):
    smollm2, gemma = demo_model_path("smollm2-135m"), demo_model_path("gemma3-270m")
    windows = write_windows(tmp_path / "windows.jsonl", texts=["The weather is nice today."], cap=6)
    args = ["trace", windows, "--target", smollm2, "--drafter", f"gemma3={gemma}", "--k-max", 2, "--threads", 1,
            "--out", tmp_path / "traces"]
    code, output = invoke(*args)
    line = error_line(output)
    assert code == 1 and f"{gemma} stores no chat template" in line and "--template gemma3=TEMPLATE" in line
    assert not (tmp_path / "traces").exists()
    code, output = invoke(*args, "--template", "gemma3=gemma")
    assert code == 0, output
    assert header(tmp_path / "traces", "gemma3")["templates"] == {"target": "model", "drafter": "gemma"}

    device = LocalDevice(runner=runner)
    window = make_text_window("w", "The weather is nice today.", INSTRUCTION, 6, "demo", "dev")
    prompts = prompts_for(device, ModelFile("smollm2", smollm2), ModelFile("gemma3", gemma, template="gemma"), [window])
    assert detokenize(device, gemma, prompts.drafter["w"]).startswith(f"<bos>{GEMMA_TURN}{INSTRUCTION}\n\n")
    target_text = detokenize(device, smollm2, prompts.target["w"])
    assert target_text.startswith(f"<|im_start|>user\n{INSTRUCTION}") and "<start_of_turn>" not in target_text
