"""The derived F16 demo target (specbench.world.gguf_f16, demo_models.DERIVED_MODELS): the conversion on a tiny
Q4_1 model, the cache's record and rebuild rules, and the real SmolLM2 F16 against its Q4_1 source."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from specbench.errors import SpecbenchError
from specbench.schemas.fileio import file_sha256
from specbench.world import demo_models

gguf = pytest.importorskip("gguf", reason="the F16 derivation needs gguf==0.19.0 (pip install gguf==0.19.0)")

from . import tiny_gguf as tg  # noqa: E402

SMOLLM2_F16_SHA256 = "fea43f3ffef83a020894679eb91b2ab0127287d657a7313b47ba9c411dd4d47f"
"""What recipe 1 gives from the pinned Q4_1 file (gguf 0.19.0): the derivation is reproducible across machines."""


def tiny_q4_1(path):
    return tg.write_tiny_qwen3(path, tg.random_weights(seed=1, n_vocab=tg.n_vocab()), quant="Q4_1")


def fields(reader) -> dict:
    return {f.name: (f.types, f.contents()) for f in reader.fields.values()}


def test_to_f16_dequantizes_2d_tensors_keeps_norms_and_metadata(tmp_path):
    from specbench.world.gguf_f16 import to_f16

    src, dst = tiny_q4_1(tmp_path / "q4_1.gguf"), tmp_path / "f16.gguf"
    to_f16(src, dst)
    a, b = gguf.GGUFReader(src), gguf.GGUFReader(dst)
    fa, fb = fields(a), fields(b)
    assert list(fa) == list(fb)  # same keys, same order
    assert fb["general.file_type"][1] == gguf.LlamaFileType.MOSTLY_F16
    assert {k for k in fa if fa[k] != fb[k]} == {"general.file_type"}
    assert [(t.name, list(t.shape)) for t in a.tensors] == [(t.name, list(t.shape)) for t in b.tensors]
    for ta, tb in zip(a.tensors, b.tensors):
        if ta.tensor_type == gguf.GGMLQuantizationType.F32:  # the 1-D norms: unchanged, as llama-quantize leaves them
            assert tb.tensor_type == ta.tensor_type and bytes(tb.data) == bytes(ta.data), ta.name
        else:
            assert ta.tensor_type == gguf.GGMLQuantizationType.Q4_1
            assert tb.tensor_type == gguf.GGMLQuantizationType.F16, ta.name
            want = gguf.quants.dequantize(ta.data, ta.tensor_type).astype(np.float16)
            assert np.array_equal(np.asarray(tb.data), want), ta.name


def test_to_f16_is_deterministic_and_leaves_no_temp_file(tmp_path):
    from specbench.world.gguf_f16 import to_f16

    src = tiny_q4_1(tmp_path / "q4_1.gguf")
    (tmp_path / "a").mkdir()
    to_f16(src, tmp_path / "a" / "m.gguf")
    to_f16(src, tmp_path / "b" / "m.gguf")
    assert file_sha256(tmp_path / "a" / "m.gguf") == file_sha256(tmp_path / "b" / "m.gguf")
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["m.gguf"]


def test_the_runner_computes_the_same_function_from_f16_as_from_the_exact_f32_weights(tmp_path, run_job):
    """F16 holds the dequantized weights to 11 bits: the runner's greedy tokens match an F32 file of the same
    dequantized weights (the Q4_1 file itself differs: llama.cpp's Q4_1 kernels round the activations to 8 bits)."""
    from specbench.world.gguf_f16 import to_f16

    src, f16 = tiny_q4_1(tmp_path / "q4_1.gguf"), tmp_path / "f16.gguf"
    to_f16(src, f16)
    reader = gguf.GGUFReader(src)
    exact = {t.name: gguf.quants.dequantize(t.data, t.tensor_type) for t in reader.tensors}
    f32 = tg.write_tiny_qwen3(tmp_path / "f32.gguf", exact)
    windows = [{"id": "a", "prompt": [76, 77, 78], "cap": 24}, {"id": "b", "prompt": [100], "cap": 24}]
    got = {}
    for m in (f16, f32):
        out = run_job({"mode": "decode", "threads": 1, "target": {"path": str(m)}, "methods": [{"name": "target"}],
                       "windows": windows})
        assert out.returncode == 0, out.error
        got[m] = ([e["desc"].split()[-1] for e in out.events if e["event"] == "loaded"], [r["tokens"] for r in out.results])
    assert got[f16][0] == ["F16"] and got[f32][0] == ["F32"]
    assert got[f16][1] == got[f32][1]


@pytest.fixture
def tiny_cache(tmp_path, monkeypatch):
    """A cache holding a tiny Q4_1 "demo model" and a derived F16 entry made from it."""
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path))
    (tmp_path / "models").mkdir()
    src = tiny_q4_1(tmp_path / "models" / "tiny.Q4_1.gguf")
    monkeypatch.setitem(demo_models.DEMO_MODELS, "tiny",
                        demo_models.DemoModel("tiny", src.name, file_sha256(src), 1, (), "test"))
    derived = demo_models.DerivedModel("tiny-f16", "tiny.F16.gguf", "tiny", 1, "test")
    monkeypatch.setitem(demo_models.DERIVED_MODELS, "tiny-f16", derived)
    return tmp_path / "models" / derived.filename


