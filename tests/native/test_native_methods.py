"""The runner's SpecASR and AS2D methods on tiny random-weight models (and the smollm2 demo
model): lossless output, and the same decisions as the Python reference procedures
(specbench.core.methods.specasr / specbench.core.methods.as2d) given the same model answers."""

from __future__ import annotations

import importlib

import pytest

from .test_native_runner import WINDOWS, by_window, decode

SPECASR_CONFIGS = [(4, 0.0), (6, 0.3), (8, 0.6), (3, 0.9)]


def specasr_method(k_max, tau):
    return {"name": "specasr", "k_max": k_max, "tau": tau}


def target_tokens(run_job, tiny, windows=WINDOWS):
    return {w: r["tokens"] for w, r in by_window(decode(run_job, tiny.target, None, [{"name": "target"}],
                                                        windows=windows)).items()}


def reference_ops(ops):
    """The runner's op log as (model, width, depth, accepted) tuples, confidence-stop
    probes included (the Python reference counts them as well)."""
    return [(op["model"], op["width"], op["depth"], op.get("accepted", 0)) for op in ops]


@pytest.mark.parametrize("drafter", ["target", "near", "far"])
def test_specasr_is_lossless(run_job, tiny, drafter):
    base = target_tokens(run_job, tiny)
    methods = [specasr_method(k, tau) for k, tau in SPECASR_CONFIGS]
    for r in decode(run_job, tiny.target, getattr(tiny, drafter), methods):
        assert r["kind"] == "decode", r
        assert r["tokens"] == base[r["window_id"]], (r["window_id"], r["method"])
        t = 1
        for op in r["ops"]:
            if op["model"] == "target":
                assert op["depth"] == r["n_prompt"] + t - 1
                assert op["width"] <= r["method"]["k_max"] + 1
                t = min(t + op["accepted"] + 1, len(r["tokens"]))
        assert t == len(r["tokens"])


def test_every_serial_op_starts_on_the_decode_clock_after_the_one_before_ended(run_job, tiny, tiny_other_vocab):
    # the gaps between forwards: the host work a profile prices (docs/METHODS.md §4.4 Overheads)
    methods = [{"name": "target"}, {"name": "sd", "width": 4}, specasr_method(*SPECASR_CONFIGS[1])]
    results = decode(run_job, tiny.target, tiny.near, methods)
    results += decode(run_job, tiny.target, tiny_other_vocab, [{"name": "sd", "width": 4}])
    assert {r["method"]["name"] for r in results} == {"target", "sd", "specasr"}
    for r in results:
        ended = 0
        for op in r["ops"]:
            assert op["t_us"] >= ended, (r["method"], op)
            ended = op["t_us"] + op["us"]
        assert ended <= round(r["decode_s"] * 1e6) + 1  # the decode's clock stops after the last commit


def specasr_trace(run_job, tiny, drafter, configs, windows=WINDOWS, k_max=16):
    job = {"mode": "trace", "threads": 1, "target": {"path": str(tiny.target)}, "drafter": {"path": str(drafter)},
           "k_max": k_max, "windows": windows, "producer": False,
           "specasr": [{"k_max": k, "tau": tau} for k, tau in configs]}
    out = run_job(job)
    assert out.returncode == 0, (out.error, out.stderr[-2000:])
    return by_window(out.results)


def load_window_trace(doc):
    traces = importlib.import_module("specbench.schemas.traces")
    fileio = importlib.import_module("specbench.schemas.fileio")
    return traces.window_trace_from_dict({k: v for k, v in doc.items() if k != "kind"} | {"window_sha256": "0" * 64},
                                         fileio.Where("runner output"), traces.Vocab(1 << 20, 1 << 20))


