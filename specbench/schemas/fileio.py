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

import dataclasses
import errno
import hashlib
import json
import math
import os
import sys
import tempfile
import time
import types
import typing
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

from specbench.errors import SchemaError, SpecbenchError, WriteError

if sys.version_info >= (3, 11):
    from enum import StrEnum as StrEnum
else:
    class StrEnum(str, Enum):
        """Python 3.11's enum.StrEnum: a closed set of strings whose members print and format as their values."""

        def __str__(self) -> str:
            return str(self.value)

        def __format__(self, spec: str) -> str:
            return format(str(self.value), spec)


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


# --- records: a file kind's dataclass reads and writes itself ------------------------------------
#
# `from_dict(cls, doc, where)` reads a mapping into the frozen dataclass `cls` and `to_dict(record)`
# writes it back. The dataclass is the one description of its keys: each field's annotation is its
# type (str, int, float, bool, an Enum, a nested dataclass, `X | None`, tuples, lists and mappings of
# those), a field with a default is an optional key, and `field(metadata=rule(...))` adds what the
# type does not say (a range, a closed set, a key spelled otherwise in the file, words for the
# complaint). Rules between fields are the loader's (or `__post_init__`'s). Each class's plan is made
# once, on its first use.

RULE = "specbench.rule"
"""The field metadata key under which `rule` files a field's `Rule`."""


@dataclass(frozen=True)
class Rule:
    """How one field is read and written beyond what its type says."""

    key: str | None = None
    """The key in the file (None: the field's name)."""
    low: float | None = None
    """The least value (of a number, or of each number in a list or mapping); None: no bound."""
    high: float | None = None
    """The largest value; None: no bound."""
    above: bool = False
    """`low` itself is out of range (value > low)."""
    below: bool = False
    """`high` itself is out of range (value < high)."""
    choices: tuple = ()
    """The values a string may take (empty: any)."""
    check: Any = None
    """Any other test of the whole value (after reading; not called on null): a callable -> bool."""
    expected: str | None = None
    """The words of a complaint about the value (default: from the type, range and choices). A list's
    or mapping's bad entry is then named at the field, with the whole value."""
    ranged: bool = False
    """A value out of range is said as `key = value, expected ...` (Where.out_of_range), not
    `key 'key': expected ..., got value`."""
    omit: bool = False
    """`to_dict` leaves the key out while the field holds its default."""
    rest: bool = False
    """A mapping field that holds every key of the document no other field names (read and written flat)."""


def rule(**kwargs: Any) -> dict[str, Rule]:
    """Field metadata: `field(default=None, metadata=rule(low=1, omit=True))`."""
    return {RULE: Rule(**kwargs)}


class Invalid(SpecbenchError):
    """A record's rule between its fields, broken (raised by `__post_init__`): `from_dict` says it in
    one line naming the file and `key` (a field's key, or "" for the record)."""

    def __init__(self, key: str, expected: str, got: object = None):
        super().__init__(f"{key or 'record'}: expected {expected}" + ("" if got is None else f", got {got!r}"))
        self.key, self.expected, self.got = key, expected, got


_EVERY_KEY: set[type] = set()
_Record = TypeVar("_Record")


def every_key(cls: type[_Record]) -> type[_Record]:
    """Class decorator: a file of this kind writes every key, so every key is required on reading
    (defaults serve the code that builds the record)."""
    _EVERY_KEY.add(cls)
    return cls


@dataclass(frozen=True)
class FieldPlan:
    """How `from_dict` reads one field and `to_dict` writes it (made once per class)."""

    name: str
    key: str
    kind: Any
    """The base type: str, int, float, bool, an Enum or dataclass, list, dict or object."""
    nullable: bool
    required: bool
    default: Any
    rule: Rule
    read: Any
    """(value, where, key) -> the field's value, or an error naming `where.at(key)`."""
    write: Any
    """value -> what the file holds (None: the value as it is)."""
    missing: str
    """What a missing key is said to lack, e.g. 'an integer (missing)'."""


_PLANS: dict[type, tuple[FieldPlan, ...]] = {}


