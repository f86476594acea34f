"""The YAML description of an emulated phone: identity, CPU clusters, thermal, battery, storage.

Format (``format_version: 1``; see tests/data/phones/pixel-emu.yaml for a full example)::

    format_version: 1
    model: Pixel 8 (emulated)        # ro.product.model
    manufacturer: Google             # ro.product.manufacturer
    device: shiba                    # ro.product.device / ro.product.name
    soc: {manufacturer: Google, model: Tensor G3, platform: zuma, hardware: zuma}
    abilist: [arm64-v8a]             # first entry is ro.product.cpu.abi
    android: {release: "14", sdk: 34}
    cpu:
      governor: schedutil
      clusters:                      # one cpufreq policy each
        - {cpus: [0, 1, 2, 3], max_freq_khz: 1704000, min_freq_khz: 324000}
    thermal:
      status: 0                      # dumpsys thermalservice "Thermal Status" (0..6)
      zones:                         # /sys/class/thermal/thermal_zoneN, in this order
        - {type: cpu-big, temp_c: 38.5, hal_type: CPU}
      # optional, synthetic heating that follows the phone's CPU load (see emuphone.thermal):
      #   model: {heat_per_busy_cpu_c_per_s: 2.0, cool_rate_per_s: 0.05, ambient_c: 30,
      #           throttle_at_c: [40, 45], throttled_max_freq_khz: 1200000, interval_s: 0.1}
    battery: {level_percent: 85, temp_c: 29.5, charging: usb, voltage_uv: 3900000, current_ua: -350000}
      # optional, a synthetic current that follows the phone's CPU load (see emuphone.power):
      #   power_model: {idle_ua: 200000, per_busy_cpu_ua: 400000, interval_s: 0.1,
      #                 sign: discharging_negative, unit: uA}
    storage: {free_bytes: 8000000000}
    props: {ro.build.fingerprint: "..."}   # extra or overriding getprop values

Loading validates every key and raises `SchemaError` naming the file, the key and what was
expected. The dataclasses are frozen; the emulator derives changed copies with `replace`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from specbench.errors import SchemaError

FORMAT_VERSION = 1

HAL_TEMPERATURE_TYPES = ("UNKNOWN", "CPU", "GPU", "BATTERY", "SKIN", "USB_PORT",
                         "POWER_AMPLIFIER", "BCL_VOLTAGE", "BCL_CURRENT", "BCL_PERCENTAGE", "NPU")
"""android.os.Temperature types; the index is the mType that dumpsys prints (UNKNOWN is -1)."""

CHARGING_SOURCES = ("none", "usb", "ac", "wireless")

CURRENT_SIGNS = ("discharging_negative", "discharging_positive")
"""How current_now signs a draw: negative (Pixel and most phones) or positive (some Samsung kernels)."""

CURRENT_UNITS = ("uA", "mA")
"""What current_now counts in: µA as the kernel documents, or mA as some vendor kernels report."""


@dataclass(frozen=True)
class CpuCluster:
    """One cpufreq policy: a set of identical cores."""

    cpus: tuple[int, ...]
    """Logical CPU numbers in this cluster; the policy is named after the first."""
    max_freq_khz: int
    """cpuinfo_max_freq, in kHz as sysfs reports it."""
    min_freq_khz: int
    """cpuinfo_min_freq, in kHz."""
    cur_freq_khz: int
    """scaling_cur_freq, in kHz."""
    scaling_max_freq_khz: int | None = None
    """scaling_max_freq, in kHz: the cap thermal throttling lowers (None: max_freq_khz)."""


@dataclass(frozen=True)
class ThermalZone:
    """One /sys/class/thermal/thermal_zoneN and its thermal HAL temperature."""

    type: str
    """The zone's sysfs `type` and the HAL temperature's mName."""
    temp_c: float
    """Temperature in degrees Celsius (sysfs shows millidegrees)."""
    hal_type: str
    """One of HAL_TEMPERATURE_TYPES."""


@dataclass(frozen=True)
class PowerModel:
    """A synthetic battery draw that follows the phone's CPU load (emuphone.power has the formula)."""

    idle_ua: int
    """Draw with no busy CPU, in µA (a magnitude; `sign` decides how current_now shows it)."""
    per_busy_cpu_ua: int
    """Extra draw per busy CPU, in µA."""
    interval_s: float
    """Seconds between load samples; current_now changes only at these ticks."""
    sign: str
    """One of CURRENT_SIGNS."""
    unit: str
    """One of CURRENT_UNITS: the unit current_now is written in."""


