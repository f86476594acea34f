"""The native runner on tiny random-weight models: protocol, parity with a numpy greedy
decode, losslessness of speculative decoding, and trace/decode consistency."""

from __future__ import annotations

import importlib
import os
import subprocess

import pytest

from . import tiny_reference

CHAT = [261, 117, 115, 101, 114, 10, 258, 108, 108, 111, 256, 258, 32, 119, 111, 114, 108, 100, 262, 10,
        261, 97, 115, 115, 105, 115, 116, 97, 110, 116, 10]  # ChatML "hello the world", tiny vocab
WINDOWS = [
    {"id": "chat", "prompt": CHAT, "cap": 40},                                 # stops at the cap
    {"id": "eos17", "prompt": [76], "cap": 40},                                # EOS after 17 tokens
    {"id": "eos24", "prompt": [251, 97, 175, 243, 166, 215, 176, 180, 99], "cap": 40},
    {"id": "short", "prompt": [97, 98, 99], "cap": 40},                        # EOS as y[0]
]


def decode(run_job, target, drafter, methods, windows=WINDOWS, **extra):
    job = {"mode": "decode", "threads": 1, "target": {"path": str(target)}, "methods": methods, "windows": windows}
    if drafter is not None:
        job["drafter"] = {"path": str(drafter)}
    out = run_job(job | extra)
    assert out.returncode == 0, (out.error, out.stderr[-2000:])
    return out.results


def by_window(results):
    return {r["window_id"]: r for r in results}


@pytest.fixture(scope="module")
def target_only(run_job, tiny):
    """Target-only decodes of WINDOWS by window, made once for the tests that read them."""
    return by_window(decode(run_job, tiny.target, None, [{"name": "target"}]))


@pytest.fixture(scope="module")
def near_trace(run_job, tiny):
    """The trace of WINDOWS with the `near` drafter (k_max 16) by window, made once for the tests that read it."""
    return trace(run_job, tiny, tiny.near)


def test_target_only_equals_numpy_greedy(tiny, target_only):
    got = target_only
    for w in WINDOWS:
        want, margin = tiny_reference.greedy(tiny.weights, w["prompt"], w["cap"], set(tiny.eog))
        assert margin > 1e-3, "fixture has a near-tie; float differences could flip it"
        assert got[w["id"]]["tokens"] == want, w["id"]
    assert got["chat"]["stop_reason"] == "cap" and len(got["chat"]["tokens"]) == 40
    assert got["eos17"]["stop_reason"] == "eos" and len(got["eos17"]["tokens"]) == 17
    assert got["short"]["tokens"] == [260] and got["short"]["ops"] == []


@pytest.mark.parametrize("drafter", ["target", "near", "far"])
@pytest.mark.parametrize("width,p_min", [(2, 0.0), (5, 0.0), (8, 0.0), (5, 0.6)])
def test_sd_is_lossless(run_job, tiny, drafter, width, p_min):
    sd = {"name": "sd", "width": width, "p_min": p_min}
    results = decode(run_job, tiny.target, getattr(tiny, drafter), [{"name": "target"}, sd])
    base = {r["window_id"]: r for r in results if r["method"]["name"] == "target"}
    for r in results:
        if r["method"]["name"] != "sd":
            continue
        ref = base[r["window_id"]]
        assert r["tokens"] == ref["tokens"], r["window_id"]
        assert r["stop_reason"] == ref["stop_reason"]
        check_sd_op_log(r, width, n_prompt=r["n_prompt"])


def check_sd_op_log(r, width, n_prompt):
    """Each target forward verifies [root, drafts] at depth n_prompt + t - 1 and commits a+1
    tokens (fewer only at EOS or the cap); drafter forwards never exceed what was committed."""
    t = 1  # y[0] comes from the prefill
    for op in r["ops"]:
        assert op["us"] >= 0
        if op["model"] == "drafter":
            assert op["width"] >= 1 and "accepted" not in op
            continue
        assert 1 <= op["width"] <= width
        assert op["depth"] == n_prompt + t - 1
        assert 0 <= op["accepted"] <= op["width"] - 1
        t = min(t + op["accepted"] + 1, len(r["tokens"]))
    assert t == len(r["tokens"])


def test_sd_with_the_target_as_drafter_accepts_everything(run_job, tiny):
    (r,) = decode(run_job, tiny.target, tiny.target, [{"name": "sd", "width": 5}], windows=WINDOWS[:1])
    accepted = [op["accepted"] for op in r["ops"] if op["model"] == "target"]
    assert accepted[:-1] == [4] * (len(accepted) - 1)  # the last round is cut by the cap
    # Per round: one ingest forward (1 token at first, then 2: last draft + bonus) + 3 draft steps.
    drafter_widths = [op["width"] for op in r["ops"] if op["model"] == "drafter"]
    assert drafter_widths[:8] == [1, 1, 1, 1, 2, 1, 1, 1]


