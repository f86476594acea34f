"""The four methods' configurations, their labels and the registry (docs/METHODS.md §2.6 Method specs).

Importable without numpy: the CLI's help lists the methods before any decision procedure
loads, and schemas and reports read configurations without decoding. The decision
procedures live beside this module (target.py, sd.py, specasr.py, as2d.py) and take these
configurations.

A method spec is `NAME` or `NAME:KEY=VALUE,...`; a value may be a range `5..8` or
alternatives `a|b`, which expand into one configuration each:

    target
    sd:W=5..8,p_min=0.2
    specasr:k_max=8,tau=0.5
    as2d:B=1..15,drafter=small|tiny,align=anchor,H=8

A label names a configuration in rows and reports, by one rule (`config_label`):
`NAME[KEY=VALUE,...]` with the spec's keys in the registry's order — the keys a method always
shows, then the others where they differ from their default — and the bare name without keys
(`target`, `sd[W=5,drafter=small]`, `specasr[k_max=8,tau=0.5]`, `as2d[B=7,H=4]`).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from numbers import Integral, Real
from typing import Any

from specbench.errors import SpecbenchError
from specbench.schemas.fileio import rule

REPORTED_WIDTHS = (5, 6, 7, 8)
"""AS2D's reporting convention: SD is the mean over these physical widths."""
MEAN_WIDTHS = f"{REPORTED_WIDTHS[0]}..{REPORTED_WIDTHS[-1]} mean"
"""What stands for W in the label of that mean."""
ALIGN_POLICIES = ("anchor", "positional")
"""AS2D's cursor alignment after a rejection (methods.as2d)."""
BATCH_TOKENS = 8
"""AS2D's default tokens per published producer batch."""


def check_parameter(key: str, value: object, low: int | float, high: float | None = None) -> None:
    """Refuses a method parameter outside its range: an integer >= `low`, or with `high` a
    finite number in [low, high] (NaN fails every comparison, so it is named explicitly)."""
    if high is None:
        expected = f"an integer >= {low}"
        ok = isinstance(value, Integral) and not isinstance(value, bool) and int(value) >= low
    else:
        expected = f"a finite number in [{low:g}, {high:g}]"
        ok = (isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value)
              and low <= float(value) <= high)
    if not ok:
        shown = f"{value:g}" if isinstance(value, float) else value  # as labels show it: 2, not 2.0
        raise SpecbenchError(f"{key}={shown} is out of range (expected {expected})")


@dataclass(frozen=True)
class TargetConfig:
    """Target-only greedy decoding: no parameters."""

    @cached_property
    def label(self) -> str:
        return config_label("target", {})


@dataclass(frozen=True)
class SdConfig:
    """Serial prefix-conditioned speculative decoding (methods.sd)."""

    width: int
    """Physical verification width W (W - 1 drafts)."""
    p_min: float = 0.0
    """Confidence stop: drafting ends below this top-1 probability."""
    drafter: str | None = None
    """The traced drafter's name; None: the only one traced."""

    def __post_init__(self) -> None:
        check_parameter("W", self.width, 2)  # W = 1 would verify no draft at all
        check_parameter("p_min", self.p_min, 0.0, 1.0)

    @cached_property
    def label(self) -> str:
        return config_label("sd", spec_values(self))


@dataclass(frozen=True)
class SpecAsrConfig:
    """SpecASR-style adaptive single sequence with recycling (methods.specasr)."""

    k_max: int = 8
    """Longest draft (physical width k_max + 1)."""
    tau: float = 0.5
    """Confidence threshold for drafting and for keeping recycled tokens."""
    drafter: str | None = None
    """The traced drafter's name; None: the only one traced."""

    def __post_init__(self) -> None:
        check_parameter("k_max", self.k_max, 1)
        check_parameter("tau", self.tau, 0.0, 1.0)

    @cached_property
    def label(self) -> str:
        return config_label("specasr", spec_values(self))

    @cached_property  # frozen, so computed once: replay asks for it every recycling round
    def trace_label(self) -> str:
        """Names its recorded recycling answers in a trace (one trace file per drafter, so no
        drafter key; the runner's trace.cpp SpecAsrCfg::label writes the same)."""
        values = spec_values(self)
        del values["drafter"]
        return config_label("specasr", values)


