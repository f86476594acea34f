"""An emulated Android phone for tests and for users without hardware.

It speaks the adb *device* protocol on a loopback TCP port, so a real adb server can
`adb connect` to it and adbutils drives it exactly as a USB phone: CNXN without AUTH,
streams with one WRTE in flight, `shell:` (v1), `shell,v2:` (exit codes, separate stderr),
`exec:` and `sync:` v1 (stat, ls, push, pull). Commands run for real with /bin/sh in a
sandbox directory standing in for the device's `/`; getprop, dumpsys thermalservice /
battery and the cpufreq, thermal and power_supply sysfs trees answer from a YAML
description (see `emuphone.description`; how paths are mapped: `emuphone.sandbox`).

Faults can be switched on while it runs: `set_packet_delay`, `set_command_delay`,
`drop_next_transfer`, `fail_next_commands`, `go_offline`/`go_online`, `set_free_space`,
`set_abi`, plus `set_thermal`/`set_battery` for a phone that warms up. With
`battery.power_model` in the description, current_now follows the CPU load (`emuphone.power`); with
`thermal.model`, the zone temperatures, thermal status and frequency caps do (`emuphone.thermal`).

Library use (what tests/devices/conftest.py does)::

    with private_adb_server() as adb, connected_phone(adb, EmulatedPhone(desc, tmpdir)) as h:
        h.device.shell2("getprop ro.product.model", v2=True)

Command line (serves until Ctrl-C)::

    python -m specbench.emuphone.phone --description tests/data/phones/pixel-emu.yaml --port 6000
    adb connect 127.0.0.1:6000
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import tempfile
import threading
from pathlib import Path

from specbench.emuphone.adb_server import (
    AdbServer,
    PhoneHandle,
    connect_phone,
    connected_phone,
    device_state,
    free_port,
    private_adb_server,
    start_adb_server,
    stop_adb_server,
    wait_for_state,
)
from specbench.emuphone.description import PhoneDescription, load_description, parse_description
from specbench.emuphone.server import FEATURES, EmulatedPhone
from specbench.errors import SpecbenchError

__all__ = [
    "AdbServer", "EmulatedPhone", "FEATURES", "PhoneDescription", "PhoneHandle", "connect_phone",
    "connected_phone", "device_state", "free_port", "load_description", "main", "parse_description",
    "private_adb_server", "start_adb_server", "stop_adb_server", "wait_for_state",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m specbench.emuphone.phone",
        description="Serve an emulated Android phone on loopback for `adb connect`.",
        epilog="Example: python -m specbench.emuphone.phone "
               "--description tests/data/phones/pixel-emu.yaml --port 6000")
    parser.add_argument("--description", required=True, type=Path, help="phone description YAML")
    parser.add_argument("--port", type=int, default=0, help="TCP port on 127.0.0.1 (0: a free one; not 5555-5585)")
    parser.add_argument("--sandbox", type=Path,
                        help="directory standing in for the phone's / (default: a temporary one)")
    parser.add_argument("--adb-server", action="store_true",
                        help="also start a private adb server on a free port and connect the phone to it")
    parser.add_argument("-v", "--verbose", action="store_true", help="log protocol events on stderr")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(message)s")

    try:
        description = load_description(args.description)
        sandbox = args.sandbox or Path(tempfile.mkdtemp(prefix="specbench-phone-"))
        stop = threading.Event()
        # installed before the banner is printed: whoever reads it may stop us at once
        previous_handler = signal.signal(signal.SIGTERM, lambda *_: stop.set())
        with EmulatedPhone(description, sandbox, port=args.port) as phone:
            server = None
            try:
                if args.adb_server:
                    server = start_adb_server()
                    connect_phone(server, phone)
                    print(f"export ANDROID_ADB_SERVER_PORT={server.port}  # then: adb -s {phone.serial} shell",
                          flush=True)
                else:
                    print(f"serving {description.model} at {phone.serial}; run: adb connect {phone.serial}",
                          flush=True)
                print(f"sandbox: {phone.sandbox.root}  (Ctrl-C stops)", file=sys.stderr, flush=True)
                try:
                    stop.wait()
                except KeyboardInterrupt:
                    pass
            finally:
                signal.signal(signal.SIGTERM, previous_handler)
                if server is not None:
                    stop_adb_server(server)
    except SpecbenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