def trace(run_job, tiny, drafter, k_max=16, windows=WINDOWS):
    job = {"mode": "trace", "threads": 1, "target": {"path": str(tiny.target)}, "drafter": {"path": str(drafter)},
           "k_max": k_max, "windows": windows}
    out = run_job(job)
    assert out.returncode == 0, (out.error, out.stderr[-2000:])
    return by_window(out.results)


def test_trace_y_equals_decode_target(tiny, near_trace, target_only):
    traces, decoded = near_trace, target_only
    for w in WINDOWS:
        tr = traces[w["id"]]
        assert tr["y"] == decoded[w["id"]]["tokens"]
        assert tr["stop_reason"] == decoded[w["id"]]["stop_reason"]
        assert tr["n_prompt"] == len(w["prompt"])
        n = len(tr["y"])
        assert tr["drafts"]["k_max"] == 16
        assert len(tr["drafts"]["tokens"]) == n and len(tr["drafts"]["conf"]) == n
        for row, conf in zip(tr["drafts"]["tokens"], tr["drafts"]["conf"]):
            assert len(row) == 16 and len(conf) == 16
            assert all(0.0 < c <= 1.0 for tok, c in zip(row, conf) if tok != -1)
            if -1 in row:  # padding only after an end-of-generation token
                first = row.index(-1)
                assert row[first - 1] in tiny.eog and set(row[first:]) == {-1}
                assert set(conf[first:]) == {0.0}


def test_trace_with_the_target_as_drafter_predicts_y(run_job, tiny):
    tr = trace(run_job, tiny, tiny.target, windows=WINDOWS[:2])
    for w in tr.values():
        y = w["y"]
        for t, row in enumerate(w["drafts"]["tokens"]):
            # Same model, same greedy rule: row t is y[t:], then the model's own continuation.
            expect = y[t:t + 16]
            assert row[:len(expect)] == expect
        p = w["producer"]
        if w["stop_reason"] == "eos":
            assert p["tokens"] == y and p["stop"] == "eos"
        else:
            assert p["tokens"][: len(y)] == y
        assert p["step"] == list(range(len(p["tokens"]))) and p["steps"] == len(p["tokens"])


@pytest.mark.parametrize("width,p_min", [(2, 0.0), (5, 0.0), (8, 0.0), (5, 0.4), (8, 0.7)])
def test_native_sd_ops_equal_the_python_reference(run_job, tiny, near_trace, width, p_min):
    """The Python SD procedure on the runner's trace makes the runner's own decisions: the
    same forwards (widths, depths, accepted counts), confidence-stop probes and the cap's
    no-room rounds included."""
    method_configs = importlib.import_module("specbench.core.methods.configs")
    sd = importlib.import_module("specbench.core.methods.sd")
    base = importlib.import_module("specbench.core.methods.base")
    traces_mod = importlib.import_module("specbench.schemas.traces")
    fileio = importlib.import_module("specbench.schemas.fileio")
    tr = near_trace
    for r in decode(run_job, tiny.target, tiny.near, [{"name": "sd", "width": width, "p_min": p_min}]):
        doc = {k: v for k, v in tr[r["window_id"]].items() if k != "kind"} | {"window_sha256": "0" * 64}
        wt = traces_mod.window_trace_from_dict(doc, fileio.Where("runner output"),
                                                 traces_mod.Vocab(1 << 20, 1 << 20))
        cap = next(w["cap"] for w in WINDOWS if w["id"] == r["window_id"])
        ref = sd.decode_sd(base.TargetOracle(wt.y), base.TraceDrafts(wt), cap, wt.n_prompt, wt.n_prompt_drafter,
                           method_configs.SdConfig(width=width, p_min=p_min))
        assert list(ref.tokens) == r["tokens"]
        want = [(op.model.value, op.width, op.depth, op.accepted) for op in ref.ops]
        got = [(op["model"], op["width"], op["depth"], op.get("accepted", 0)) for op in r["ops"]]
        assert got == want, r["window_id"]


def test_trace_result_loads_with_the_python_trace_schema(run_job, tiny):
    traces_mod = importlib.import_module("specbench.schemas.traces")
    fileio = importlib.import_module("specbench.schemas.fileio")
    tr = trace(run_job, tiny, tiny.near, windows=WINDOWS[:1])["chat"]
    doc = {k: v for k, v in tr.items() if k != "kind"} | {"window_sha256": "0" * 64}
    wt = traces_mod.window_trace_from_dict(doc, fileio.Where("runner output"),
                                                 traces_mod.Vocab(1 << 20, 1 << 20))
    assert wt.y.tolist() == tr["y"] and wt.drafts.k_max == 16


