"""The arm path: the static aarch64 runner (scripts/build-runner --aarch64-linux) pushed to
an arm64-v8a emulated phone and run there under qemu-aarch64, as on a phone: llama.cpp's sweep and
decode, and whisper.cpp's decode of an audio window (tiny random-weight Whisper models: the real ones
take minutes per decode under qemu)."""

from __future__ import annotations

from specbench.world.devices.adb import open_adb_device


def test_aarch64_runner_sweeps_on_an_arm_phone(arm_phone, aarch64_runner, tiny):
    device = open_adb_device(arm_phone.serial)
    info = device.runner()
    assert info.protocol == 1 and ("NEON" in info.system_info or "ARM" in info.system_info)
    on_phone = arm_phone.phone.sandbox.host_path("/data/local/tmp/specbench/specbench-runner")
    assert on_phone.read_bytes()[18] == 0xB7  # e_machine EM_AARCH64: the arm binary ran
    job = {"mode": "sweep", "target": {"path": device.model_path(tiny.target)}, "widths": [1, 2], "depths": [0],
           "repetitions": 5}
    out = device.run_job(job)
    assert sorted((r["model"], r["width"]) for r in out.results) == [("target", 1), ("target", 2)]
    assert device.snapshot()["jobs"][0]["cpus"] == [1]


def test_aarch64_runner_decodes_with_the_lookup_drafter_on_an_arm_phone(arm_phone, aarch64_runner, tiny):
    """The prompt-lookup drafter `pld` on the phone: SD and AS2D with it commit target-only's tokens."""
    device = open_adb_device(arm_phone.serial)
    window = {"id": "a", "prompt": [76], "cap": 20, "input": [199, 135, 49, 192]}  # the answer's first tokens
    job = {"mode": "decode", "threads": 1, "target": {"path": device.model_path(tiny.target)},
           "drafter": {"lookup": "pld"}, "windows": [window],
           "methods": [{"name": "target"}, {"name": "sd", "width": 5}, {"name": "as2d", "budget": 4}]}
    base, sd, as2d = device.run_job(job).results
    assert sd["tokens"] == as2d["tokens"] == base["tokens"] and base["tokens"][:4] == window["input"]
    assert sum(op.get("accepted", 0) for op in as2d["ops"]) == 3  # anchored on y[0], the rest of the input accepted


def test_aarch64_runner_decodes_audio_with_whisper_on_an_arm_phone(arm_phone, aarch64_runner, tiny_whisper):
    """whisper.cpp on the phone: the encoder's audio prefill is reported, and SD and AS2D with the target's
    early exit as drafter commit target-only's tokens."""
    device = open_adb_device(arm_phone.serial)
    window = {"id": "tone", "audio": {"path": device.model_path(tiny_whisper.audio), "format": "s16"},
              "prompt_text": "", "cap": 8}
    job = {"mode": "decode", "threads": 1, "target": {"path": device.model_path(tiny_whisper.target)},
           "drafter": {"path": device.model_path(tiny_whisper.drafter)}, "windows": [window],
           "methods": [{"name": "target"}, {"name": "sd", "width": 4}, {"name": "as2d"}]}
    out = device.run_job(job)
    assert {e["engine"] for e in out.events if e.get("event") == "loaded"} == {"whisper.cpp"}
    base, sd, as2d = out.results
    assert base["stop_reason"] == "cap" and len(base["tokens"]) == 8
    assert base["audio_prefill_us"] > 0  # the encoder ran on the phone as the window's prefill
    assert sd["tokens"] == as2d["tokens"] == base["tokens"]
