"""`specbench import-trace`: another decoder's logs as specbench traces and a windows file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

IMPORT_FORMATS = ("progdraft",)
"""The decoders whose logs import-trace reads."""


@dataclass(frozen=True)
class ImportRequest:
    """`import-trace`'s arguments and options, as given."""

    fmt: str
    """FORMAT: one of IMPORT_FORMATS."""
    files: tuple[Path, ...]
    """FILES: the decoder's exports."""
    out: Path
    """--out: the traces directory."""
    windows: Path
    """--windows: the windows file to write."""
    n_prompt: int
    """--n-prompt: target KV entries after the prefill."""
    n_vocab: int
    """--n-vocab: the target's vocabulary size."""
    cap: int
    """--cap: max_new_tokens recorded in each window."""
    target_sha256: str | None
    """--target-sha256 (None: an identity 'progdraft:<target name>')."""


def import_trace(request: ImportRequest) -> None:
    """Every file checked, then the traces and the windows written; stderr names them."""
    from specbench.app.progress import stderr
    from specbench.world.progdraft import import_progdraft

    r = request
    paths, count = import_progdraft(list(r.files), r.out, r.windows, r.cap, r.n_prompt, r.target_sha256,
                                    n_vocab=r.n_vocab)
    stderr.print(f"{count} utterance{'' if count == 1 else 's'} imported: {', '.join(map(str, paths))}; "
                 f"windows in {r.windows}")