def test_a_derived_model_is_made_once_with_its_record(tiny_cache, capsys):
    from specbench.world.gguf_f16 import RECIPE

    with pytest.raises(SpecbenchError, match="not in the cache") as err:
        demo_models.demo_model("tiny-f16", download=False)
    assert "make demo-model" in err.value.hint
    assert demo_models.demo_model("tiny-f16") == tiny_cache
    assert "deriving demo model tiny-f16" in capsys.readouterr().err
    rec = json.loads(tiny_cache.with_name(tiny_cache.name + ".derived.json").read_text())
    assert rec == {"source": "tiny", "source_sha256": demo_models.DEMO_MODELS["tiny"].sha256, "recipe": RECIPE,
                   "sha256": file_sha256(tiny_cache)}
    assert gguf.GGUFReader(tiny_cache).get_field("general.file_type").contents() == gguf.LlamaFileType.MOSTLY_F16
    assert demo_models.demo_model("tiny-f16", download=False) == tiny_cache
    assert capsys.readouterr().err == ""  # the second use only checks


def test_a_changed_derived_file_is_derived_again_to_the_same_bytes(tiny_cache, capsys):
    """A file that no longer matches its record is rebuilt (it is a cache: the source is still verified)."""
    demo_models.demo_model("tiny-f16")
    good = file_sha256(tiny_cache)
    with open(tiny_cache, "r+b") as f:  # same size, other bytes, other mtime
        f.seek(-1, os.SEEK_END)
        f.write(b"\x7f")
    os.utime(tiny_cache, ns=(1, 1))
    with pytest.raises(SpecbenchError, match="stale .its sha256 no longer matches the record"):
        demo_models.demo_model("tiny-f16", download=False)
    capsys.readouterr()
    demo_models.demo_model("tiny-f16")
    assert "stale" in capsys.readouterr().err
    assert file_sha256(tiny_cache) == good


def test_a_record_of_another_recipe_is_stale(tiny_cache):
    demo_models.demo_model("tiny-f16")
    record = tiny_cache.with_name(tiny_cache.name + ".derived.json")
    record.write_text(json.dumps(json.loads(record.read_text()) | {"recipe": 0}))
    with pytest.raises(SpecbenchError, match="derived from another source or recipe"):
        demo_models.demo_model("tiny-f16", download=False)


def tokenize(run_job, model, text):
    out = run_job({"mode": "tokenize", "model": {"path": str(model)}, "texts": [text], "chat": True})
    assert out.returncode == 0, out.error
    return out.results[0]["tokens"]


def test_smollm2_f16_is_the_q4_1_model_in_f16(demo_model_path, run_job):
    q4, f16 = demo_model_path("smollm2-135m"), demo_model_path("smollm2-135m-f16")
    rec = json.loads(f16.with_name(f16.name + ".derived.json").read_text())
    assert rec["sha256"] == SMOLLM2_F16_SHA256  # demo_model() checked the file against the record
    a, b = gguf.GGUFReader(q4), gguf.GGUFReader(f16)
    assert b.get_field("general.file_type").contents() == gguf.LlamaFileType.MOSTLY_F16
    assert [(t.name, list(t.shape)) for t in a.tensors] == [(t.name, list(t.shape)) for t in b.tensors]
    assert {t.tensor_type.name for t in b.tensors if len(t.shape) == 2} == {"F16"}
    assert {t.tensor_type.name for t in b.tensors if len(t.shape) == 1} == {"F32"}

    # A trace with F16 as target and Q4_1 as drafter: y is F16's greedy answer, drafts[t][0] Q4_1's next token
    # after the same prefix, so their agreement is SD's acceptance and the shared prefix of the greedy answers.
    prompt = tokenize(run_job, f16, "Summarize: The quick brown fox jumps over the lazy dog because it wants to "
                                    "reach the river before sunset.")
    assert tokenize(run_job, q4, "Summarize: The quick brown fox jumps over the lazy dog because it wants to "
                                 "reach the river before sunset.") == prompt
    out = run_job({"mode": "trace", "threads": 1, "target": {"path": str(f16)}, "drafter": {"path": str(q4)},
                   "k_max": 1, "producer": False, "windows": [{"id": "fox", "prompt": prompt, "cap": 32}]})
    assert out.returncode == 0, out.error
    assert [e["desc"] for e in out.events if e["event"] == "loaded"] == ["llama 256M F16", "llama 256M Q4_1"]
    tr = out.results[0]
    agree = [y == row[0] for y, row in zip(tr["y"], tr["drafts"]["tokens"])]
    # Not bit-identical functions: llama.cpp's Q4_1 kernels round the activations to 8 bits, F16's to 11.
    # Measured (2026-12-01): the first 28 tokens agree, then 31/32; 153/160 (95.6%) over three ChatML prompts.
    assert all(agree[:24]) and sum(agree) >= 29, agree