@pytest.mark.parametrize("drafter", ["near", "far", "target"])
def test_specasr_ops_equal_the_python_reference(run_job, tiny, drafter):
    method_configs = importlib.import_module("specbench.core.methods.configs")
    specasr = importlib.import_module("specbench.core.methods.specasr")
    base = importlib.import_module("specbench.core.methods.base")
    model = getattr(tiny, drafter)
    traces = specasr_trace(run_job, tiny, model, SPECASR_CONFIGS)
    results = decode(run_job, tiny.target, model, [specasr_method(k, tau) for k, tau in SPECASR_CONFIGS])
    recycled = 0
    for r in results:
        doc = traces[r["window_id"]]
        k_max, tau = r["method"]["k_max"], r["method"]["tau"]
        config = method_configs.SpecAsrConfig(k_max=k_max, tau=tau)
        assert config.trace_label in doc["recycle"]
        recycled += len(doc["recycle"][config.trace_label])
        wt = load_window_trace(doc)
        cap = next(w["cap"] for w in WINDOWS if w["id"] == r["window_id"])
        ref = specasr.decode_specasr(base.TargetOracle(wt.y), base.TraceDrafts(wt), cap, wt.n_prompt,
                                     wt.n_prompt_drafter, config)
        assert list(ref.tokens) == r["tokens"]
        want = [(op.model.value, op.width, op.depth, op.accepted) for op in ref.ops]
        assert reference_ops(r["ops"]) == want, (r["window_id"], config.label)
        # A probe is a single-token drafter forward right before a verification.
        for i, op in enumerate(r["ops"]):
            if op.get("probe"):
                assert op["model"] == "drafter" and op["width"] == 1 and r["ops"][i + 1]["model"] == "target"
    if drafter != "target":
        assert recycled > 0, "no recycling query was exercised"


def test_trace_recycle_labels_follow_python_formatting(run_job, tiny):
    method_configs = importlib.import_module("specbench.core.methods.configs")
    configs = [(5, 0.25), (4, 1e-05), (2, 1.0)]
    tr = specasr_trace(run_job, tiny, tiny.near, configs, windows=WINDOWS[:1])["chat"]
    assert set(tr["recycle"]) == {method_configs.SpecAsrConfig(k_max=k, tau=t).trace_label for k, t in configs}


def test_specasr_k_max_above_the_trace_k_max_is_refused(run_job, tiny):
    out = run_job({"mode": "trace", "target": {"path": str(tiny.target)}, "drafter": {"path": str(tiny.near)},
                   "k_max": 4, "windows": WINDOWS[:1], "specasr": [{"k_max": 8, "tau": 0.5}]})
    assert out.returncode == 1 and "k_max" in out.error["error"]


# ---------------------------------------------------------------- AS2D

AS2D_CONFIGS = [
    {"budget": 7},
    {"budget": 3, "batch": 4, "align": "positional"},
    {"budget": 5, "batch": 2, "conf_stop": 0.4, "horizon": 4},
]
LONG = [{"id": "long", "prompt": [251, 97, 175, 243, 166, 215, 176, 180, 99, 7], "cap": 200}]


def as2d_method(**params):
    return {"name": "as2d"} | params


def check_as2d_against_python(r, cap):
    """Feed the Python As2dVerifier the runner's producer stream and its snapshot counts:
    it must plan the same candidates, and the target must accept the same counts."""
    np = pytest.importorskip("numpy")
    method_configs = importlib.import_module("specbench.core.methods.configs")
    as2d = importlib.import_module("specbench.core.methods.as2d")
    base = importlib.import_module("specbench.core.methods.base")
    m = r["method"]
    config = method_configs.As2dConfig(budget=m["budget"], batch=m["batch"], conf_stop=m["conf_stop"], align=m["align"],
                             horizon=m["horizon"])
    p = r["producer"]
    z = np.asarray(p["tokens"], dtype=np.int32)
    pz = np.asarray(p.get("conf", [1.0] * len(z)), dtype=np.float64)
    oracle = base.TargetOracle(r["tokens"])
    verifier = as2d.As2dVerifier(config, cap)
    used = 0
    for op in r["ops"]:
        assert op["model"] == "target"
        assert op["published"] <= p["published"] and op["published"] % config.batch in (0, p["published"] % config.batch)
        plan = verifier.plan(oracle.committed, oracle.last(), z, pz, op["published"])
        assert list(plan.candidates) == op["candidates"]
        assert (plan.start, plan.anchored, plan.searched) == (op["start"], op["anchored"], op["searched"])
        assert op["width"] == len(op["candidates"]) + 1
        accepted, committed = oracle.verify(plan.candidates)
        assert accepted == op["accepted"]
        verifier.observe(plan, accepted, committed)
        used += len(plan.candidates)
    assert oracle.done
    # Publication is append-only and in whole batches (but the last).
    counts = p["publish_count"]
    assert counts == sorted(counts) and all(c % config.batch == 0 for c in counts[:-1])
    assert p["step"] == sorted(p["step"]) and len(p["step"]) == len(p["tokens"])
    ts = [op["t_us"] for op in r["ops"]]
    assert ts == sorted(ts)
    return used


