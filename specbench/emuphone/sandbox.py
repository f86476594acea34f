"""The emulated phone's filesystem: a host directory standing in for the device's `/`.

How device paths reach the host
-------------------------------
Every device path P lives at ``<root>P`` on the host (``/data/local/tmp/x`` is
``<root>/data/local/tmp/x``); ``/sdcard``, ``/storage/emulated/0`` and
``/storage/self/primary`` all mean ``<root>/sdcard``.

* sync (push/pull/stat/ls) maps *every* absolute path this way, so nothing outside the
  root can be read or written through sync (``..`` is normalised away first).
* shell commands run for real through ``/bin/sh -c`` on the host, with cwd ``<root>``
  (the device's ``/``). Before running, the command text is rewritten: each *known device
  root* below that starts a path (not preceded by a path character, not followed by a
  name character) gets ``<root>`` prepended. Quoting is untouched, so arguments keep their
  meaning; host paths such as ``/bin/sh``, ``/dev/null``, ``/proc`` or ``/tmp`` stay host
  paths. Output of shell commands gets ``<root>`` stripped again, so ``ls``/``pwd``/error
  messages show device paths. ``exec:`` output is passed through untouched (it is binary).
* ``getprop`` and ``dumpsys`` are small sh scripts in ``<root>/system/bin`` (first on
  PATH), answering from files generated from the description; ``/sys/devices/system/cpu``,
  ``/sys/class/thermal`` and ``/sys/class/power_supply`` are generated file trees, so
  ``cat``, globs and loops over them work as on a phone (with ``battery.power_model``,
  current_now follows the CPU load: ``emuphone.power``). A program that opens a sysfs path
  itself, rather than naming it in the command text, finds it under ``$EMUPHONE_ROOT``.
* ``taskset`` is a script in ``<root>/system/bin`` too: the phone's CPU mask is narrowed to
  the host's CPUs (all of them when none overlap) and handed to the host's taskset, so
  pinning is real and ``/proc/<pid>/task/*/status`` shows it. On a phone that claims
  arm64-v8a (on a non-arm host) an aarch64 ELF it starts runs under qemu-aarch64(-static),
  since binfmt_misc is usually unavailable in containers.

Limits of the rewrite: paths *inside* pushed files (e.g. a script that cds to
``/data/local/tmp/...``) are not translated; such scripts can use ``$EMUPHONE_ROOT``, which
every command gets in its environment. A ``#!/system/bin/sh`` shebang does not exist on the
host: run scripts as ``sh script.sh`` or omit the shebang. Paths built at run time from
pieces (``d=/data; ls $d/local/tmp``) are not rewritten.
"""

from __future__ import annotations

import os
import platform
import posixpath
import re
import shutil
from pathlib import Path

from specbench.emuphone.description import HAL_TEMPERATURE_TYPES, PhoneDescription
from specbench.errors import SpecbenchError

DEVICE_ALIASES = {
    "/storage/emulated/0": "/sdcard",
    "/storage/self/primary": "/sdcard",
}
"""Device paths that are another name for a canonical one."""

SHELL_ROOTS = (
    "/data/local/tmp", "/sdcard", "/storage/emulated/0", "/storage/self/primary",
    "/sys/devices/system/cpu", "/sys/class/thermal", "/sys/class/power_supply",
    "/system/bin/getprop", "/system/bin/dumpsys", "/system/bin/taskset",
)
"""Device path prefixes that shell command text is rewritten for."""

_SAFE_ROOT = re.compile(r"^/[A-Za-z0-9_./+-]*$")
_SHELL_ROOT_RE = re.compile(
    r"(?<![\w./-])(" + "|".join(re.escape(r) for r in sorted(SHELL_ROOTS, key=len, reverse=True))
    + r")(?![\w.-])")


