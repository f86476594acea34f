"""Convert a quantized GGUF model to F16 with the `gguf` package (no llama.cpp build).

What `llama-quantize --allow-requantize IN OUT F16` does, in Python: every quantized tensor
is dequantized and stored as F16; tensors already in F32 or F16 (the 1-D norm weights) are
copied unchanged; metadata, tensor order, names and shapes are kept, and only
`general.file_type` changes. The result holds the same weights (to F16's 11 bits) in a file
2.8 times the size (SmolLM2-135M: 271 vs 98 MB), so the quantized source can draft for it;
how much cheaper its step is depends on the host (docs/MEASUREMENTS.md). Not quite the same
function, as llama.cpp's quantized kernels also round the activations.

The output is a pure function of the input bytes (numpy's f32 -> f16 rounding is IEEE
round-to-nearest-even), so a given source and `RECIPE` always give the same file.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from specbench.errors import SpecbenchError

RECIPE = 1
"""Bump whenever the output bytes of `to_f16` change; cached derivations of another recipe are rebuilt."""


def to_f16(src: Path, dst: Path) -> None:
    """Write `src` converted to F16 as `dst`, atomically (a temp file in dst's folder, then a rename)."""
    gguf = _gguf()
    reader = gguf.GGUFReader(src, "r")
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")  # same folder: the rename stays atomic
    try:
        writer = gguf.GGUFWriter(tmp, _arch(reader, src))
        writer.data_alignment = reader.alignment  # honour a source's general.alignment, copied below
        try:
            _copy_metadata(gguf, reader, writer)
            _write_tensors(gguf, reader, writer)
        finally:
            writer.close()
        os.replace(tmp, dst)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _gguf():
    try:
        import gguf
    except ImportError:
        raise SpecbenchError("deriving an F16 model needs the gguf package",
                             hint="pip install gguf==0.19.0 (or pip install -e '.[test]')") from None
    return gguf


def _arch(reader, src: Path) -> str:
    field = reader.get_field("general.architecture")
    if field is None:
        raise SpecbenchError(f"{src}: no general.architecture in the GGUF metadata")
    return field.contents()


def _copy_metadata(gguf, reader, writer) -> None:
    """Every key in the source's order, but general.file_type says F16. The GGUF.* header fields and
    general.architecture are the writer's own (it writes them itself)."""
    f16 = int(gguf.LlamaFileType.MOSTLY_F16)
    seen_file_type = False
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == gguf.Keys.General.ARCHITECTURE:
            continue
        vtype = field.types[0]
        sub_type = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        value = field.contents()
        if field.name == gguf.Keys.General.FILE_TYPE:
            value, vtype, seen_file_type = f16, gguf.GGUFValueType.UINT32, True
        writer.add_key_value(field.name, value, vtype, sub_type=sub_type)
    if not seen_file_type:
        writer.add_file_type(f16)


def _write_tensors(gguf, reader, writer) -> None:
    """Tensor infos first, then the data one tensor at a time, so only one dequantized tensor is in memory."""
    keep = (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16)
    for t in reader.tensors:
        if t.tensor_type in keep:
            writer.add_tensor_info(t.name, t.data.shape, t.data.dtype, t.data.nbytes)
        else:
            shape = tuple(int(n) for n in reversed(t.shape))  # numpy order: ggml's ne reversed
            writer.add_tensor_info(t.name, shape, np.dtype(np.float16), int(np.prod(shape)) * 2)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for t in reader.tensors:
        if t.tensor_type in keep:
            writer.write_tensor_data(t.data, tensor_endianess=reader.endianess)
            continue
        try:
            values = gguf.quants.dequantize(t.data, t.tensor_type)
        except NotImplementedError as err:
            raise SpecbenchError(f"cannot convert tensor {t.name} ({t.tensor_type.name}) to F16: {err}") from None
        half = values.astype(np.float16)
        if not np.isfinite(half).all():  # |x| > 65504: F16 cannot hold this tensor, refuse rather than write inf
            raise SpecbenchError(f"tensor {t.name} has values outside the F16 range; cannot convert it to F16")
        writer.write_tensor_data(half)