@pytest.mark.parametrize("drafter", ["target", "near", "far"])
def test_as2d_is_lossless_and_matches_the_python_verifier(run_job, tiny, drafter):
    windows = WINDOWS + LONG
    base = target_tokens(run_job, tiny, windows)
    caps = {w["id"]: w["cap"] for w in windows}
    methods = [as2d_method(**c) for c in AS2D_CONFIGS]
    for r in decode(run_job, tiny.target, getattr(tiny, drafter), methods, windows=windows):
        assert r["kind"] == "decode", r
        assert r["tokens"] == base[r["window_id"]], (r["window_id"], r["method"])
        check_as2d_against_python(r, caps[r["window_id"]])
        assert r["producer"]["stop"] in ("eos", "cap", "drained")
        assert ("conf" in r["producer"]) == (r["method"]["conf_stop"] > 0)


def test_as2d_producer_is_the_drafters_own_greedy_decode(run_job, tiny):
    """The producer never reads the target: its tokens are the trace's producer stream."""
    job = {"mode": "trace", "threads": 1, "target": {"path": str(tiny.target)}, "drafter": {"path": str(tiny.near)},
           "k_max": 4, "windows": LONG}
    tr = run_job(job).results[0]["producer"]
    (r,) = decode(run_job, tiny.target, tiny.near, [as2d_method(budget=4)], windows=LONG)
    p = r["producer"]
    assert p["tokens"] == tr["tokens"][: len(p["tokens"])]
    assert p["step"] == list(range(len(p["tokens"])))
    if p["stop"] != "drained":
        assert p["tokens"] == tr["tokens"]


def check_producer_timeline(r, stream, n_prompt_drafter):
    """The runner's producer log equals replay's producer timeline of the traced stream: the
    same steps (z[0] from the prefill, one drafter forward per further step) and each batch
    published after the same step; a drained producer did a prefix of it."""
    replay = importlib.import_module("specbench.core.replay.reference")
    pricing = importlib.import_module("specbench.core.pricing")
    np = pytest.importorskip("numpy")
    p = r["producer"]
    unit = pricing.CostTable(np.array([0.0]), {1: np.array([1.0])})
    timeline = replay.producer_timeline(stream, unit, n_prompt_drafter, r["method"]["batch"], 0.0)
    steps = p["steps"]
    assert len(p["step_us"]) == len(p["step_start_us"]) == steps - 1
    assert timeline.forwards_done(timeline.cum[steps]) == steps - 1
    if p["stop"] == "drained":
        assert steps <= timeline.steps
    else:
        assert steps == timeline.steps and timeline.forwards_done(timeline.total) == steps - 1
    assert p["publish_step"] == [s for s in timeline.publish_steps.tolist() if s < steps]
    assert len(p["publish_step"]) == len(p["publish_count"])


@pytest.mark.parametrize("vocab", ["same", "other"])
def test_as2d_producer_log_equals_replays_producer_timeline(run_job, tiny, tiny_other_vocab, tmp_path, vocab):
    from . import tiny_gguf as tg

    slow = tg.write_tiny_qwen3(tmp_path / "slow.gguf", tg.slowed(tiny.weights, extra_layers=24))
    drafter = tiny.near if vocab == "same" else tiny_other_vocab
    windows = WINDOWS[:2] + LONG if vocab == "same" else cross_windows(run_job, tiny.target, drafter)
    traced = by_window(run_job({"mode": "trace", "threads": 1, "target": {"path": str(slow)},
                                "drafter": {"path": str(drafter)}, "k_max": 4, "windows": windows}).results)
    methods = [as2d_method(budget=4), as2d_method(budget=3, batch=3), as2d_method(budget=2, batch=1)]
    stops = set()
    for r in decode(run_job, slow, drafter, methods, windows=windows):
        stream = load_window_trace(traced[r["window_id"]]).producer
        check_producer_timeline(r, stream, r["n_prompt_drafter"])
        stops.add(r["producer"]["stop"])
    assert stops - {"drained"}, "no producer ran to its end"