class Sandbox:
    """The host directory that holds one emulated phone's filesystem."""

    def __init__(self, root: str | Path):
        root_text = os.path.abspath(os.fspath(root))
        if not _SAFE_ROOT.match(root_text):
            # the root is pasted into shell command text, so it must need no quoting
            raise SpecbenchError(f"sandbox path {root_text!r} has characters that need shell quoting",
                                 hint="use a directory whose path has only letters, digits and _ . / + -")
        self.root = Path(root_text)
        self._root_text = root_text

    # --- paths ---
    def host_path(self, device_path: str) -> Path:
        """The host file for an absolute device path (sync's view: everything is under root)."""
        if not device_path.startswith("/"):
            raise SpecbenchError(f"device path {device_path!r} is not absolute")
        path = posixpath.normpath(device_path)
        if path.startswith("//"):
            path = "/" + path.lstrip("/")
        for alias, canonical in DEVICE_ALIASES.items():
            if path == alias or path.startswith(alias + "/"):
                path = canonical + path[len(alias):]
        return Path(self._root_text + (path if path != "/" else ""))

    def rewrite_command(self, command: str) -> str:
        """Shell command text with known device roots moved under the sandbox root."""
        def replace(match: re.Match) -> str:
            device = match.group(1)
            return self._root_text + DEVICE_ALIASES.get(device, device)
        return _SHELL_ROOT_RE.sub(replace, command)

    def output_unmapper(self) -> OutputUnmapper:
        return OutputUnmapper(self._root_text.encode())

    def command_env(self) -> dict[str, str]:
        """The environment shell commands run with: the host's, with the phone's tools first."""
        env = dict(os.environ)
        env.update({
            "PATH": f"{self._root_text}/system/bin:{env.get('PATH', '/usr/bin:/bin')}",
            "HOME": self._root_text,
            "TMPDIR": f"{self._root_text}/data/local/tmp",
            "EMUPHONE_ROOT": self._root_text,
        })
        return env

    def used_bytes(self) -> int:
        """Bytes in user-writable places (/data, /sdcard), which count against free space."""
        total = 0
        for top in ("data", "sdcard"):
            for folder, _dirs, files in os.walk(self.root / top):
                for name in files:
                    try:
                        total += os.lstat(os.path.join(folder, name)).st_size
                    except OSError:
                        pass
        return total

    # --- generated content ---
    def materialize(self, description: PhoneDescription, only: tuple[str, ...] = ()) -> None:
        """Create the directories and (re)write every file generated from the description (with
        `only`: the files whose relative paths start with one of these, as the thermal model does)."""
        for folder in ("data/local/tmp", "sdcard", "system/bin"):
            (self.root / folder).mkdir(parents=True, exist_ok=True)
        for relative, content in _generated_files(description, self._root_text).items():
            if only and not relative.startswith(only):
                continue
            path = self.root / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(content)
            os.replace(tmp, path)  # a concurrent `cat` never sees half a file
            if relative.startswith("system/bin/"):
                path.chmod(0o755)
        cpu_dir = self.root / "sys/devices/system/cpu"
        for cluster in description.clusters:
            for cpu in cluster.cpus:
                link = cpu_dir / f"cpu{cpu}" / "cpufreq"
                if not link.is_symlink():
                    link.symlink_to(f"../cpufreq/policy{cluster.cpus[0]}")


class OutputUnmapper:
    """Strips the sandbox root from a byte stream, also where it straddles chunk boundaries.

    `<root>/x` becomes `/x`; `<root>` alone (followed by a space, quote, newline, end...)
    becomes `/`; `<root>x` is another path and is left alone."""

    _NAME_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-+")

    def __init__(self, root: bytes):
        self._root = root
        self._pending = b""

    def feed(self, chunk: bytes) -> bytes:
        return self._process(self._pending + chunk, final=False)

    def flush(self) -> bytes:
        return self._process(self._pending, final=True)

    def _process(self, data: bytes, final: bool) -> bytes:
        root, out, i = self._root, [], 0
        self._pending = b""
        while True:
            j = data.find(root, i)
            if j < 0:
                break
            after = j + len(root)
            if after == len(data) and not final:  # the next byte decides: wait for it
                out.append(data[i:j])
                self._pending = data[j:]
                return b"".join(out)
            out.append(data[i:j])
            if after < len(data) and data[after] == ord("/"):
                out.append(b"/")
                after += 1  # the slash is consumed: it cannot start another match
            elif after == len(data) or data[after] not in self._NAME_BYTES:
                out.append(b"/")
            else:
                out.append(root)  # "<root>x": some other path
            i = after
        tail = data[i:]
        if not final:  # hold back a tail that may be the start of the root
            for length in range(min(len(tail), len(root) - 1), 0, -1):
                if root.startswith(tail[-length:]):
                    self._pending = tail[-length:]
                    tail = tail[:-length]
                    break
        out.append(tail)
        return b"".join(out)


