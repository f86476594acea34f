"""The prompt-lookup drafter `pld` in the runner (docs/METHODS.md §2.7 Prompt-lookup drafting): its trace rows are the
Python lookup's (the hand-made cases of tests/core/test_lookup.py included), native SD with it
is lossless and makes replay's operations op by op, its cost is measured by the sweep, and
through the world layer profile -> trace -> replay agrees with native rows."""

from __future__ import annotations

import pytest

from specbench.core.methods.base import Model
from specbench.core.methods.configs import As2dConfig, SdConfig, TargetConfig
from specbench.core.methods.lookup import IDENTITY, lookup_rows
from specbench.core.replay.reference import decode_serial, replay_window
from specbench.schemas.placement import resolve
from specbench.schemas.profiles import ModelId, load_profile
from specbench.schemas.results import load_results
from specbench.schemas.traces import PAD, load_trace_dir
from specbench.schemas.windows import make_text_window
from specbench.world.decode_run import NativePlan, run_native
from specbench.world.devices.local import LocalDevice
from specbench.world.model_files import LOOKUP_DRAFTER, ModelFile
from specbench.world.profiling import SweepPlan, profile_device, write_profile
from specbench.world.tracing import trace_windows
from tests.core.test_lookup import CASES

from .test_native_methods import check_as2d_against_python, load_window_trace, reference_ops, tokenize
from .test_native_runner import WINDOWS, by_window, decode

LOOKUP = {"lookup": "pld"}


def lookup_trace(run_job, target, windows, k_max=16, producer=False):
    out = run_job({"mode": "trace", "threads": 1, "target": {"path": str(target)}, "drafter": LOOKUP, "k_max": k_max,
                   "producer": producer, "windows": windows})
    assert out.returncode == 0, (out.error, out.stderr[-2000:])
    return by_window(out.results)


def test_trace_rows_are_the_python_lookup_and_the_hand_made_cases(run_job, tiny):
    cases = [{"id": f"case{i}", "prompt": context, "cap": 3} for i, (context, *_rest) in enumerate(CASES)]
    traces = lookup_trace(run_job, tiny.target, WINDOWS + cases)
    for i, (context, limit, expected, what) in enumerate(CASES):
        row = traces[f"case{i}"]["drafts"]["tokens"][0]  # row 0: the lookup over the prompt alone
        assert tuple(t for t in row[:limit] if t != PAD) == expected, what
    for w in WINDOWS + cases:
        doc = traces[w["id"]]
        assert doc["drafts"]["lookup"] == {"name": "pld", "max_ngram": 3} and "producer" not in doc
        assert doc["drafts"]["tokens"] == lookup_rows(w["prompt"], doc["y"], 16).tolist()
        assert all(c == 1.0 for row, crow in zip(doc["drafts"]["tokens"], doc["drafts"]["conf"])
                   for t, c in zip(row, crow) if t != PAD)
    target_only = by_window(decode(run_job, tiny.target, None, [{"name": "target"}]))
    assert all(traces[w["id"]]["y"] == target_only[w["id"]]["tokens"] for w in WINDOWS)


@pytest.mark.parametrize("width", [2, 5, 8])
def test_native_pld_is_lossless_and_makes_replays_ops(run_job, tiny, width):
    traces = lookup_trace(run_job, tiny.target, WINDOWS)
    job = {"mode": "decode", "threads": 1, "target": {"path": str(tiny.target)}, "drafter": LOOKUP,
           "methods": [{"name": "target"}, {"name": "sd", "width": width}], "windows": WINDOWS}
    out = run_job(job)
    assert out.returncode == 0, (out.error, out.stderr[-2000:])
    base = {r["window_id"]: r for r in out.results if r["method"]["name"] == "target"}
    accepted = 0
    for r in out.results:
        if r["method"]["name"] != "sd":
            continue
        assert r["tokens"] == base[r["window_id"]]["tokens"], r["window_id"]
        cap = next(w["cap"] for w in WINDOWS if w["id"] == r["window_id"])
        ref = decode_serial(SdConfig(width=width, drafter="pld"), load_window_trace(traces[r["window_id"]]), cap)
        assert list(ref.tokens) == r["tokens"]
        assert reference_ops(r["ops"]) == [(op.model.value, op.width, op.depth, op.accepted) for op in ref.ops]
        accepted += sum(op.get("accepted", 0) for op in r["ops"])
        assert r["first_draft_us"] == r["first_token_us"]  # no drafter prefill
    assert accepted > 0, "the lookup never proposed an accepted candidate on these windows"


