"""The four decision procedures and their registry.

A method spec is `NAME` or `NAME:KEY=VALUE,...`; a value may be a range `5..8` or
alternatives `a|b`, which expand into one configuration each:

    target
    sd:W=5..8,p_min=0.2
    specasr:k_max=8,tau=0.5
    as2d:B=1..15,drafter=small|tiny,align=anchor,H=8
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Union

from specbench.core.methods.as2d import ALIGN_POLICIES, As2dConfig
from specbench.core.methods.sd import REPORTED_WIDTHS, SdConfig
from specbench.core.methods.specasr import SpecAsrConfig
from specbench.core.methods.target import TargetConfig
from specbench.errors import SpecbenchError

MethodConfig = Union[TargetConfig, SdConfig, SpecAsrConfig, As2dConfig]


@dataclass(frozen=True)
class MethodInfo:
    name: str
    config: Callable[..., Any]
    keys: dict[str, tuple[str, type]]
    """Spec key -> (config field, value type)."""
    defaults: dict[str, str]
    summary: str


REGISTRY: dict[str, MethodInfo] = {
    "target": MethodInfo("target", TargetConfig, {}, {}, "target-only greedy decoding"),
    "sd": MethodInfo("sd", SdConfig, {"W": ("width", int), "p_min": ("p_min", float), "drafter": ("drafter", str)},
                     {"W": f"{REPORTED_WIDTHS[0]}..{REPORTED_WIDTHS[-1]}"},
                     "serial prefix-conditioned speculative decoding, physical width W"),
    "specasr": MethodInfo("specasr", SpecAsrConfig,
                          {"k_max": ("k_max", int), "tau": ("tau", float), "drafter": ("drafter", str)}, {},
                          "SpecASR-style adaptive single sequence with recycling"),
    "as2d": MethodInfo("as2d", As2dConfig,
                       {"B": ("budget", int), "drafter": ("drafter", str), "batch": ("batch", int),
                        "conf_stop": ("conf_stop", float), "align": ("align", str), "H": ("horizon", int)}, {},
                       f"decoupled audio-conditioned producer + verifier (align: {', '.join(ALIGN_POLICIES)})"),
}


def method_info(name: str) -> MethodInfo:
    info = REGISTRY.get(name)
    if info is None:
        raise SpecbenchError(f"Unknown method '{name}'. Available: {', '.join(sorted(REGISTRY))}")
    return info


def method_name(config: MethodConfig) -> str:
    return {TargetConfig: "target", SdConfig: "sd", SpecAsrConfig: "specasr", As2dConfig: "as2d"}[type(config)]


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
            configs.append(info.config(**{info.keys[k][0]: v for k, v in zip(keys, combo)}))
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
