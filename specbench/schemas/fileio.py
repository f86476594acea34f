"""Reading and writing the versioned files every stage exchanges.

Every file kind carries `kind` and `schema_version`; each kind is read at one version
(windows also at version 1: a version 2 file without categories; its module's format-history
comment says what each version changed), loaders reject other
kinds and versions in one line naming both versions, and every complaint names the file,
the key and what was expected. Writers go through a temporary file and a rename, so an interrupted write never
leaves half a file behind. One writer at a time: every writer of a results directory, trace,
profile or validation holds `WriterLock` on it for as long as it writes.
"""

from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench.errors import SchemaError, SpecbenchError, WriteError


@dataclass(frozen=True)
class Where:
    """A location inside a file, for error messages: the file and a key prefix."""

    path: Path | str
    prefix: str = ""

    def at(self, key: str | int) -> Where:
        key_text = f"[{key}]" if isinstance(key, int) else str(key)
        joined = f"{self.prefix}{key_text}" if isinstance(key, int) or not self.prefix else f"{self.prefix}.{key_text}"
        return Where(self.path, joined)

    def fail(self, expected: str, got: object = None, key: str | None = None) -> SchemaError:
        return SchemaError(self.path, key if key is not None else (self.prefix or "<root>"), expected, got)

    def out_of_range(self, value: object, expected: str) -> SpecbenchError:
        """A value outside its range, in one line naming file, line, key, value and range:
        `traces/x.jsonl:17: y[3] = 1000000000, expected a token id in [0, 49152) (target vocabulary)`."""
        line, key = "", self.prefix
        if key.startswith("line "):
            line, _, key = key.removeprefix("line ").partition(".")
        return SpecbenchError(f"{self.path}{':' + line if line else ''}: {key or '<root>'} = {value}, "
                              f"expected {expected}")


_TYPE_NAMES = {int: "an integer", float: "a number", str: "a string", bool: "true/false", list: "a list",
               dict: "a mapping", type(None): "null"}


def need(mapping: Any, key: str, kind: type | tuple[type, ...], where: Where, default: Any = ...) -> Any:
    """`mapping[key]` checked against `kind`; a missing key without default is an error."""
    if not isinstance(mapping, dict):
        raise where.fail("a mapping", type(mapping).__name__)
    if key not in mapping:
        if default is not ...:
            return default
        raise where.at(key).fail(f"{_kind_name(kind)} (missing)")
    value = mapping[key]
    if not _is_kind(value, kind):
        raise where.at(key).fail(_kind_name(kind), value)
    return value


def reject_unknown(mapping: dict, known: set[str] | frozenset[str], where: Where) -> None:
    unknown = sorted(set(mapping) - set(known))
    if unknown:
        raise where.at(unknown[0]).fail(f"one of the known keys {sorted(known)} (unknown key)")


def check_header(doc: Any, kind: str, versions: tuple[int, ...], where: Where) -> int:
    """Validate the `kind`/`schema_version` pair that starts every specbench file; returns the version."""
    if not isinstance(doc, dict):
        raise where.fail(f"a {kind} header mapping", type(doc).__name__)
    got_kind = doc.get("kind")
    if got_kind != kind:
        raise where.at("kind").fail(f"'{kind}'", got_kind)
    version = doc.get("schema_version")
    if version not in versions:
        reads = " or ".join(str(v) for v in versions)
        raise VersionError(where, version, reads)
    return version


class VersionError(SchemaError):
    """A file of a format version this specbench does not read: one line naming both versions."""

    def __init__(self, where: Where, got: object, reads: str):
        place = f"{where.path}: {where.prefix}: " if where.prefix else f"{where.path}: "
        SpecbenchError.__init__(self, f"{place}schema_version {got!r}, this specbench reads {reads}",
                                hint="write the file again with this specbench")
        self.path, self.key, self.expected = where.path, where.at("schema_version").prefix, reads


def _is_kind(value: Any, kind: type | tuple[type, ...]) -> bool:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool) and bool not in kinds:
        return False  # true/false is not a number here
    if float in kinds and isinstance(value, int) and not isinstance(value, bool):
        return True
    if isinstance(value, float) and float in kinds and not math.isfinite(value):
        return False
    return isinstance(value, kinds)


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(_TYPE_NAMES.get(k, k.__name__) for k in kinds)