def _generated_files(d: PhoneDescription, root: str) -> dict[str, str]:
    """Relative path -> content for every file derived from the description."""
    files: dict[str, str] = {}
    props = d.props()
    for name, value in props.items():
        files[f"system/emuphone/props/{name}"] = value + "\n"
    files["system/emuphone/getprop.txt"] = "".join(f"[{k}]: [{v}]\n" for k, v in sorted(props.items()))
    files["system/emuphone/dumpsys/thermalservice"] = _dumpsys_thermalservice(d)
    files["system/emuphone/dumpsys/battery"] = _dumpsys_battery(d)
    files["system/bin/getprop"] = _GETPROP.replace("@ROOT@", root)
    files["system/bin/dumpsys"] = _DUMPSYS.replace("@ROOT@", root)
    files["system/bin/taskset"] = _taskset_script(d)

    cpu = "sys/devices/system/cpu"
    span = f"0-{d.cpu_count - 1}\n"
    files.update({f"{cpu}/possible": span, f"{cpu}/present": span, f"{cpu}/online": span,
                  f"{cpu}/kernel_max": f"{d.cpu_count - 1}\n"})
    for cluster in d.clusters:
        policy = f"{cpu}/cpufreq/policy{cluster.cpus[0]}"
        cpus = " ".join(str(c) for c in cluster.cpus) + "\n"
        files.update({
            f"{policy}/cpuinfo_max_freq": f"{cluster.max_freq_khz}\n",
            f"{policy}/cpuinfo_min_freq": f"{cluster.min_freq_khz}\n",
            f"{policy}/scaling_max_freq": f"{cluster.scaling_max_freq_khz or cluster.max_freq_khz}\n",
            f"{policy}/scaling_min_freq": f"{cluster.min_freq_khz}\n",
            f"{policy}/scaling_cur_freq": f"{cluster.cur_freq_khz}\n",
            f"{policy}/scaling_governor": f"{d.cpu_governor}\n",
            f"{policy}/scaling_available_governors": f"{d.cpu_governor} performance powersave\n",
            f"{policy}/related_cpus": cpus,
            f"{policy}/affected_cpus": cpus,
        })
        for c in cluster.cpus:
            files[f"{cpu}/cpu{c}/online"] = "1\n"

    for index, zone in enumerate(d.thermal_zones):
        files[f"sys/class/thermal/thermal_zone{index}/type"] = zone.type + "\n"
        files[f"sys/class/thermal/thermal_zone{index}/temp"] = f"{round(zone.temp_c * 1000)}\n"
        files[f"sys/class/thermal/thermal_zone{index}/mode"] = "enabled\n"

    b = d.battery
    supply = "sys/class/power_supply"
    files.update({
        f"{supply}/battery/capacity": f"{b.level_percent}\n",
        f"{supply}/battery/temp": f"{round(b.temp_c * 10)}\n",
        f"{supply}/battery/status": _battery_status_text(d) + "\n",
        f"{supply}/battery/health": "Good\n",
        f"{supply}/battery/present": "1\n",
        f"{supply}/battery/technology": "Li-ion\n",
        f"{supply}/battery/type": "Battery\n",
        f"{supply}/usb/online": f"{int(b.charging == 'usb')}\n",
        f"{supply}/ac/online": f"{int(b.charging == 'ac')}\n",
    })
    if b.power_model is None:  # with a model, emuphone.power writes these at every tick
        files[f"{supply}/battery/voltage_now"] = f"{b.voltage_uv}\n"
        files[f"{supply}/battery/current_now"] = f"{b.current_ua}\n"
    return files


def _battery_status_text(d: PhoneDescription) -> str:
    if d.battery.charging == "none":
        return "Discharging"
    return "Full" if d.battery.level_percent >= 100 else "Charging"


def _dumpsys_battery(d: PhoneDescription) -> str:
    b = d.battery
    status_code = {"Charging": 2, "Discharging": 3, "Full": 5}[_battery_status_text(d)]
    lines = [
        "Current Battery Service state:",
        f"  AC powered: {str(b.charging == 'ac').lower()}",
        f"  USB powered: {str(b.charging == 'usb').lower()}",
        f"  Wireless powered: {str(b.charging == 'wireless').lower()}",
        "  Dock powered: false",
        "  Max charging current: 500000",
        "  Max charging voltage: 5000000",
        "  Charge counter: 3000000",
        f"  status: {status_code}",
        "  health: 2",
        "  present: true",
        f"  level: {b.level_percent}",
        "  scale: 100",
        f"  voltage: {b.voltage_uv // 1000}",
        f"  temperature: {round(b.temp_c * 10)}",
        "  technology: Li-ion",
    ]
    return "\n".join(lines) + "\n"