def test_as2d_uses_published_candidates_on_a_slow_target(run_job, tiny, tmp_path):
    """A target slowed by zero-output layers computes the tiny target's function, so the
    tiny target drafting for it runs ahead: verifications use published batches, and the
    runner's decisions still equal the Python verifier's under the same snapshots."""
    from . import tiny_gguf as tg

    slow = tg.write_tiny_qwen3(tmp_path / "slow.gguf", tg.slowed(tiny.weights, extra_layers=24))
    windows = WINDOWS[:1] + LONG
    methods = [as2d_method(budget=7), as2d_method(budget=3, batch=4, align="positional")]
    base = {w: r["tokens"] for w, r in by_window(decode(run_job, slow, None, [{"name": "target"}], windows=windows)).items()}
    assert base == target_tokens(run_job, tiny, windows)  # the extra layers change nothing
    used = accepted = 0
    for r in decode(run_job, slow, tiny.target, methods, windows=windows):
        assert r["tokens"] == base[r["window_id"]]
        used += check_as2d_against_python(r, next(w["cap"] for w in windows if w["id"] == r["window_id"]))
        accepted += sum(op["accepted"] for op in r["ops"])
    assert used > 0 and accepted > 0


# ---------------------------------------------------------------- demo model, cross vocabulary


def tokenize(run_job, model, text, **extra):
    out = run_job({"mode": "tokenize", "model": {"path": str(model)}, "texts": [text], "chat": True} | extra)
    assert out.returncode == 0, out.error
    return out.results[0]["tokens"]


def test_smollm2_drafting_for_itself_is_lossless(run_job, demo_model_path):
    sm = demo_model_path("smollm2-135m")
    prompt = tokenize(run_job, sm, "Write a short story about a cat.")
    job = {"mode": "decode", "target": {"path": str(sm), "threads": 1}, "drafter": {"path": str(sm), "threads": 1},
           "methods": [{"name": "target"}, as2d_method(budget=5), specasr_method(6, 0.3)],
           "windows": [{"id": "cat", "prompt": prompt, "cap": 32}]}
    out = run_job(job)
    assert out.returncode == 0, out.error
    base, *rest = out.results
    for r in rest:
        assert r["tokens"] == base["tokens"], r["method"]
        if r["method"]["name"] == "as2d":
            check_as2d_against_python(r, 32)
        else:
            assert sum(op.get("accepted", 0) for op in r["ops"]) > 0


def cross_windows(run_job, target, drafter, target_kw=None, drafter_kw=None):
    text = "hello the world"
    return [{"id": "chat", "prompt": tokenize(run_job, target, text, **(target_kw or {})),
             "drafter_prompt": tokenize(run_job, drafter, text, **(drafter_kw or {})), "cap": 40},
            {"id": "short", "prompt": [76], "drafter_prompt": [76], "cap": 30}]


def test_cross_vocabulary_sd_and_as2d_are_lossless_on_tiny_models(run_job, tiny, tiny_other_vocab):
    windows = cross_windows(run_job, tiny.target, tiny_other_vocab)
    methods = [{"name": "target"}, {"name": "sd", "width": 5}, {"name": "sd", "width": 3, "p_min": 0.3},
               as2d_method(budget=5), as2d_method(budget=3, batch=2, conf_stop=0.2)]
    results = decode(run_job, tiny.target, tiny_other_vocab, methods, windows=windows)
    base = {r["window_id"]: r["tokens"] for r in results if r["method"]["name"] == "target"}
    caps = {w["id"]: w["cap"] for w in windows}
    for r in results:
        assert r["tokens"] == base[r["window_id"]], (r["window_id"], r["method"])
        if r["method"]["name"] != "target":
            assert r["cross_vocab"] is True
        if r["method"]["name"] == "as2d":
            check_as2d_against_python(r, caps[r["window_id"]])
            p = r["producer"]
            assert all(0 <= t < tiny.weights["token_embd.weight"].shape[0] for t in p["tokens"])


