"""Model files as the runner-facing commands name them: NAME=PATH pairs with a sha256.

The sha256 identifies a model in traces, profiles and results; it is cached next to
nothing, only in memory for the process, keyed by path, size and mtime. A model may carry
the chat template named for it (`--template NAME=TEMPLATE`; see `tracing.chat_template`).
`--drafter pld` names the prompt-lookup drafter instead, which has no file
(docs/METHODS.md §2.7 Prompt-lookup drafting): it stands where a drafter model would, with a fixed identity.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from specbench.core.methods import lookup
from specbench.errors import SpecbenchError
from specbench.schemas.fileio import file_sha256
from specbench.schemas.placement import Lane, lane_job

if TYPE_CHECKING:
    from specbench.world.devices.base import Device

_SHA_CACHE: dict[tuple[str, int, int], str] = {}
GGUF = "gguf"
WHISPER = "whisper"
_MAGICS = {b"GGUF": GGUF, b"lmgg": WHISPER}
"""A model file's first four bytes: GGUF's magic, or whisper.cpp's `ggml` (0x67676d6c little-endian)."""


def model_format(path: Path) -> str:
    """`gguf` or `whisper`: which engine runs the model file, told by its magic as the runner tells it."""
    try:
        with open(path, "rb") as handle:
            magic = handle.read(4)
    except FileNotFoundError:
        raise SpecbenchError(f"model file not found: {path}",
                             hint="pass the path of a .gguf or whisper.cpp .bin file") from None
    except OSError as exc:
        raise SpecbenchError(f"{path}: cannot read the model file ({exc.strerror})") from None
    if magic not in _MAGICS:
        raise SpecbenchError(f"{path}: neither a GGUF file nor a whisper.cpp ggml model (magic {magic!r})",
                             hint="pass a .gguf model, or a Whisper model in whisper.cpp's format")
    return _MAGICS[magic]


def whisper_n_vocab(path: Path) -> int:
    """The tokens a whisper.cpp model's greedy decoding chooses among, as the runner's `loaded` event reports
    them: the text tokens and <|endoftext|>, 50,256 + 1, plus one for a multilingual vocabulary (51,865 ids
    or more in the header), whose <|endoftext|> is one id later (whisper.cpp's loader)."""
    with open(path, "rb") as handle:
        header = handle.read(8)
    if len(header) < 8:
        raise SpecbenchError(f"{path}: the whisper.cpp header is cut short")
    n_vocab = struct.unpack("<i", header[4:8])[0]
    if n_vocab < 51864:
        raise SpecbenchError(f"{path}: a whisper.cpp header with {n_vocab} vocabulary entries, expected Whisper's "
                             "51,864 (English) or 51,865 and more (multilingual)")
    return 50257 + (n_vocab >= 51865)


@dataclass(frozen=True)
class ModelFile:
    name: str
    """Short name: the drafter name in traces and profiles, or the target's file stem."""
    path: Path
    """The .gguf file on this host."""
    mmproj: Path | None = None
    """The audio projector (.gguf, libmtmd) for audio windows, e.g. Qwen3-ASR's qwen3a mmproj."""
    template: str | None = None
    """Chat template named for this model (a llama.cpp built-in, or "model" for its GGUF's own);
    None: the windows' template decides."""
    lookup: bool = False
    """The prompt-lookup drafter (no file: `path` is unused; it reads the target's prompt)."""

    @property
    def engine(self) -> str:
        """`gguf` (llama.cpp) or `whisper` (whisper.cpp), told by the file's magic; the lookup drafter: gguf."""
        return GGUF if self.lookup else model_format(Path(self.path))

    @property
    def hears_audio(self) -> bool:
        """A whisper.cpp model hears a window's audio through its own encoder (no mmproj, no chat template); a
        missing file hears nothing (whoever opens it says it is missing)."""
        return not self.lookup and Path(self.path).is_file() and self.engine == WHISPER

    @property
    def sha256(self) -> str:
        if self.lookup:
            return lookup.IDENTITY
        path = Path(self.path)
        if not path.is_file():
            raise SpecbenchError(f"model file not found: {path}", hint="pass the path of a .gguf file")
        st = path.stat()
        key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
        if key not in _SHA_CACHE:
            _SHA_CACHE[key] = file_sha256(path)
        return _SHA_CACHE[key]

    def ref(self) -> dict:
        """{name, sha256}: how traces and profiles name the model."""
        return {"name": self.name, "sha256": self.sha256}


def model_stem(path: Path) -> str:
    """A model's default name: its file name without `.gguf` (llama.cpp) or `.bin` (whisper.cpp's ggml files)."""
    return path.name.removesuffix(".gguf").removesuffix(".bin")


def target_file(path: Path) -> ModelFile:
    path = Path(path)
    if not path.is_file():
        raise SpecbenchError(f"model file not found: {path}", hint="pass the path of a .gguf file")
    return ModelFile(model_stem(path), path)