@dataclass(frozen=True)
class ThermalModel:
    """A synthetic heating model driven by the phone's busy CPUs (emuphone.thermal has the formula)."""

    heat_per_busy_cpu_c_per_s: float
    """°C per second each busy CPU adds to every zone."""
    cool_rate_per_s: float
    """Newtonian cooling: each zone loses cool_rate_per_s × (temp - ambient_c) °C per second."""
    ambient_c: float
    """The temperature zones cool towards, °C."""
    throttle_at_c: tuple[float, ...]
    """Ascending thresholds: the thermal status is how many the hottest zone has reached (at most 6)."""
    throttled_max_freq_khz: int
    """scaling_max_freq (and the cap of scaling_cur_freq) of every policy while the status is above 0."""
    interval_s: float
    """Seconds between ticks; temperatures change only at ticks."""


@dataclass(frozen=True)
class Battery:
    """The battery as dumpsys battery and /sys/class/power_supply/battery show it."""

    level_percent: int
    temp_c: float
    """Degrees Celsius (dumpsys and sysfs show tenths)."""
    charging: str
    """One of CHARGING_SOURCES."""
    voltage_uv: int
    """Microvolts, as voltage_now."""
    current_ua: int
    """Microamperes, as current_now; negative while discharging (the Pixel convention)."""
    power_model: PowerModel | None = None
    """When set, current_now follows the CPU load (and current_ua is not shown); None: a fixed current_now."""


@dataclass(frozen=True)
class PhoneDescription:
    """Everything the emulated phone reports about itself."""

    model: str
    manufacturer: str
    device: str
    soc_manufacturer: str
    soc_model: str
    board_platform: str
    hardware: str
    abilist: tuple[str, ...]
    """Supported ABIs, preferred first; abilist[0] is ro.product.cpu.abi."""
    android_release: str
    android_sdk: int
    cpu_governor: str
    clusters: tuple[CpuCluster, ...]
    thermal_status: int
    """0 (none) .. 6 (shutdown), as `dumpsys thermalservice` prints it."""
    thermal_zones: tuple[ThermalZone, ...]
    battery: Battery
    free_bytes: int
    """Free space on /data before anything is pushed; pushes beyond it fail."""
    extra_props: Mapping[str, str] = field(default_factory=dict)
    """getprop values beyond (or overriding) the derived ones."""
    thermal_model: ThermalModel | None = None
    """When set, zone temperatures, the thermal status and the frequency caps follow the CPU load."""

    @property
    def abi(self) -> str:
        return self.abilist[0]

    @property
    def cpu_count(self) -> int:
        return 1 + max(cpu for cluster in self.clusters for cpu in cluster.cpus)

    def props(self) -> dict[str, str]:
        """Every getprop value, derived fields first, then extra_props."""
        fingerprint = (f"{self.manufacturer.lower()}/{self.device}/{self.device}:"
                       f"{self.android_release}/EMU.{self.android_sdk}/1:user/release-keys")
        values = {
            "ro.product.model": self.model,
            "ro.product.manufacturer": self.manufacturer,
            "ro.product.brand": self.manufacturer.lower(),
            "ro.product.device": self.device,
            "ro.product.name": self.device,
            "ro.soc.manufacturer": self.soc_manufacturer,
            "ro.soc.model": self.soc_model,
            "ro.board.platform": self.board_platform,
            "ro.hardware": self.hardware,
            "ro.product.cpu.abi": self.abi,
            "ro.product.cpu.abilist": ",".join(self.abilist),
            "ro.build.version.release": self.android_release,
            "ro.build.version.sdk": str(self.android_sdk),
            "ro.build.fingerprint": fingerprint,
            "ro.build.type": "user",
            "ro.debuggable": "0",
            "sys.boot_completed": "1",
            "ro.kernel.qemu": "0",
        }
        values.update(self.extra_props)
        return values

    def with_abi(self, abi: str) -> PhoneDescription:
        """A copy that claims `abi` only (for the wrong-ABI fault)."""
        return replace(self, abilist=(abi,))