def test_cross_vocabulary_trace_maps_the_producer_and_the_drafts(run_job, tiny, tiny_other_vocab):
    windows = cross_windows(run_job, tiny.target, tiny_other_vocab)
    out = run_job({"mode": "trace", "threads": 1, "target": {"path": str(tiny.target)},
                   "drafter": {"path": str(tiny_other_vocab)}, "k_max": 6, "windows": windows})
    assert out.returncode == 0, out.error
    n_vocab = tiny.weights["token_embd.weight"].shape[0]
    decoded = by_window(decode(run_job, tiny.target, tiny_other_vocab, [as2d_method(budget=4)], windows=windows))
    for tr in out.results:
        wt = load_window_trace(tr)  # the Python schema accepts it
        p = tr["producer"]
        assert p["steps"] >= p["step"][-1] + 1 and len(p["tokens"]) <= 40
        assert all(0 <= t < n_vocab for t in p["tokens"]) and all(0 < c <= 1 for c in p["conf"])
        assert wt.drafts.k_max == 6
        live = decoded[tr["window_id"]]["producer"]
        assert live["tokens"] == p["tokens"][: len(live["tokens"])]
        assert live["step"] == p["step"][: len(live["step"])]


@pytest.mark.parametrize("width,p_min", [(2, 0.0), (5, 0.0), (8, 0.0), (5, 0.2), (8, 0.6)])
def test_cross_vocabulary_sd_ops_equal_the_python_reference(run_job, tiny, tiny_other_vocab, width, p_min):
    """Replay prices the runner's own cross-vocabulary SD: the same forwards of both models
    (drafter widths and depths in drafter tokens), from the trace's drafter-token fields."""
    replay = importlib.import_module("specbench.core.replay.reference")
    method_configs = importlib.import_module("specbench.core.methods.configs")
    windows = cross_windows(run_job, tiny.target, tiny_other_vocab)
    out = run_job({"mode": "trace", "threads": 1, "target": {"path": str(tiny.target)},
                   "drafter": {"path": str(tiny_other_vocab)}, "k_max": 8, "producer": False, "windows": windows})
    traces = by_window(out.results)
    rejected = 0
    for r in decode(run_job, tiny.target, tiny_other_vocab, [{"name": "sd", "width": width, "p_min": p_min}],
                    windows=windows):
        wt = load_window_trace(traces[r["window_id"]])
        assert wt.drafts.cross is not None
        cap = next(w["cap"] for w in windows if w["id"] == r["window_id"])
        ref = replay.decode_serial(method_configs.SdConfig(width=width, p_min=p_min), wt, cap)
        assert list(ref.tokens) == r["tokens"]
        assert reference_ops(r["ops"]) == [(op.model.value, op.width, op.depth, op.accepted) for op in ref.ops], \
            r["window_id"]
        rejected += sum(op.model.value == "target" and op.accepted < op.width - 1 for op in ref.ops)
    assert rejected > 0, "no rejection: the re-ingest after one was not exercised"


def test_a_same_vocabulary_trace_has_no_cross_vocabulary_fields(run_job, tiny):
    out = run_job({"mode": "trace", "threads": 1, "target": {"path": str(tiny.target)},
                   "drafter": {"path": str(tiny.near)}, "k_max": 4, "producer": False, "windows": WINDOWS[:1]})
    assert set(out.results[0]["drafts"]) == {"k_max", "tokens", "conf"}


