"""How much does adb cost a profile? Push + profile an emulated phone, against this host.

Starts a private adb server and an x86_64 emulated phone (tests/data/phones/x86-emu.yaml;
the host's runner executes inside it, pinned with taskset), writes the tiny random-weight
models of tests/native, and profiles them three times with `profiling.profile_device`:

The target is the tiny fixture with `--target-layers` blocks (the extra ones add compute,
not function: tiny_gguf.slowed), so that the runner has seconds of work as with a real
model; `--target-layers 2` profiles the bare fixture, where the fixed overhead dominates.

* baseline: LocalDevice (the runner as a subprocess on this host), same plan;
* phone, cold: an empty phone, so the runner (~8 MB) and the models are pushed and verified;
* phone, warm: a new session on the same phone: sha256 checks find the files, nothing is sent.

For each it prints the end-to-end time, the runner's own reported wall time (the sum of
its `done` events' wall_s) and the rest, the protocol overhead (adb round trips, pushes,
snapshots, pinning checks, probes); then the phone's ratios against the baseline. The
defaults are `specbench profile`'s own (widths 1..16, depths 0,128,256, 5 repetitions).
The overhead is a fixed cost per session (about 2-3 s here), so its share shrinks as the
profiled models grow; the runner's time is what a shared machine makes it (compare the
rows of one run, not runs).

    python bench/push_profile.py [--max-width 16] [--depths 0,128,256] [--repetitions 5] [--placement split]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from specbench.emuphone.phone import EmulatedPhone, connected_phone, load_description, private_adb_server
from specbench.schemas.placement import resolve_on
from specbench.world.devices.adb import AdbDevice, AdbSettings
from specbench.world.devices.local import LocalDevice
from specbench.world.model_files import ModelFile, parse_named, target_file
from specbench.world.profiling import parse_depths, plan_for, profile_device
from tests.native import tiny_gguf

REPO = Path(__file__).resolve().parents[1]


class RunnerClock:
    """Wraps a device and sums the runner's own wall time over its jobs."""

    def __init__(self, device):
        self.device = device
        self.runner_s = 0.0

    def __getattr__(self, name):
        return getattr(self.device, name)

    def run_job(self, job, on_line=None):
        out = self.device.run_job(job, on_line)
        self.runner_s += out.wall_s
        return out


def timed_profile(device, target: ModelFile, drafters: list[ModelFile], plan) -> dict:
    clock = RunnerClock(device)
    start = time.perf_counter()
    profile_device(clock, target, drafters, plan)
    total = time.perf_counter() - start
    return {"total_s": total, "runner_s": clock.runner_s, "overhead_s": total - clock.runner_s,
            "push_s": getattr(device, "transfer_s", 0.0)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-width", type=int, default=16)
    parser.add_argument("--depths", default="0,128,256")
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--target-layers", type=int, default=32,
                        help="blocks of the tiny target (2 = the test fixture; more = seconds of runner work, "
                             "as a real model gives)")
    parser.add_argument("--placement", default="split",
                        help="split|shared|SPEC, resolved on each device (split: one thread per model, steadier "
                             "on a shared machine than two spinning threads each)")
    args = parser.parse_args()
    depths = parse_depths(args.depths)

    def plan(device):
        return plan_for(args.max_width, depths, resolve_on(device, args.placement), args.repetitions)

    work = Path(tempfile.mkdtemp(prefix="specbench-bench-"))
    weights = tiny_gguf.random_weights(seed=1, n_vocab=tiny_gguf.n_vocab())
    slow = tiny_gguf.slowed(weights, args.target_layers - 2) if args.target_layers > 2 else weights
    tiny_gguf.write_tiny_qwen3(work / "target.gguf", slow)  # same function, more compute per forward
    tiny_gguf.write_tiny_qwen3(work / "near.gguf", tiny_gguf.perturbed(weights, seed=2, noise=0.05))
    target, drafters = target_file(work / "target.gguf"), [parse_named(f"near={work / 'near.gguf'}")]

    local = LocalDevice()
    rows = {"local (baseline)": timed_profile(local, target, drafters, plan(local))}
    with private_adb_server() as server:
        os.environ["ANDROID_ADB_SERVER_PORT"] = str(server.port)
        phone = EmulatedPhone(load_description(REPO / "tests/data/phones/x86-emu.yaml"), work / "phone")
        with connected_phone(server, phone) as handle:
            for label in ("phone, cold (pushes)", "phone, warm (sha256 match)"):
                device = AdbDevice(handle.serial, AdbSettings(cores="all"), client=handle.client)
                rows[label] = timed_profile(device, target, drafters, plan(device))

    print(f"profile: widths 1..{args.max_width}, depths {args.depths}, {args.repetitions} repetitions, "
          f"placement {args.placement}, "
          f"target + 1 drafter with co-scheduling; tiny models: target {args.target_layers} blocks "
          f"({(work / 'target.gguf').stat().st_size} bytes), drafter 2 blocks ({(work / 'near.gguf').stat().st_size} bytes)")
    # overhead = everything but the runner's own time; of it, "push s" moves and checks files
    # (data transfer, sha256 on the phone), the rest is round trips (jobs, snapshots, pinning).
    print(f"{'':28} {'total s':>8} {'runner s':>9} {'overhead s':>11} {'overhead':>9} {'push s':>7} "
          f"{'round trips':>12} {'x local':>8}")
    base = rows["local (baseline)"]["total_s"]
    for label, r in rows.items():
        trips = (r["overhead_s"] - r["push_s"]) / r["total_s"]
        print(f"{label:28} {r['total_s']:8.2f} {r['runner_s']:9.2f} {r['overhead_s']:11.2f} "
              f"{r['overhead_s'] / r['total_s']:9.1%} {r['push_s']:7.2f} {trips:12.1%} {r['total_s'] / base:7.2f}x")
    for label in ("phone, cold (pushes)", "phone, warm (sha256 match)"):
        overhead = rows[label]["overhead_s"]
        print(f"{label}: the overhead is {overhead:.2f} s per profile, under 10% of it once the runner works "
              f">= {overhead * 9:.1f} s (here {rows[label]['runner_s']:.1f} s)")


if __name__ == "__main__":
    main()
