"""What a phone says about itself, parsed (pure): getprop, cpufreq, thermal, battery.

One shell round trip (`SNAPSHOT_SCRIPT`) prints every section; `parse_snapshot` turns the
text into the snapshot dict stored in profiles and results. Values a phone does not let us
read (SELinux, missing nodes) are recorded as "unavailable", never as zero.
"""

from __future__ import annotations

import re
import time
from typing import Any

from specbench.errors import SpecbenchError

UNAVAILABLE = "unavailable"

_CPUFREQ = "/sys/devices/system/cpu/cpufreq/policy*/"
_ZONES = "/sys/class/thermal/thermal_zone*/"
_SUPPLY = "/sys/class/power_supply/battery/"
# One grep prints every sysfs value as path:value (few processes on the phone being
# measured); files SELinux hides are skipped (-s) and end up "unavailable".
SNAPSHOT_SCRIPT = (
    "grep -sH '' " + " ".join([_CPUFREQ + f for f in ("related_cpus", "cpuinfo_max_freq", "scaling_cur_freq",
                                                     "scaling_max_freq", "scaling_governor")]
                             + [_ZONES + "type", _ZONES + "temp", _SUPPLY + "current_now", _SUPPLY + "voltage_now"])
    + "; echo '@@thermalservice'; dumpsys thermalservice 2>/dev/null; "
    "echo '@@battery'; dumpsys battery 2>/dev/null; echo '@@end'"
)
_SYSFS_LINE = re.compile(r"^/sys/(?:devices/system/cpu/cpufreq/(policy\d+)|class/thermal/(thermal_zone\d+)|"
                         r"class/power_supply/(battery))/(\w+):(.*)$")

IDENTITY_PROPS = {
    "model": "ro.product.model", "manufacturer": "ro.product.manufacturer", "soc_model": "ro.soc.model",
    "soc_manufacturer": "ro.soc.manufacturer", "board_platform": "ro.board.platform", "hardware": "ro.hardware",
    "abi": "ro.product.cpu.abi", "abilist": "ro.product.cpu.abilist", "android": "ro.build.version.release",
    "sdk": "ro.build.version.sdk", "fingerprint": "ro.build.fingerprint",
}

_PROP_LINE = re.compile(r"^\[([^\]]+)\]: \[(.*)\]$")
_HAL_TEMP = re.compile(r"Temperature\{mValue=([-\d.]+), mType=(-?\d+), mName=([^,}]*)")


def parse_getprop(text: str) -> dict[str, str]:
    """`getprop` (no argument) output -> {name: value}."""
    props = {}
    for line in text.splitlines():
        match = _PROP_LINE.match(line.strip())
        if match:
            props[match.group(1)] = match.group(2)
    return props


def identity(props: dict[str, str]) -> dict:
    """Model, SoC, ABI and Android version from getprop (SoC: ro.soc.model, else ro.board.platform)."""
    info: dict[str, Any] = {key: props.get(name, "") for key, name in IDENTITY_PROPS.items()}
    info["soc"] = info["soc_model"] or info["board_platform"] or info["hardware"]
    info["abilist"] = [a for a in info["abilist"].split(",") if a] or ([info["abi"]] if info["abi"] else [])
    return info


def parse_cpu_list(text: str) -> list[int]:
    """'0-3 8' or '0 1 2' or '4-7' -> [0, 1, 2, 3, 8]."""
    cpus: list[int] = []
    for part in text.replace(",", " ").split():
        low, _, high = part.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            raise ValueError(part)
        cpus.extend(range(int(low), int(high or low) + 1))
    return sorted(set(cpus))


def _int_or_unavailable(text: str):
    text = text.strip()
    return int(text) if text.lstrip("-").isdigit() else UNAVAILABLE