def field_plans(cls: type) -> tuple[FieldPlan, ...]:
    """The plan of every field of the dataclass `cls`, in field order (cached)."""
    plans = _PLANS.get(cls)
    if plans is None:
        plans = _PLANS[cls] = _make_plans(cls)
    return plans


def from_dict(cls: type[_Record], doc: Any, where: Where) -> _Record:
    """The mapping `doc` as a `cls`, every key checked against the fields: an unknown key, a missing
    required one, a value of another type or out of its range is one line naming `where` and the key."""
    plans = field_plans(cls)
    if not isinstance(doc, dict):
        raise where.fail("a mapping", doc)
    known, required = _KEYS[cls], _REQUIRED[cls]
    if not _RESTS[cls] and not doc.keys() <= known:
        reject_unknown(doc, known, where)
    if not doc.keys() >= required.keys():  # like an unknown key, the first missing one in key order is named
        key = min(set(required) - doc.keys())
        raise where.at(key).fail(required[key])
    rest = None
    values = {}
    for plan in plans:
        if plan.rule.rest:
            rest = plan
        elif plan.key in doc:
            values[plan.name] = plan.read(doc[plan.key], where, plan.key)
    if rest is not None:
        values[rest.name] = {k: v for k, v in doc.items() if k not in known}
    try:
        return cls(**values)
    except Invalid as exc:
        raise (where.at(exc.key) if exc.key else where).fail(exc.expected, exc.got) from None


def to_dict(record: Any) -> dict:
    """The dataclass `record` as its file holds it: tuples as lists, enums as their values, nested
    records as mappings; a field ruled `omit` is left out while it holds its default."""
    doc: dict = {}
    for plan in field_plans(type(record)):
        value = getattr(record, plan.name)
        if plan.rule.omit and value == plan.default:
            continue
        if plan.write is not None and value is not None:
            value = plan.write(value)
        if plan.rule.rest:
            doc.update(value)
        else:
            doc[plan.key] = value
    return doc


_KEYS: dict[type, frozenset[str]] = {}
_REQUIRED: dict[type, dict[str, str]] = {}
"""Required key -> what its absence is said to lack."""
_RESTS: dict[type, bool] = {}


def record_keys(cls: type) -> frozenset[str]:
    """The keys a file of `cls` may hold."""
    field_plans(cls)
    return _KEYS[cls]