@pytest.mark.parametrize("job,needle", [
    ({"mode": "decode", "methods": [{"name": "specasr"}]}, "drafts for sd and as2d only"),
    ({"mode": "decode", "methods": [{"name": "as2d"}]}, "has no \"input\""),
    ({"mode": "decode", "methods": [{"name": "sd", "width": 4}], "drafter": {"lookup": "ngram"}},
     "unknown lookup drafter 'ngram'"),
    ({"mode": "trace", "producer": True}, "has no \"input\""),
    ({"mode": "trace", "producer": False, "specasr": [{"k_max": 4}]}, "has none"),
    ({"mode": "sweep", "drafter_widths": [1, 2]}, "width 1"),
])
def test_what_the_lookup_drafter_cannot_do_is_a_json_error(run_job, tiny, job, needle):
    out = run_job({"threads": 1, "target": {"path": str(tiny.target)}, "drafter": LOOKUP, "windows": WINDOWS[:1]} | job
                  if job["mode"] != "sweep" else {"threads": 1, "target": {"path": str(tiny.target)}, "drafter": LOOKUP,
                                                  "widths": [1], "depths": [0]} | job)
    assert out.returncode == 1 and needle in out.error["error"], out.error


def test_native_pld_as2d_publishes_the_input_and_matches_the_python_verifier(run_job, tiny):
    """The lookup drafter as AS2D's producer: the stream is the window's input, all published
    before the clock; the verifier plans on it exactly as the Python As2dVerifier does."""
    base = {w: r["tokens"] for w, r in by_window(decode(run_job, tiny.target, None, [{"name": "target"}])).items()}
    copy = [w | {"input": base[w["id"]][:12]} for w in WINDOWS]           # the answer's start as the input
    unrelated = [{"id": "other", "prompt": WINDOWS[0]["prompt"], "cap": 30, "input": [5, 6, 7, 8]}]
    methods = [{"name": "as2d", "budget": 7}, {"name": "as2d", "budget": 3, "batch": 2, "align": "positional"}]
    job = {"mode": "decode", "threads": 1, "target": {"path": str(tiny.target)}, "drafter": LOOKUP,
           "methods": [{"name": "target"}, *methods], "windows": copy + unrelated}
    out = run_job(job)
    assert out.returncode == 0, (out.error, out.stderr[-2000:])
    traces = lookup_trace(run_job, tiny.target, copy + unrelated, producer=True)
    reference = {r["window_id"]: r["tokens"] for r in out.results if r["method"]["name"] == "target"}
    for r in out.results:
        if r["method"]["name"] != "as2d":
            continue
        w = next(w for w in copy + unrelated if w["id"] == r["window_id"])
        assert r["tokens"] == reference[w["id"]]
        check_as2d_against_python(r, w["cap"])
        p = r["producer"]
        assert p["tokens"] == w["input"][:w["cap"]] == traces[w["id"]]["producer"]["tokens"]
        assert p["steps"] == 1 and p["step_us"] == [] and p["published"] == len(p["tokens"])
        assert traces[w["id"]]["producer"]["step"] == [0] * len(p["tokens"])
        accepted = sum(op["accepted"] for op in r["ops"])
        if w["id"] != "other" and len(reference[w["id"]]) > 2 and r["method"]["align"] == "anchor":
            assert accepted >= min(len(w["input"]), len(reference[w["id"]])) - 2, (w["id"], accepted)


def test_sweep_times_the_lookup_at_every_depth(run_job, tiny):
    out = run_job({"mode": "sweep", "threads": 1, "target": {"path": str(tiny.target)}, "drafter": LOOKUP,
                   "widths": [1, 2], "drafter_widths": [1], "depths": [0, 32, 96], "repetitions": 5})
    assert out.returncode == 0, out.error
    lookups = [r for r in out.results if r["model"] == "drafter"]
    assert [(r["width"], r["depth"], r["lookup"]) for r in lookups] == [(1, 0, "pld"), (1, 32, "pld"), (1, 96, "pld")]
    assert all(r["median_us"] > 0 and len(r["samples_us"]) == 5 for r in lookups)