def test_sweep_returns_every_width_and_depth(run_job, tiny):
    job = {"mode": "sweep", "threads": 1, "target": {"path": str(tiny.target)}, "drafter": {"path": str(tiny.near)},
           "widths": [1, 2, 3, 4, 5, 6, 7, 8], "drafter_widths": [1, 2], "depths": [0, 64], "repetitions": 5}
    out = run_job(job)
    assert out.returncode == 0, out.error
    keys = {(r["model"], r["width"], r["depth"]) for r in out.results}
    assert keys == {("target", w, d) for w in range(1, 9) for d in (0, 64)} | {("drafter", n, d) for n in (1, 2) for d in (0, 64)}
    for r in out.results:
        assert r["kind"] == "forward" and len(r["samples_us"]) == 5
        assert r["min_us"] <= r["median_us"] <= r["max_us"]
        assert r["logits"] == ("all" if r["model"] == "target" else "last")


def test_sweep_refuses_fewer_than_five_repetitions(run_job, tiny):
    out = run_job({"mode": "sweep", "target": {"path": str(tiny.target)}, "repetitions": 3})
    assert out.returncode != 0 and "repetitions" in out.error["error"]


@pytest.mark.parametrize("job,key", [
    ({"mode": "decode", "methods": [{"name": "target"}], "windows": [{"prompt": [1], "cap": 2}], "windwos": []}, "windwos"),
    ({"mode": "decode", "methods": [{"name": "target", "widht": 3}], "windows": [{"prompt": [1], "cap": 2}]}, "methods[0].widht"),
    ({"mode": "trace", "windows": [{"prompt": [1], "cap": 2, "captain": 1}]}, "windows[0].captain"),
    ({"mode": "sweep", "target_path": "x"}, "target_path"),
])
def test_unknown_job_key_is_a_json_error(run_job, tiny, job, key):
    job = job | {"target": {"path": str(tiny.target)}, "drafter": {"path": str(tiny.target)}}
    out = run_job(job)
    assert out.returncode != 0
    assert out.error["error"] == f"unknown job key '{key}'"
    assert "known keys" in out.error["hint"]
    assert out.results == []


def test_missing_model_file_is_a_json_error(run_job, tmp_path):
    missing = tmp_path / "nope.gguf"
    out = run_job({"mode": "decode", "target": {"path": str(missing)}, "methods": [{"name": "target"}],
                   "windows": [{"prompt": [1], "cap": 4}]})
    assert out.returncode != 0
    assert out.error["error"] == f"target model file not found: {missing}"
    assert out.error["hint"]


@pytest.mark.parametrize("job,needle", [
    ({"mode": "decoed"}, "unknown mode 'decoed'"),
    ({"mode": "decode", "methods": [{"name": "medusa"}], "windows": [{"prompt": [1], "cap": 2}]}, "unknown method 'medusa'"),
    ({"mode": "decode", "methods": [{"name": "sd", "width": 4}], "windows": [{"prompt": [1], "cap": 2}]}, "needs a drafter"),
    ({"mode": "decode", "methods": [{"name": "target"}], "windows": [{"prompt": "hi", "cap": 2}]}, "expected a list of integers"),
])
def test_bad_jobs_name_the_problem(run_job, tiny, job, needle):
    out = run_job(job | {"target": {"path": str(tiny.target)}})
    assert out.returncode != 0 and needle in out.error["error"], out.error


def test_invalid_json_is_a_json_error(runner):
    import json
    import subprocess

    done = subprocess.run([str(runner)], input="{not json", capture_output=True, text=True)
    assert done.returncode != 0
    assert json.loads(done.stdout.splitlines()[-1])["error"].startswith("job is not valid JSON")


def test_divergence_from_a_reference_is_reported(run_job, tiny):
    bad = [1, 2, 3]
    (r,) = decode(run_job, tiny.target, None, [{"name": "target"}], windows=[WINDOWS[0] | {"reference": bad}])
    assert r["kind"] == "divergence" and r["position"] == 0 and r["expected"] == 1
    assert "decode_s" not in r  # a diverging window never reports a throughput


def test_tokenize_roundtrip_with_chat_template(run_job, tiny):
    out = run_job({"mode": "tokenize", "model": {"path": str(tiny.target)}, "texts": ["hello the world"], "chat": True})
    (r,) = out.results
    assert r["tokens"] == CHAT
    back = run_job({"mode": "detokenize", "model": {"path": str(tiny.target)}, "tokens": [r["tokens"]], "special": True})
    assert back.results[0]["text"] == r["text"]