def load_description(path: str | Path) -> PhoneDescription:
    """Read and validate a description file."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SchemaError(path, "<file>", "a readable YAML file", exc.strerror) from exc
    except yaml.YAMLError as exc:
        raise SchemaError(path, "<file>", "valid YAML", str(exc).splitlines()[0]) from exc
    return parse_description(raw, source=path)


def parse_description(raw: Any, source: object = "<description>") -> PhoneDescription:
    """Validate an already-parsed mapping (as from YAML)."""
    doc = _Doc(source)
    root = doc.mapping(raw, "")
    version = doc.get(root, "format_version", int, "")
    if version != FORMAT_VERSION:
        raise SchemaError(source, "format_version", f"{FORMAT_VERSION}", version)
    soc = doc.mapping(root.get("soc"), "soc")
    android = doc.mapping(root.get("android"), "android")
    cpu = doc.mapping(root.get("cpu"), "cpu")
    thermal = doc.mapping(root.get("thermal"), "thermal")
    battery = doc.mapping(root.get("battery"), "battery")
    storage = doc.mapping(root.get("storage"), "storage")

    clusters = tuple(doc.cluster(item, f"cpu.clusters[{i}]")
                     for i, item in enumerate(doc.get(cpu, "clusters", list, "cpu.")))
    if not clusters:
        raise SchemaError(source, "cpu.clusters", "at least one cluster")
    zones = tuple(doc.zone(item, f"thermal.zones[{i}]")
                  for i, item in enumerate(doc.get(thermal, "zones", list, "thermal.")))
    abilist = tuple(doc.get(root, "abilist", list, ""))
    if not abilist or not all(isinstance(abi, str) and abi for abi in abilist):
        raise SchemaError(source, "abilist", "a non-empty list of ABI names", abilist)
    charging = doc.get(battery, "charging", str, "battery.")
    if charging not in CHARGING_SOURCES:
        raise SchemaError(source, "battery.charging", f"one of {', '.join(CHARGING_SOURCES)}", charging)
    status = doc.get(thermal, "status", int, "thermal.")
    if not 0 <= status <= 6:
        raise SchemaError(source, "thermal.status", "an integer 0..6", status)
    props = doc.get(root, "props", dict, "", default={})
    return PhoneDescription(
        model=doc.get(root, "model", str, ""),
        manufacturer=doc.get(root, "manufacturer", str, ""),
        device=doc.get(root, "device", str, ""),
        soc_manufacturer=doc.get(soc, "manufacturer", str, "soc."),
        soc_model=doc.get(soc, "model", str, "soc."),
        board_platform=doc.get(soc, "platform", str, "soc."),
        hardware=doc.get(soc, "hardware", str, "soc."),
        abilist=abilist,
        android_release=str(doc.get(android, "release", (str, int), "android.")),
        android_sdk=doc.get(android, "sdk", int, "android."),
        cpu_governor=doc.get(cpu, "governor", str, "cpu."),
        clusters=clusters,
        thermal_status=status,
        thermal_zones=zones,
        battery=Battery(
            level_percent=doc.get(battery, "level_percent", int, "battery."),
            temp_c=float(doc.get(battery, "temp_c", (int, float), "battery.")),
            charging=charging,
            voltage_uv=doc.get(battery, "voltage_uv", int, "battery.", default=3_900_000),
            current_ua=doc.get(battery, "current_ua", int, "battery.", default=-300_000),
            power_model=doc.power_model(battery.get("power_model"), "battery.power_model"),
        ),
        free_bytes=doc.get(storage, "free_bytes", int, "storage."),
        extra_props={str(k): str(v) for k, v in props.items()},
        thermal_model=doc.thermal_model(thermal.get("model"), "thermal.model"),
    )


class _Doc:
    """Typed lookups that raise SchemaError with the dotted key."""

    def __init__(self, source: object):
        self.source = source

    def mapping(self, value: Any, key: str) -> dict:
        if not isinstance(value, dict):
            raise SchemaError(self.source, key or "<top level>", "a mapping", value)
        return value

    def get(self, mapping: dict, key: str, kind: type | tuple, prefix: str, default: Any = ...) -> Any:
        if key not in mapping:
            if default is not ...:
                return default
            raise SchemaError(self.source, prefix + key, "a value (key is missing)")
        value = mapping[key]
        # bool is an int subclass; a YAML `yes` is never a frequency or a level
        if isinstance(value, bool) or not isinstance(value, kind):
            names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
            raise SchemaError(self.source, prefix + key, f"a {names}", value)
        return value

    def cluster(self, raw: Any, key: str) -> CpuCluster:
        item = self.mapping(raw, key)
        cpus = tuple(self.get(item, "cpus", list, key + "."))
        if not cpus or not all(isinstance(c, int) and c >= 0 for c in cpus):
            raise SchemaError(self.source, key + ".cpus", "a non-empty list of CPU numbers", cpus)
        max_khz = self.get(item, "max_freq_khz", int, key + ".")
        min_khz = self.get(item, "min_freq_khz", int, key + ".", default=max_khz // 5)
        cur_khz = self.get(item, "cur_freq_khz", int, key + ".", default=max_khz)
        return CpuCluster(cpus=cpus, max_freq_khz=max_khz, min_freq_khz=min_khz, cur_freq_khz=cur_khz)

    def power_model(self, raw: Any, key: str) -> PowerModel | None:
        if raw is None:
            return None
        item = self.mapping(raw, key)
        values = {name: self.get(item, name, int, key + ".") for name in ("idle_ua", "per_busy_cpu_ua")}
        for name, value in values.items():
            if value < 0:
                raise SchemaError(self.source, f"{key}.{name}", "a draw in µA >= 0", value)
        interval_s = float(self.get(item, "interval_s", (int, float), key + ".", default=0.1))
        if not 0.01 <= interval_s <= 10:
            raise SchemaError(self.source, key + ".interval_s", "seconds in 0.01..10", interval_s)
        sign = self.get(item, "sign", str, key + ".", default=CURRENT_SIGNS[0])
        if sign not in CURRENT_SIGNS:
            raise SchemaError(self.source, key + ".sign", f"one of {', '.join(CURRENT_SIGNS)}", sign)
        unit = self.get(item, "unit", str, key + ".", default=CURRENT_UNITS[0])
        if unit not in CURRENT_UNITS:
            raise SchemaError(self.source, key + ".unit", f"one of {', '.join(CURRENT_UNITS)}", unit)
        return PowerModel(interval_s=interval_s, sign=sign, unit=unit, **values)

    def thermal_model(self, raw: Any, key: str) -> ThermalModel | None:
        if raw is None:
            return None
        item = self.mapping(raw, key)
        rates = {}
        for name in ("heat_per_busy_cpu_c_per_s", "cool_rate_per_s"):
            rates[name] = float(self.get(item, name, (int, float), key + "."))
            if not 0 <= rates[name] <= 100:
                raise SchemaError(self.source, f"{key}.{name}", "a rate in 0..100 per second", rates[name])
        thresholds = self.get(item, "throttle_at_c", list, key + ".")
        if (not 1 <= len(thresholds) <= 6 or not all(isinstance(t, (int, float)) and not isinstance(t, bool)
                                                     for t in thresholds) or thresholds != sorted(thresholds)):
            raise SchemaError(self.source, key + ".throttle_at_c", "1 to 6 ascending temperatures in °C", thresholds)
        cap = self.get(item, "throttled_max_freq_khz", int, key + ".")
        if cap <= 0:
            raise SchemaError(self.source, key + ".throttled_max_freq_khz", "a frequency in kHz > 0", cap)
        interval_s = float(self.get(item, "interval_s", (int, float), key + ".", default=0.1))
        if not 0.01 <= interval_s <= 10:
            raise SchemaError(self.source, key + ".interval_s", "seconds in 0.01..10", interval_s)
        return ThermalModel(ambient_c=float(self.get(item, "ambient_c", (int, float), key + ".")),
                            throttle_at_c=tuple(float(t) for t in thresholds), throttled_max_freq_khz=cap,
                            interval_s=interval_s, **rates)

    def zone(self, raw: Any, key: str) -> ThermalZone:
        item = self.mapping(raw, key)
        hal_type = self.get(item, "hal_type", str, key + ".", default="UNKNOWN")
        if hal_type not in HAL_TEMPERATURE_TYPES:
            raise SchemaError(self.source, key + ".hal_type", f"one of {', '.join(HAL_TEMPERATURE_TYPES)}",
                              hal_type)
        return ThermalZone(type=self.get(item, "type", str, key + "."),
                           temp_c=float(self.get(item, "temp_c", (int, float), key + ".")),
                           hal_type=hal_type)