def read_text(path: Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecbenchError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise SpecbenchError(f"{path}: expected a file, found a directory") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecbenchError(f"{path}: cannot read ({exc})") from None


def load_yaml(path: Path) -> Any:
    import yaml  # here, not at the top: `specbench --help` loads schemas but reads no YAML

    try:
        return yaml.safe_load(read_text(path))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        raise SpecbenchError(f"{path}:{line} is not valid YAML ({getattr(exc, 'problem', exc)})") from None


def load_json(path: Path) -> Any:
    try:
        return json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise SpecbenchError(f"{path}: line {exc.lineno} is not valid JSON ({exc.msg})") from None


def iter_jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, parsed object) for each non-empty line; a bad line names its number.

    A final line without a newline that does not parse is a write cut short by an
    interruption; it is reported as such rather than as corrupt data.
    """
    text = read_text(path)
    lines = text.split("\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as exc:
            cut_short = number == len(lines) and not text.endswith("\n")
            why = "was cut short by an interrupted write" if cut_short else f"is not valid JSON ({exc.msg})"
            raise SpecbenchError(f"{path}: line {number} {why}") from None


def iter_json_objects(path: Path, what: str = "") -> Iterator[tuple[int, dict]]:
    """`iter_jsonl` where every line must be a JSON object (`what` names it in the error)."""
    for number, doc in iter_jsonl(path):
        if not isinstance(doc, dict):
            raise SpecbenchError(f"{path}: line {number}: expected a JSON object" + (f" ({what})" if what else ""))
        yield number, doc


def dumps_line(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), allow_nan=False) + "\n"


def drop_cut_line(path: Path) -> None:
    """Drop a last line that an interrupted write left without its newline (only the file's
    tail is read: appending to a long file stays cheap)."""
    with open(path, "rb+") as handle:
        end = handle.seek(0, os.SEEK_END)
        if end == 0:
            return
        handle.seek(end - 1)
        if handle.read(1) == b"\n":
            return
        keep, block = 0, 1 << 16
        while end > 0:  # back to the last newline: what follows it is the cut line
            start = max(end - block, 0)
            handle.seek(start)
            found = handle.read(end - start).rfind(b"\n")
            if found >= 0:
                keep = start + found + 1
                break
            end = start
        handle.truncate(keep)


def append_jsonl(path: Path, docs: Iterable[Any]) -> None:
    """Append one JSON line per document and flush it to disk, so that an interrupted run keeps
    every line it wrote; a line an earlier interruption cut short is dropped first."""
    text = "".join(dumps_line(doc) for doc in docs)
    if not text:
        return
    path = Path(path)
    try:
        if path.exists():
            drop_cut_line(path)
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as exc:  # the lines written before are kept; a line cut short here is dropped on the next append
        raise WriteError(f"{path}: cannot write ({exc.strerror or exc})") from None


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file and a rename: all or nothing."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as exc:
        raise WriteError(f"{path}: cannot write ({exc.strerror or exc})") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the file the usual mode
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):  # a full or read-only disk: the file keeps its old content
            raise WriteError(f"{path}: cannot write ({exc.strerror or exc})") from None
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def dump_yaml(obj: Any) -> str:
    import yaml

    return yaml.safe_dump(obj, sort_keys=False, default_flow_style=None, width=100)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def safe_name(name: str) -> str:
    """`name` usable as a file name: '127.0.0.1:5555' -> '127.0.0.1-5555'."""
    return "".join(ch if ch.isalnum() or ch in "._-" else "-" for ch in name)


LOCK_SUFFIX = ".specbench-lock"
"""A lock file's name ends so: `<dir>/.specbench-lock` for a directory, `.<name>.specbench-lock` beside a file."""


def lock_path(target: Path) -> Path:
    """The lock file of `target`: inside a directory, beside a file (a file is replaced by rename,
    which a lock on the file itself would not survive)."""
    target = Path(target)
    return target / LOCK_SUFFIX if target.is_dir() else target.with_name(f".{target.name}{LOCK_SUFFIX}")


class WriterLock:
    """An advisory lock (fcntl.flock) on a file or directory that this process writes: a second
    process asking for it is refused with the holder's pid. Held until `release` or the process
    ends (the system drops it then, even after SIGKILL); asked again by the process that holds it,
    it is shared (counted), so one process's writers of one directory never refuse each other."""

    _held: dict[str, tuple[int, int]] = {}
    """Lock file -> (descriptor, holders in this process)."""

    def __init__(self, target: Path, what: str):
        import fcntl  # here: POSIX only, and only writers need it

        self.target, self.path = Path(target), str(lock_path(target))
        fd, count = self._held.get(self.path, (-1, 0))
        if count == 0:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666 & ~_umask())
            except OSError as exc:
                raise WriteError(f"{target}: cannot write this {what} ({exc.strerror or exc})") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                if exc.errno not in (errno.EWOULDBLOCK, errno.EACCES):
                    raise
                raise SpecbenchError(f"{target}: another specbench process (pid {_holder(self.path)}) is writing "
                                     f"this {what}", hint="wait for it to finish, or write to another path") from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._held[self.path] = (fd, count + 1)
        self._released = False

    def release(self) -> None:
        """Give the lock back (the last holder in this process closes it); twice is once."""
        if self._released:
            return
        self._released = True
        fd, count = self._held.pop(self.path, (-1, 0))
        if count > 1:
            self._held[self.path] = (fd, count - 1)
        elif count == 1:
            os.close(fd)

    @classmethod
    def drop(cls, target: Path) -> None:
        """Give back this process's lock on `target` whoever holds it here (a run that ended in an error)."""
        fd, count = cls._held.pop(str(lock_path(target)), (-1, 0))
        if count:
            os.close(fd)

    def __enter__(self) -> WriterLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _holder(path: str) -> str:
    """The pid the holder wrote into the lock file ('unknown' if it has not written it yet)."""
    for _ in range(20):  # the holder writes its pid just after it takes the lock
        try:
            text = Path(path).read_text(encoding="utf-8").strip()
        except OSError:
            text = ""
        if text.isdigit():
            return text
        time.sleep(0.01)
    return "unknown"


def check_writable(directory: Path, what: str) -> None:
    """Refuse, in one line, a directory this process cannot create files in or that has no room
    for a small one (checked before work whose result would be lost)."""
    directory = Path(directory)
    probe = None
    try:
        fd, probe = tempfile.mkstemp(prefix=".specbench-probe-", dir=directory)
        with os.fdopen(fd, "wb") as handle:
            handle.write(b"\0" * 4096)
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as exc:
        raise SpecbenchError(f"{directory}: cannot write the {what} there ({exc.strerror or exc})") from None
    finally:
        if probe is not None:
            Path(probe).unlink(missing_ok=True)