def test_profile_trace_replay_and_native_rows_agree(runner, tiny, tmp_path):
    device = LocalDevice(runner=runner)
    target = ModelFile("target", tiny.target)
    texts = ["the tin and the tin and the tin", "hello the world hello the world", "in the heat"]
    windows = [make_text_window(f"w{i}", text, "Repeat this.", 24, "tiny", "test") for i, text in enumerate(texts)]
    placement = resolve("shared", device.cpus(), device.processors())
    sweep = SweepPlan(tuple(range(1, 9)), (1, 2), (0, 64), placement, 5)
    ticks = []
    run = profile_device(device, target, [LOOKUP_DRAFTER], sweep, ticks.append)
    assert sum(ticks) == sweep.forwards([LOOKUP_DRAFTER]) == len(run.samples)
    write_profile(tmp_path / "p.yaml", run)
    profile = load_profile(tmp_path / "p.yaml")
    pld = profile.drafter("pld")
    assert pld.costs.widths() == [1] and pld.cosched is None and pld.all_rows_costs is None
    assert pld.model == ModelId("pld", IDENTITY)
    trace_windows(device, windows, target, LOOKUP_DRAFTER, tmp_path / "traces", k_max=8, threads=1)
    traces = load_trace_dir(tmp_path / "traces")["pld"]
    assert traces.drafter.sha256 == IDENTITY and traces.templates["drafter"] == traces.templates["target"]
    configs = [TargetConfig(), SdConfig(3, drafter="pld"), SdConfig(5, drafter="pld"), As2dConfig(3, drafter="pld"),
               As2dConfig(7, drafter="pld")]
    plan = NativePlan(device, windows, target, (LOOKUP_DRAFTER,), configs, placement, windows_path="w.jsonl")
    outcome = run_native(plan, tmp_path / "native", resume=False)
    added, diverged = outcome.added, outcome.diverged
    assert added == 15 and diverged == 0
    assert traces.windows["w0"].producer.tokens.size > 0  # the input view, in target tokens
    native = load_results(tmp_path / "native")[1].set_index(["config", "window_id"])
    counts = ["target_forwards", "proposed", "accepted", "multi_token_forwards", "drafter_forwards", "tokens"]
    for window in windows:
        for config in configs:
            replayed = replay_window(window, traces.windows[window.window_id], profile, config)
            assert [getattr(replayed, c) for c in counts] == native.loc[(config.label, window.window_id), counts].tolist()
            if isinstance(config, SdConfig):  # each lookup priced from the pld entry at its depth
                ops = decode_serial(config, traces.windows[window.window_id], window.cap).ops
                lookups = [op for op in ops if op.model is Model.DRAFTER]
                assert replayed.d_s == pytest.approx(sum(pld.costs.cost(1, op.depth) for op in lookups))
                assert replayed.d_s > 0 and replayed.drafter_forwards == len(lookups)


def test_smollm2_copying_from_its_prompt_accepts_long_runs(run_job, demo_model_path):
    """A real tokenizer and a copy task: native SD with pld equals replay op by op and is lossless."""
    sm = demo_model_path("smollm2-135m")
    text = "Repeat this sentence exactly: the quick brown fox jumps over the lazy dog near the river bank."
    window = {"id": "copy", "prompt": tokenize(run_job, sm, text), "cap": 24}
    target = {"path": str(sm), "threads": 1}
    wt = load_window_trace(lookup_trace(run_job, sm, [window], k_max=8)["copy"])
    out = run_job({"mode": "decode", "target": target, "drafter": LOOKUP, "windows": [window],
                   "methods": [{"name": "target"}, {"name": "sd", "width": 5}, {"name": "sd", "width": 8}]})
    assert out.returncode == 0, out.error
    base, *sd_runs = out.results
    for r in sd_runs:
        assert r["tokens"] == base["tokens"] == wt.y.tolist()
        ref = decode_serial(SdConfig(width=r["method"]["width"], drafter="pld"), wt, 24)
        assert reference_ops(r["ops"]) == [(op.model.value, op.width, op.depth, op.accepted) for op in ref.ops]
        assert max(op.get("accepted", 0) for op in r["ops"]) >= 3  # copied runs from the prompt
