"""The runner's `divergence` mode on the demo pair (F16 target, Q4_1 drafter; docs/METHODS.md §6.5
Divergences explained): its width-1 row is the trace's decision with the trace's margin, its batched row
is the decode's decision at the verification width, and a real divergence is reproduced and classified
as a near-tie."""

from __future__ import annotations

import pytest

from specbench.core.divergence import Explanation, classify, committing_forward
from specbench.schemas.divergences import Margins
from tests.native.test_native_methods import tokenize

PROMPT = "Write a short story about a cat."
CAP = 32


def traced_and_decoded(run_job, target, drafter, window):
    """The trace's y and width-1 margins, and an SD W=5 decode of the same window checked against y."""
    models = {"target": {"path": str(target), "threads": 1}, "drafter": {"path": str(drafter), "threads": 1}}
    trace = run_job(models | {"mode": "trace", "k_max": 4, "margins": True, "producer": False, "windows": [window]})
    assert trace.returncode == 0, trace.error
    y, margins = trace.results[0]["y"], trace.results[0]["y_margin"]
    decode = run_job(models | {"mode": "decode", "methods": [{"name": "sd", "width": 5, "p_min": 0.0}],
                               "windows": [window | {"reference": y}]})
    assert decode.returncode == 0, decode.error
    record = decode.results[0]
    if record["kind"] == "divergence":
        forwards = [tuple(f) for f in record["forwards"]]
    else:
        forwards = [(op["width"], op["accepted"]) for op in record["ops"] if op["model"] == "target"]
    return {"target": target, "window": window | {"reference": y}, "y": y, "margins": margins, "record": record,
            "forwards": forwards}


@pytest.fixture(scope="module")
def decoded(run_job, demo_model_path):
    target, drafter = demo_model_path("smollm2-135m-f16"), demo_model_path("smollm2-135m")
    return traced_and_decoded(run_job, target, drafter,
                              {"id": "cat", "prompt": tokenize(run_job, target, PROMPT), "cap": CAP})


@pytest.fixture(scope="module")
def diverged(run_job, demo_model_path):
    """The demo window whose SD output left the trace's at a near-tie on this project's x86 host, its
    prompt rendered as `specbench trace` renders it."""
    from specbench.app.demo import bundled_windows_path
    from specbench.schemas.windows import load_windows
    from specbench.world.devices.base import open_device
    from specbench.world.model_files import ModelFile
    from specbench.world.tracing import prompts_for

    target, drafter = demo_model_path("smollm2-135m-f16"), demo_model_path("smollm2-135m")
    window = next(w for w in load_windows(bundled_windows_path()) if w.window_id == "translate-weather")
    prompts = prompts_for(open_device("local"), ModelFile("target", target), None, [window])
    return traced_and_decoded(run_job, target, drafter, prompts.runner_window(window))


def explain(run_job, decoded, cases):
    out = run_job({"mode": "divergence", "target": {"path": str(decoded["target"]), "threads": 1},
                   "windows": [decoded["window"]], "cases": cases})
    assert out.returncode == 0, out.error
    return out.results


def case(decoded, position, got):
    k = committing_forward(decoded["forwards"], position)
    assert k is not None
    return {"window_id": decoded["window"]["id"], "position": position, "got": got,
            "forwards": decoded["forwards"][:k + 1]}


def test_width_1_is_the_trace_and_the_batched_row_is_the_decode(run_job, decoded):
    y, forwards = decoded["y"], decoded["forwards"]
    first = decoded["record"].get("position", len(y))  # positions before a divergence: the decode committed y
    # every position a verification of width 5 committed at a row past its root, before any divergence
    positions, t = [], 1
    for width, accepted in forwards:
        positions += [p for p in range(t + 1, t + accepted + 1) if width > 1 and p < first]
        t += accepted + 1
    assert positions, "the drafter had no accepted candidate: nothing verified at a row past the root"
    positions = sorted({positions[0], positions[len(positions) // 2], positions[-1]})  # each case replays its prefix
    results = explain(run_job, decoded, [case(decoded, p, y[p]) for p in positions])
    for p, r in zip(positions, results, strict=True):
        assert (r["position"], r["expected"], r["got"]) == (p, y[p], y[p])
        assert r["single"]["top"][0][0] == y[p] and r["single"]["margin"] == pytest.approx(decoded["margins"][p],
                                                                                           abs=1e-6)
        assert r["batched"]["top"][0][0] == y[p]  # what the decode committed there
        assert r["width"] == 5 and 0 < r["row"] < 5
        assert r["max_logit_diff"] >= 0.0


def test_a_divergence_is_reproduced_and_classified_with_its_margins(run_job, diverged):
    record = diverged["record"]
    if record["kind"] != "divergence":
        pytest.skip("this host's F16 kernels gave SD W=5 the trace's output on this window: no divergence to explain")
    p, got = record["position"], record["got"]
    (r,) = explain(run_job, diverged, [case(diverged, p, got)])
    margins = Margins.from_runner(r)
    assert margins.single_top2[0] == diverged["y"][p] and margins.batched_top2[0] == got  # reproduced both ways
    assert margins.single_margin == pytest.approx(diverged["margins"][p], abs=1e-6)
    assert 0.0 <= margins.single_gap <= 2 * margins.max_logit_diff and margins.batched_gap <= 0.0
    assert classify(record["expected"], got, margins.single_top2[0], margins.single_gap,
                    margins.max_logit_diff) is Explanation.NEAR_TIE


def test_a_case_whose_forwards_do_not_reach_the_position_is_one_error_line(run_job, decoded):
    out = run_job({"mode": "divergence", "target": {"path": str(decoded["target"])}, "windows": [decoded["window"]],
                   "cases": [{"window_id": "cat", "position": 3, "got": 0, "forwards": [[1, 0]]}]})
    assert out.returncode == 1
    assert out.error["error"] == "case of window 'cat': the last forward commits positions 1..1, not 3"