@dataclass(frozen=True)
class As2dConfig:
    """AS2D: a decoupled audio-conditioned producer and a verifier (methods.as2d)."""

    budget: int = field(default=7, metadata=rule(key="B"))
    """B: at most B candidates per verification (physical width B + 1); `B` in a budget file."""
    drafter: str | None = None
    """The traced drafter's name; None: the only one traced."""
    batch: int = BATCH_TOKENS
    """Tokens per published batch."""
    conf_stop: float = 0.0
    """Candidates end at the first token whose producer confidence is below this."""
    align: str = "anchor"
    """Cursor alignment after a rejection, one of ALIGN_POLICIES."""
    horizon: int = field(default=8, metadata=rule(key="H"))
    """H: how far past the expected index the anchor search looks; `H` in a budget file."""

    def __post_init__(self) -> None:
        if self.align not in ALIGN_POLICIES:
            raise SpecbenchError(f"unknown alignment policy '{self.align}'. Available: {', '.join(ALIGN_POLICIES)}")
        check_parameter("B", self.budget, 1)
        check_parameter("batch", self.batch, 1)
        check_parameter("conf_stop", self.conf_stop, 0.0, 1.0)
        check_parameter("H", self.horizon, 1)

    @cached_property
    def label(self) -> str:
        return config_label("as2d", spec_values(self))


MethodConfig = TargetConfig | SdConfig | SpecAsrConfig | As2dConfig


@dataclass(frozen=True)
class MethodInfo:
    """One method of the registry: its spec keys and its configuration type."""

    name: str
    """The method's name in specs, rows and the runner's jobs."""
    config: type
    """Its configuration type."""
    keys: dict[str, tuple[str, type]]
    """Spec key -> (config field, value type), in the order labels show them."""
    defaults: dict[str, str]
    """Spec values a spec that omits the key takes (SD's widths: the reported range)."""
    shown: tuple[str, ...]
    """Spec keys a label shows even at their default; the others show where they differ from it."""
    summary: str
    """One line for help texts."""


REGISTRY: dict[str, MethodInfo] = {
    "target": MethodInfo("target", TargetConfig, {}, {}, (), "target-only greedy decoding"),
    "sd": MethodInfo("sd", SdConfig, {"W": ("width", int), "p_min": ("p_min", float), "drafter": ("drafter", str)},
                     {"W": f"{REPORTED_WIDTHS[0]}..{REPORTED_WIDTHS[-1]}"}, ("W",),
                     "serial prefix-conditioned speculative decoding, physical width W"),
    "specasr": MethodInfo("specasr", SpecAsrConfig,
                          {"k_max": ("k_max", int), "tau": ("tau", float), "drafter": ("drafter", str)}, {},
                          ("k_max", "tau"), "SpecASR-style adaptive single sequence with recycling"),
    "as2d": MethodInfo("as2d", As2dConfig,
                       {"B": ("budget", int), "drafter": ("drafter", str), "batch": ("batch", int),
                        "conf_stop": ("conf_stop", float), "align": ("align", str), "H": ("horizon", int)}, {},
                       ("B",), f"decoupled audio-conditioned producer + verifier (align: {', '.join(ALIGN_POLICIES)})"),
}
"""Every method, by name, in the order help texts and default runs list them."""

_NAMES = {info.config: name for name, info in REGISTRY.items()}


def method_info(name: str) -> MethodInfo:
    info = REGISTRY.get(name)
    if info is None:
        raise SpecbenchError(f"Unknown method '{name}'. Available: {', '.join(sorted(REGISTRY))}")
    return info


def method_name(config: MethodConfig) -> str:
    return _NAMES[type(config)]


def _field_default(config_type: type, field: str) -> object:
    found = next(f for f in dataclasses.fields(config_type) if f.name == field)
    return found.default  # dataclasses.MISSING for a field without one: equal to no value


_LABEL_KEYS = {name: tuple((key, key in info.shown, _field_default(info.config, field))
                           for key, (field, _) in info.keys.items())
               for name, info in REGISTRY.items()}
"""Per method: (spec key, always shown, the field's default), in label order."""