def test_trace_margins_are_opt_in_near_tie_diagnostics(run_job, tiny):
    job = {"mode": "trace", "threads": 1, "target": {"path": str(tiny.target)}, "drafter": {"path": str(tiny.near)},
           "windows": WINDOWS[:2], "margins": True, "producer": False}
    out = run_job(job)
    for r in out.results:
        assert len(r["y_margin"]) == len(r["y"]) and min(r["y_margin"]) > 0
        assert "producer" not in r
    plain = trace(run_job, tiny, tiny.near, windows=WINDOWS[:1])["chat"]
    assert "y_margin" not in plain  # the Python trace schema rejects unknown keys


def test_tokenize_with_a_named_builtin_template(run_job, tiny):
    out = run_job({"mode": "tokenize", "model": {"path": str(tiny.target)}, "texts": ["hi"], "chat": True,
                   "template": "gemma"})
    assert out.results[0]["text"] == "<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n"
    bad = run_job({"mode": "tokenize", "model": {"path": str(tiny.target)}, "texts": ["hi"], "chat": True,
                   "template": "no-such-template"})
    assert bad.returncode == 1 and "no-such-template" in bad.error["error"]


def test_a_width_beyond_the_context_is_a_json_error(run_job, tiny):
    """llama.cpp caps the batch at n_ctx: a wider all-logits forward is refused, not aborted."""
    out = run_job({"mode": "sweep", "target": {"path": str(tiny.target)}, "widths": [1, 8], "depths": [0], "n_ctx": 4})
    assert out.returncode == 1
    assert out.error["error"] == ("target forward of width 8 exceeds the batch of 4 tokens "
                                  "(llama.cpp caps the batch at the job's n_ctx)")
    assert "n_ctx" in out.error["hint"]
    out = run_job({"mode": "sweep", "target": {"path": str(tiny.target)}, "widths": [300], "depths": [0], "n_ctx": 256})
    assert out.returncode == 1 and out.error["error"] == "target context full: 0 + 300 tokens > n_ctx 256"


def test_a_drafter_whose_vocabulary_cannot_be_mapped_is_a_json_error(run_job, tiny, tmp_path):
    from . import tiny_gguf as tg

    lossy = tg.write_tiny_qwen3(tmp_path / "lossy.gguf", tg.random_weights(seed=5, n_vocab=tg.n_vocab("b-lossy")),
                                vocab="b-lossy")
    out = run_job({"mode": "decode", "target": {"path": str(tiny.target)}, "drafter": {"path": str(lossy)},
                   "methods": [{"name": "sd", "width": 4}], "windows": [{"prompt": [97, 98], "cap": 8}]})
    assert out.returncode == 1
    assert out.error["error"].startswith(f"cannot map between the vocabularies of the target ({tiny.target}) and the "
                                         f"drafter ({lossy}): the drafter's tokenizer does not round-trip text")
    assert "same-vocabulary drafter" in out.error["hint"] and out.results == []


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="a lane of two threads needs two CPUs")
def test_a_lanes_openmp_workers_are_pinned_one_to_a_cpu_and_its_own_thread_keeps_the_set(run_job, runner, tiny):
    # the host build runs ggml's threads as an OpenMP team: its worker i goes to the lane's i-th CPU, so two
    # lanes on the same CPUs never leave two threads of one lane stacked on one CPU (docs/METHODS.md §4.1
    # Placement); the lane's own thread keeps the whole set, as the read-back says
    if "libgomp" not in subprocess.run(["ldd", str(runner)], capture_output=True, text=True).stdout:
        pytest.skip("this runner build has no OpenMP: ggml starts its threads per forward, unpinned within the set")
    cpus = sorted(os.sched_getaffinity(0))[:2]
    lanes = {"path": str(tiny.target), "cpus": cpus}
    out = run_job({"mode": "decode", "threads": 2, "target": lanes, "drafter": lanes | {"path": str(tiny.near)},
                   "methods": [{"name": "target"}, {"name": "sd", "width": 3}], "windows": WINDOWS[:1]})
    assert out.returncode == 0, (out.error, out.stderr[-2000:])
    [pinning] = [e for e in out.events if e.get("event") == "pinning"]
    assert {lane["lane"]: lane["read_back"] for lane in pinning["lanes"]} == {"target": cpus, "drafter": cpus}
    by_tid = {t["tid"]: t["cpus"] for t in pinning["threads"]}
    job_thread = pinning["lanes"][0]["tid"]
    assert by_tid[job_thread] == cpus
    assert [c for tid, c in by_tid.items() if tid != job_thread] == [cpus[1:]]