LOOKUP_DRAFTER = ModelFile(lookup.NAME, Path(), lookup=True)
"""`--drafter pld`: the prompt-lookup drafter."""


def parse_named(spec: str) -> ModelFile:
    """'NAME=PATH' (or a bare PATH, named after its file) -> ModelFile; the file must exist.
    `pld` alone is the prompt-lookup drafter, and no model file may take that name."""
    if spec.strip() == lookup.NAME:
        return LOOKUP_DRAFTER
    name, sep, path_text = spec.partition("=")
    if not sep:
        name, path_text = model_stem(Path(spec)), spec
    name = name.strip()
    if not name or not path_text:
        raise SpecbenchError(f"--drafter '{spec}': expected NAME=PATH, e.g. small=models/drafter.gguf")
    if not all(c.isalnum() or c in "-_." for c in name):
        raise SpecbenchError(f"--drafter '{spec}': the name may use letters, digits, '-', '_' and '.' only")
    if name == lookup.NAME:
        raise SpecbenchError(f"--drafter '{spec}': '{lookup.NAME}' names the prompt-lookup drafter, which has no "
                             "model file", hint=f"pass --drafter {lookup.NAME} alone, or name the model otherwise")
    path = Path(path_text).expanduser()
    if not path.is_file():
        raise SpecbenchError(f"model file not found: {path}", hint="pass the path of a .gguf file")
    return ModelFile(name, path)


def with_mmproj(model: ModelFile, path: Path | None, flag: str) -> ModelFile:
    """`model` with its audio projector (`flag` names the option in errors); None leaves it as is."""
    if path is None:
        return model
    path = Path(path).expanduser()
    if not path.is_file():
        raise SpecbenchError(f"{flag} {path}: file not found", hint="pass the mmproj .gguf made for " + str(model.path))
    return replace(model, mmproj=path)


def drafter_mmproj(drafters: list[ModelFile], specs: tuple[str, ...]) -> list[ModelFile]:
    """--drafter-mmproj values: NAME=PATH per drafter, or one bare PATH for a single drafter."""
    by_name: dict[str, Path] = {}
    for spec in specs:
        name, sep, path_text = spec.partition("=")
        if not sep:
            if len(drafters) != 1:
                raise SpecbenchError(f"--drafter-mmproj {spec}: with several drafters, name one: NAME=PATH")
            name, path_text = drafters[0].name, spec
        if name not in {d.name for d in drafters}:
            raise SpecbenchError(f"--drafter-mmproj {spec}: no drafter named '{name}'",
                                 hint="drafters: " + ", ".join(d.name for d in drafters))
        by_name[name] = Path(path_text)
    return [with_mmproj(d, by_name.get(d.name), "--drafter-mmproj") for d in drafters]


def with_templates(target: ModelFile, drafters: list[ModelFile],
                   specs: tuple[str, ...]) -> tuple[ModelFile, list[ModelFile]]:
    """--template NAME=TEMPLATE values: NAME is a drafter's name, or the target's (its file
    stem, or `target`); a name that several models answer to names each of them."""
    models = [target, *drafters]
    names: dict[str, list[int]] = {"target": [0], target.name: [0]}
    for i, drafter in enumerate(drafters, 1):
        names.setdefault(drafter.name, []).append(i)
    for spec in specs:
        name, sep, template = (part.strip() for part in spec.partition("="))
        if not sep or not name or not template:
            raise SpecbenchError(f"--template '{spec}': expected NAME=TEMPLATE, e.g. gemma3=gemma",
                                 hint="NAME: a --drafter name, or target; TEMPLATE: a llama.cpp built-in template "
                                      "(chatml, gemma, llama3, ...) or 'model' for the one in the model's GGUF")
        if name not in names:
            raise SpecbenchError(f"--template '{spec}': no model named '{name}'",
                                 hint="models: " + ", ".join(names))
        for i in names[name]:
            models[i] = replace(models[i], template=template)
    return models[0], models[1:]


def unique_names(models: list[ModelFile]) -> list[ModelFile]:
    names = [m.name for m in models]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise SpecbenchError(f"drafter name '{dup[0]}' given twice; name each --drafter differently")
    return models


def model_job(device: Device, model: ModelFile, lane: Lane | None = None) -> dict:
    """The runner's model object: path on the device, its mmproj when it has one, and the
    lane it runs on (processor, CPU set it is pinned to, threads; default: CPU, unpinned). The
    lookup drafter has no lane of its own: it runs on the target's thread."""
    if model.lookup:
        return {"lookup": lookup.NAME}
    spec: dict = {"path": device.model_path(model.path), "device": "cpu"}
    if model.mmproj is not None:
        spec["mmproj"] = device.model_path(model.mmproj)
    return spec | lane_job(lane)