def _dumpsys_thermalservice(d: PhoneDescription) -> str:
    def temperature(zone) -> str:
        m_type = HAL_TEMPERATURE_TYPES.index(zone.hal_type) - 1
        return f"\tTemperature{{mValue={zone.temp_c:.1f}, mType={m_type}, mName={zone.type}, mStatus=0}}"

    temps = [temperature(z) for z in d.thermal_zones]
    lines = [
        "IsStatusOverride: false",
        "ThermalEventListeners:",
        "\tcallbacks: 1",
        "\tkilled: false",
        "\tbroadcasts count: -1",
        "ThermalStatusListeners:",
        "\tcallbacks: 1",
        "\tkilled: false",
        "\tbroadcasts count: -1",
        f"Thermal Status: {d.thermal_status}",
        "Cached temperatures:",
        *temps,
        "HAL Ready: true",
        "HAL connection:",
        "\tThermalHAL 2.0 connected: yes",
        "Current temperatures from HAL:",
        *temps,
        "Current cooling devices from HAL:",
    ]
    return "\n".join(lines) + "\n"


def _taskset_script(d: PhoneDescription) -> str:
    """taskset for the phone's CPU numbers on this host; aarch64 ELFs under qemu on an arm64 phone."""
    real = shutil.which("taskset", path=os.environ.get("PATH", "/usr/bin:/bin")) or ""
    qemu = ""
    if d.abi.startswith("arm64") and platform.machine().lower() not in ("aarch64", "arm64"):
        qemu = shutil.which("qemu-aarch64-static") or shutil.which("qemu-aarch64") or "missing"
    try:
        host_mask = format(sum(1 << cpu for cpu in os.sched_getaffinity(0)), "x")
    except (AttributeError, OSError):
        host_mask = format((1 << (os.cpu_count() or 1)) - 1, "x")
    return _TASKSET.replace("@TASKSET@", real).replace("@QEMU@", qemu).replace("@HOSTMASK@", host_mask)


# The phone may claim more CPUs than the host has: its mask is narrowed to the host's CPUs
# (all of them when none overlap), so pinning checks on a small host see the narrowing.
_TASKSET = """#!/bin/sh
# taskset of an emulated phone (specbench emuphone): MASK narrowed to the host's CPUs
real="@TASKSET@"; qemu="@QEMU@"; host=@HOSTMASK@
case "$1" in -*|'') [ -n "$real" ] && exec "$real" "$@"; echo "emuphone: taskset not on host" >&2; exit 1;; esac
mask=$1; shift
if [ -n "$real" ]; then
  m=$(( 0x$mask & 0x$host )); [ "$m" -eq 0 ] && m=$(( 0x$host ))
  set -- "$real" "$(printf '%x' "$m")" "$@"
fi
if [ -n "$qemu" ] && [ -f "$1" -o -f "${3:-}" ]; then
  prog=$1; [ -n "$real" ] && prog=$3
  if [ "$(od -An -tx1 -N4 "$prog" | tr -d ' \n')$(od -An -tx1 -j18 -N2 "$prog" | tr -d ' \n')" = 7f454c46b700 ]; then
    [ "$qemu" = missing ] && { echo "emuphone: $prog is aarch64; install qemu-user-static to run it" >&2; exit 126; }
    if [ -n "$real" ]; then r=$1; m=$2; shift 2; set -- "$r" "$m" "$qemu" "$@"; else set -- "$qemu" "$@"; fi
  fi
fi
exec "$@"
"""


_GETPROP = """#!/bin/sh
# getprop of an emulated phone: values come from its description (specbench emuphone)
props="@ROOT@/system/emuphone/props"
if [ $# -eq 0 ]; then cat "@ROOT@/system/emuphone/getprop.txt"; exit 0; fi
case "$1" in */*|.|..|'') echo "${2:-}"; exit 0;; esac
if [ -f "$props/$1" ]; then cat "$props/$1"; else echo "${2:-}"; fi
"""

_DUMPSYS = """#!/bin/sh
# dumpsys of an emulated phone: thermalservice and battery only (specbench emuphone)
dir="@ROOT@/system/emuphone/dumpsys"
if [ $# -eq 0 ]; then
  for s in battery thermalservice; do echo "DUMP OF SERVICE $s:"; cat "$dir/$s"; done; exit 0
fi
case "$1" in
  battery|thermalservice) cat "$dir/$1" ;;
  -l) echo "Currently running services:"; echo "  battery"; echo "  thermalservice" ;;
  *) echo "Can't find service: $1" >&2 ;;
esac
"""