def parse_snapshot(text: str) -> dict:
    """SNAPSHOT_SCRIPT output -> the snapshot dict (clusters, governor, thermal, battery, supply)."""
    body, _, rest = text.partition("@@thermalservice")
    thermal_text, _, rest = rest.partition("@@battery")
    battery_text, _, _ = rest.partition("@@end")
    policies: dict[str, dict] = {}
    zones_raw: dict[str, dict] = {}
    supply_raw: dict[str, str] = {}
    for line in body.splitlines():
        match = _SYSFS_LINE.match(line.strip())
        if not match:
            continue
        policy, zone, supply, name, value = match.groups()
        target = policies.setdefault(policy, {}) if policy else zones_raw.setdefault(zone, {}) if zone else supply_raw
        target[name] = value.strip()
    clusters = []
    for policy, values in sorted(policies.items(), key=lambda item: int(item[0][6:])):
        try:
            cpus = parse_cpu_list(values.get("related_cpus", ""))
        except ValueError:
            cpus = []
        clusters.append({"policy": policy, "cpus": cpus,
                         "max_freq_khz": _int_or_unavailable(values.get("cpuinfo_max_freq", "")),
                         "cur_freq_khz": _int_or_unavailable(values.get("scaling_cur_freq", "")),
                         # the cap thermal throttling lowers (cpuinfo_max_freq never changes)
                         "scaling_max_freq_khz": _int_or_unavailable(values.get("scaling_max_freq", "")),
                         "governor": values.get("scaling_governor") or UNAVAILABLE})
    zones = {}
    for zone, values in sorted(zones_raw.items(), key=lambda item: int(item[0][12:])):
        temp = _int_or_unavailable(values.get("temp", ""))
        zones[f"{zone}:{values.get('type') or '?'}"] = temp / 1000.0 if isinstance(temp, int) else temp
    governors = sorted({c["governor"] for c in clusters if c["governor"] != UNAVAILABLE})
    snap = {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "clusters": clusters,
            "governor": ",".join(governors) or UNAVAILABLE, "thermal_c": zones,
            "thermal": parse_thermalservice(thermal_text), "battery": parse_battery(battery_text)}
    if supply_raw:
        snap["power_supply"] = {"current_now_raw": _int_or_unavailable(supply_raw.get("current_now", "")),
                                "voltage_now_raw": _int_or_unavailable(supply_raw.get("voltage_now", ""))}
    return snap


def parse_thermalservice(text: str) -> dict:
    """`dumpsys thermalservice` -> {status, hal_c: {name: temp}} (status "unavailable" when absent)."""
    status = re.search(r"Thermal Status:\s*(\d+)", text)
    hal = {}
    current = text.partition("Current temperatures from HAL:")[2] or text
    for value, _type, name in _HAL_TEMP.findall(current):
        hal[name.strip()] = float(value)
    return {"status": int(status.group(1)) if status else UNAVAILABLE, "hal_c": hal}


def parse_battery(text: str) -> dict:
    """`dumpsys battery` -> level (%), temperature (°C; dumpsys shows tenths) and charging source."""
    values = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition(":")
        if sep:
            values[key.strip()] = value.strip()
    level = values.get("level", "")
    temp = values.get("temperature", "")
    sources = [name for name, key in (("ac", "AC powered"), ("usb", "USB powered"), ("wireless", "Wireless powered"))
               if values.get(key) == "true"]
    return {"level_percent": int(level) if level.isdigit() else UNAVAILABLE,
            "temp_c": int(temp) / 10.0 if temp.lstrip("-").isdigit() else UNAVAILABLE,
            "charging": ",".join(sources) or ("none" if values else UNAVAILABLE)}


def hottest_c(snapshot: dict) -> float | None:
    """The highest readable zone or HAL temperature, in °C."""
    temps = [t for t in snapshot.get("thermal_c", {}).values() if isinstance(t, (int, float))]
    temps += list(snapshot.get("thermal", {}).get("hal_c", {}).values())
    return max(temps) if temps else None


def pick_cores(spec: str, clusters: list[dict], cpu_count: int) -> list[int]:
    """CPU numbers for --cores: 'all', 'big' (all but the slowest cluster), 'little' (the
    slowest), 'prime' (the fastest) or a list such as '4-7' or '4,5,6,7'."""
    ranked = sorted((c for c in clusters if c["cpus"] and isinstance(c["max_freq_khz"], int)),
                    key=lambda c: c["max_freq_khz"])
    everything = list(range(cpu_count)) if cpu_count else sorted({n for c in clusters for n in c["cpus"]})
    if spec == "all" or (spec in ("big", "little", "prime") and len(ranked) < 2):
        return everything
    if spec == "big":
        return sorted(n for c in ranked[1:] for n in c["cpus"])
    if spec == "little":
        return list(ranked[0]["cpus"])
    if spec == "prime":
        return list(ranked[-1]["cpus"])
    try:
        cpus = parse_cpu_list(spec)
    except ValueError:
        cpus = []
    if not cpus or (everything and max(cpus) > max(everything)):
        raise SpecbenchError(f"--cores '{spec}': expected all, big, little, prime or CPU numbers such as 4-7 "
                             f"(this phone has CPUs 0-{max(everything) if everything else '?'})")
    return cpus


def cpu_mask(cpus: list[int]) -> str:
    """taskset's hex mask for CPU numbers ([4, 5, 6, 7] -> 'f0')."""
    return format(sum(1 << c for c in cpus), "x")