def _make_plans(cls: type) -> tuple[FieldPlan, ...]:
    hints = typing.get_type_hints(cls)
    every = cls in _EVERY_KEY
    plans = []
    for f in dataclasses.fields(cls):
        the_rule = f.metadata.get(RULE, Rule())
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        default = (f.default if f.default is not dataclasses.MISSING else
                   f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
        tp, nullable = _unwrap_optional(hints[f.name])
        name = _name_of(tp) + (" or null" if nullable else "")
        plans.append(FieldPlan(f.name, the_rule.key or f.name, _base(tp), nullable, every or not has_default, default,
                               the_rule, _reader(tp, nullable, the_rule, name), _writer(tp), f"{name} (missing)"))
    _KEYS[cls] = frozenset(p.key for p in plans if not p.rule.rest)
    _RESTS[cls] = any(p.rule.rest for p in plans)
    _REQUIRED[cls] = {p.key: p.missing for p in plans if p.required and not p.rule.rest}
    return tuple(plans)


def _unwrap_optional(tp: Any) -> tuple[Any, bool]:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        nullable = len(args) < len(typing.get_args(tp))
        if len(args) != 1:
            raise TypeError(f"records read one type or null, not {tp}")
        return args[0], nullable
    return tp, False


def _base(tp: Any) -> Any:
    origin = typing.get_origin(tp) or tp
    if origin in (list, tuple, Sequence):
        return list
    if origin in (dict, Mapping):
        return dict
    return origin if isinstance(origin, type) else object


def _name_of(tp: Any) -> str:
    base = _base(tp)
    if base in _TYPE_NAMES:
        return _TYPE_NAMES[base]
    if _is_enum(base):
        return "one of " + ", ".join(repr(m.value) for m in base)
    return "a mapping" if _is_record(base) else "a value"


def _is_enum(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, Enum)


def _is_record(tp: Any) -> bool:
    return isinstance(tp, type) and hasattr(tp, "__dataclass_fields__")


def _range_text(kind: Any, r: Rule) -> str:
    what = "an integer" if kind is int else "a number"
    if r.low is not None and r.high is not None:
        return f"{what} in {'(' if r.above else '['}{r.low:g}, {r.high:g}{')' if r.below else ']'}"
    if r.low is not None:
        return f"{what} {'>' if r.above else '>='} {r.low:g}"
    return f"{what} {'<' if r.below else '<='} {r.high:g}"


def _reader(tp: Any, nullable: bool, r: Rule, name: str) -> Any:
    """(value, where, key) -> the value read as `tp` (with `r`'s range, choices and check)."""
    read = _value_reader(tp, r, name)
    if r.check is not None:
        inner, test, text = read, r.check, r.expected or name

        def read(value: Any, where: Where, key: str | int) -> Any:
            read_value = inner(value, where, key)
            if not test(read_value):
                raise _out(where.at(key), value, text, r.ranged)
            return read_value
    if nullable:
        not_null = read

        def read(value: Any, where: Where, key: str | int) -> Any:
            return None if value is None else not_null(value, where, key)
    return read


def _value_reader(tp: Any, r: Rule, name: str) -> Any:
    base, args = _base(tp), typing.get_args(tp)
    if base is list or base is dict:
        return _container_reader(tp, base, args, r, name)
    if _is_record(base):
        def read_record(value: Any, where: Where, key: str | int) -> Any:
            if not isinstance(value, dict):
                raise where.at(key).fail(name, value)
            return from_dict(base, value, where.at(key))
        return read_record
    if _is_enum(base):
        members = {m.value: m for m in base}
        text = r.expected or " or ".join(repr(v) for v in members)

        def read_enum(value: Any, where: Where, key: str | int) -> Any:
            member = members.get(value) if isinstance(value, (str, int)) else None
            if member is None:
                raise where.at(key).fail(text, value)
            return member
        return read_enum
    if base in (str, int, float, bool):
        return _scalar_reader(base, r, name)
    return lambda value, where, key: value  # object, Any: as given


def _out(at: Where, value: Any, expected: str, ranged: bool) -> SpecbenchError:
    """A value outside its range: `key = value, expected ...` when `ranged`, else `key 'key': expected ...`."""
    return at.out_of_range(repr(value) if isinstance(value, str) else value, expected) if ranged else \
        at.fail(expected, value)


def _scalar_reader(kind: type, r: Rule, name: str) -> Any:
    bounded = r.low is not None or r.high is not None
    low = -math.inf if r.low is None else r.low
    high = math.inf if r.high is None else r.high
    range_text = r.expected or (_range_text(kind, r) if bounded else "")
    choices = frozenset(r.choices)
    choice_text = r.expected or " or ".join(repr(c) for c in r.choices)

    def out(value: Any, where: Where, key: str | int) -> SpecbenchError:
        return _out(where.at(key), value, range_text, r.ranged)

    def within(value: float) -> bool:
        return (low < value if r.above else low <= value) and (value < high if r.below else value <= high)

    if kind is float or kind is int:
        numbers = (int, float) if kind is float else int  # a float field takes an integer, not the other way

        def read_number(value: Any, where: Where, key: str | int) -> Any:
            if isinstance(value, bool) or not isinstance(value, numbers) or (
                    isinstance(value, float) and not math.isfinite(value)):
                raise where.at(key).fail(name, value)
            if kind is float:
                value = float(value)
            if bounded and not within(value):
                raise out(value, where, key)
            return value
        return read_number
    if kind is bool:
        def read_bool(value: Any, where: Where, key: str | int) -> Any:
            if value is not True and value is not False:
                raise where.at(key).fail(name, value)
            return value
        return read_bool

    def read_str(value: Any, where: Where, key: str | int) -> Any:
        if not isinstance(value, str):
            raise where.at(key).fail(name, value)
        if choices and value not in choices:
            raise where.at(key).fail(choice_text, value)
        return value
    return read_str


def _container_reader(tp: Any, base: type, args: tuple, r: Rule, name: str) -> Any:
    shape = r.expected or name
    item_rule = Rule(low=r.low, high=r.high, above=r.above, below=r.below, choices=r.choices, ranged=r.ranged)
    if base is dict:
        value_tp = args[1] if len(args) == 2 else object
        read_value = _reader(*_unwrap_optional(value_tp), item_rule, _name_of(_unwrap_optional(value_tp)[0]))
        key_tp = args[0] if args else object
        plain = value_tp is object or value_tp is Any

        def read_dict(value: Any, where: Where, key: str | int) -> Any:
            if not isinstance(value, dict):
                raise where.at(key).fail(shape, value)
            if plain:
                return value
            at = where.at(key)
            try:
                if key_tp is str and not all(isinstance(k, str) for k in value):
                    raise at.fail("a mapping with text keys", value)
                return {k: read_value(v, at, str(k)) for k, v in value.items()}
            except SpecbenchError:
                if r.expected is None or r.ranged:
                    raise
                raise where.at(key).fail(r.expected, value) from None
        return read_dict
    origin = typing.get_origin(tp) or tp
    fixed = origin is tuple and bool(args) and args[-1] is not Ellipsis
    item_tps = args if fixed else (args[0] if args else object,)
    readers = [_reader(*_unwrap_optional(t), item_rule, _name_of(_unwrap_optional(t)[0])) for t in item_tps]
    make = tuple if origin is tuple else list
    read_item = readers[0]

    def read_list(value: Any, where: Where, key: str | int) -> Any:
        if not isinstance(value, (list, tuple)):
            raise where.at(key).fail(shape, value)
        at = where.at(key)
        try:
            if fixed:
                if len(value) != len(readers):
                    raise at.fail(f"a list of {len(readers)}", value)
                return make(read(v, at, i) for i, (read, v) in enumerate(zip(readers, value, strict=True)))
            return make([read_item(v, at, i) for i, v in enumerate(value)])
        except SpecbenchError:
            if r.expected is None or r.ranged:
                raise
            raise where.at(key).fail(r.expected, value) from None
    return read_list


def _writer(tp: Any) -> Any:
    """value -> what the file holds for a field of type `tp` (None: the value itself)."""
    tp = _unwrap_optional(tp)[0]
    base, args = _base(tp), typing.get_args(tp)
    if _is_record(base):
        return to_dict
    if _is_enum(base):
        return lambda value: base(value).value  # a member, or its value as given
    if base is list:
        item_tps = args if args and args[-1] is not Ellipsis else args[:1]
        inner = [_writer(t) for t in item_tps]
        if all(w is None for w in inner):
            return list
        if len(inner) == 1:
            write = inner[0]
            return lambda value: [v if v is None else write(v) for v in value]
        return lambda value: [v if w is None or v is None else w(v) for w, v in zip(inner, value, strict=True)]
    if base is dict:
        write = _writer(args[1]) if len(args) == 2 else None
        if write is None:
            return dict
        return lambda value: {k: v if v is None else write(v) for k, v in value.items()}
    return None


def read_text(path: Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecbenchError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise SpecbenchError(f"{path}: expected a file, found a directory") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecbenchError(f"{path}: cannot read ({exc})") from None


def parse_yaml(text: str) -> Any:
    """YAML's safe subset, parsed by libyaml where PyYAML was built with it (8x faster than PyYAML's own
    parser on a profile), else by PyYAML's."""
    import yaml  # here, not at the top: `specbench --help` loads schemas but reads no YAML

    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def load_yaml(path: Path) -> Any:
    import yaml

    try:
        return parse_yaml(read_text(path))
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

    # libyaml's emitter where there is one (4x faster on a profile; the same text)
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump(obj, Dumper=dumper, sort_keys=False, default_flow_style=None, width=100)


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