def config_label(name: str, values: Mapping[str, object]) -> str:
    """The label rule: `name[KEY=VALUE,...]` over `values` (spec key -> value), keys in the
    registry's order, each shown where the method always shows it or it differs from its
    default; floats as `:g` (0.5, 2). The bare name when no key shows. A value need not be
    the field's type: SD's mean over W is labelled with W = MEAN_WIDTHS."""
    method_info(name)  # an unknown name is refused as a spec's would be
    parts = []
    for key, always, default in _LABEL_KEYS[name]:
        if key in values and (always or values[key] != default):
            value = values[key]
            parts.append(f"{key}={value:g}" if isinstance(value, float) else f"{key}={value}")
    return f"{name}[{','.join(parts)}]" if parts else name


def spec_values(config: MethodConfig) -> dict[str, object]:
    """A configuration's values by spec key (`W`, `B`, ...), in the registry's order."""
    return {key: getattr(config, field) for key, (field, _) in REGISTRY[method_name(config)].keys.items()}


def sd_mean_label(p_min: float = 0.0, drafter: str | None = None) -> str:
    """The label of an SD family's mean over REPORTED_WIDTHS."""
    return config_label("sd", {"W": MEAN_WIDTHS, "p_min": p_min, "drafter": drafter})


_COLUMNS = {"tau": "tau_threshold"}
"""Configuration fields named otherwise in a result row (a row's `tau` is tokens per target forward)."""


def _column(field: str) -> str:
    return _COLUMNS.get(field, field)


CONFIG_COLUMNS = tuple(dict.fromkeys(_column(f.name) for info in REGISTRY.values()
                                     for f in dataclasses.fields(info.config)))
"""The result-row columns that hold a configuration's parameters, one per parameter of any method."""


def row_fields(config: MethodConfig) -> dict[str, Any]:
    """The configuration columns of a result row: method, the label (`config`) and every
    CONFIG_COLUMNS value, None where the method has no such parameter."""
    values: dict[str, Any] = dict.fromkeys(CONFIG_COLUMNS)
    values.update((_column(f.name), getattr(config, f.name)) for f in dataclasses.fields(config))
    return {"method": method_name(config), "config": config.label, **values}


def config_of(fields: Mapping[str, Any]) -> MethodConfig:
    """The configuration of a result row's `method` and CONFIG_COLUMNS (row_fields' inverse; the
    label is not read)."""
    info = method_info(fields["method"])
    return info.config(**{f.name: fields[_column(f.name)] for f in dataclasses.fields(info.config)})


def _values(key: str, text: str, kind: type, spec: str) -> list[Any]:
    def convert(item: str) -> Any:
        try:
            return kind(item)
        except ValueError:
            raise SpecbenchError(f"method spec '{spec}': {key}={item} is not {kind.__name__}") from None

    if ".." in text and kind is int:
        low, _, high = text.partition("..")
        first, last = convert(low), convert(high)
        if last < first:
            raise SpecbenchError(f"method spec '{spec}': range {text} is empty")
        return list(range(first, last + 1))
    return [convert(item) for item in text.split("|")]


def parse_method_spec(spec: str) -> list[MethodConfig]:
    """All configurations a spec expands to, in order."""
    name, _, rest = spec.strip().partition(":")
    info = method_info(name.strip())
    given: dict[str, str] = dict(info.defaults)
    for part in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = part.partition("=")
        if not eq or not value:
            raise SpecbenchError(f"method spec '{spec}': '{part}' is not KEY=VALUE")
        if key not in info.keys:
            known = ", ".join(info.keys) or "none"
            raise SpecbenchError(f"method spec '{spec}': unknown key '{key}' for {info.name} (known: {known})")
        given[key] = value
    keys = list(given)
    choices = [_values(k, given[k], info.keys[k][1], spec) for k in keys]
    configs = []
    for combo in itertools.product(*choices):
        try:  # the configurations check their own ranges; the spec says where the value came from
            configs.append(info.config(**{info.keys[k][0]: v for k, v in zip(keys, combo, strict=False)}))
        except SpecbenchError as exc:
            raise SpecbenchError(f"method spec '{spec}': {exc}") from None
    return configs


def parse_method_specs(specs: list[str]) -> list[MethodConfig]:
    configs: list[MethodConfig] = []
    for spec in specs:
        for config in parse_method_spec(spec):
            if config not in configs:
                configs.append(config)
    return configs