def test_native_as2d_lanes_decompose_the_decode_clock(run_job, tiny, tmp_path):
    """O and H come from the lanes' busy intervals; T = D + V - O + H then holds to the
    clock's resolution (decode_row checks it). Whether the lanes overlap at all depends on
    the scheduler, so only O's bounds are asserted (the interval arithmetic has unit tests)."""
    from . import tiny_gguf as tg

    method_configs = importlib.import_module("specbench.core.methods.configs")
    decode_run = importlib.import_module("specbench.world.decode_run")
    windows_mod = importlib.import_module("specbench.schemas.windows")
    slow = tg.write_tiny_qwen3(tmp_path / "slow.gguf", tg.slowed(tiny.weights, extra_layers=24))
    window = windows_mod.make_text_window("long", "text", "Repeat.", LONG[0]["cap"], "d", "test")
    for r in decode(run_job, slow, tiny.target, [as2d_method(budget=4), as2d_method(budget=2, batch=2)],
                    windows=LONG):
        m = r["method"]
        row = decode_run.decode_row(r, window, "local", method_configs.As2dConfig(budget=m["budget"], batch=m["batch"]))
        assert abs(row.d_s + row.v_s - row.o_s + row.h_s - row.decode_s) <= decode_run.CLOCK_RESOLUTION_S
        assert row.d_s > 0 and row.v_s > 0 and 0 <= row.o_s <= min(row.d_s, row.v_s) and row.h_s >= 0


def test_specasr_refuses_a_cross_vocabulary_drafter(run_job, tiny, tiny_other_vocab):
    out = run_job({"mode": "decode", "target": {"path": str(tiny.target)}, "drafter": {"path": str(tiny_other_vocab)},
                   "methods": [specasr_method(4, 0.5)], "windows": WINDOWS[:1]})
    assert out.returncode == 1
    assert str(tiny.target) in out.error["error"] and str(tiny_other_vocab) in out.error["error"]


GEMMA_SD = [{"name": "sd", "width": 5, "p_min": 0.0}, {"name": "sd", "width": 8, "p_min": 0.3}]
"""The SD configurations whose ops replay must make on the Gemma pair."""


@pytest.fixture(scope="module")
def gemma_pair(run_job, demo_model_path):
    """SmolLM2 Q4_1 (target) and Gemma 3 (drafter, its own turn format) on one window, decoded once with
    target-only, AS2D and GEMMA_SD: the decode both Gemma tests read, one job for both (real weights)."""
    sm, gm = demo_model_path("smollm2-135m"), demo_model_path("gemma3-270m")
    text = "List three colors of the rainbow."
    window = {"id": "rainbow", "prompt": tokenize(run_job, sm, text),
              "drafter_prompt": tokenize(run_job, gm, text, template="gemma"), "cap": 24}
    models = {"target": {"path": str(sm), "threads": 1}, "drafter": {"path": str(gm), "threads": 1}}
    out = run_job({"mode": "decode", **models, "methods": [{"name": "target"}, as2d_method(budget=5), *GEMMA_SD],
                   "windows": [window]})
    assert out.returncode == 0, out.error
    return {"window": window, "models": models, "results": out.results}


def test_gemma_drafting_for_smollm2_is_lossless(gemma_pair):
    base, as2d_run, sd_run, _ = gemma_pair["results"]
    assert (base["method"]["name"], as2d_run["method"]["name"], sd_run["method"]) == ("target", "as2d", GEMMA_SD[0])
    assert sd_run["tokens"] == base["tokens"] and as2d_run["tokens"] == base["tokens"]
    assert sum(op["accepted"] for op in sd_run["ops"] if op["model"] == "target") > 0  # real text maps
    check_as2d_against_python(as2d_run, 24)
    assert as2d_run["cross_vocab"] is True


def test_gemma_drafting_for_smollm2_sd_ops_equal_replays(run_job, gemma_pair):
    """Real tokenizers: replay prices the runner's cross-vocabulary SD op for op."""
    replay = importlib.import_module("specbench.core.replay.reference")
    method_configs = importlib.import_module("specbench.core.methods.configs")
    out = run_job({"mode": "trace", **gemma_pair["models"], "k_max": 8, "producer": False,
                   "windows": [gemma_pair["window"]]})
    assert out.returncode == 0, out.error
    wt = load_window_trace(out.results[0])
    decoded = [r for r in gemma_pair["results"] if r["method"]["name"] == "sd"]
    assert [r["method"] for r in decoded] == GEMMA_SD
    for r in decoded:
        config = method_configs.SdConfig(width=r["method"]["width"], p_min=r["method"]["p_min"])
        ref = replay.decode_serial(config, wt, 24)
        assert list(ref.tokens) == r["tokens"]
        assert reference_ops(r["ops"]) == [(op.model.value, op.width, op.depth, op.accepted) for op in ref.ops]
