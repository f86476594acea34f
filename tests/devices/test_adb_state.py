"""Parsing what phones print (pure): getprop, the snapshot script's output, --cores, masks."""

from __future__ import annotations

import pytest

from specbench.errors import SpecbenchError
from specbench.world.devices import adb_state as st
from specbench.world.devices.adb import runner_dirs

CLUSTERS = [{"cpus": [0, 1, 2, 3], "max_freq_khz": 1704000}, {"cpus": [4, 5, 6, 7], "max_freq_khz": 2367000},
            {"cpus": [8], "max_freq_khz": 2910000}]


def test_identity_prefers_soc_model_then_board_platform():
    props = st.parse_getprop("[ro.product.model]: [Pixel 8]\n[ro.board.platform]: [zuma]\n"
                             "[ro.product.cpu.abilist]: [arm64-v8a,armeabi-v7a]\n[ro.product.cpu.abi]: [arm64-v8a]\n")
    ident = st.identity(props)
    assert (ident["model"], ident["soc"], ident["abilist"]) == ("Pixel 8", "zuma", ["arm64-v8a", "armeabi-v7a"])
    assert st.identity(props | {"ro.soc.model": "Tensor G3"})["soc"] == "Tensor G3"


def test_unreadable_values_are_recorded_as_unavailable_not_zero():
    text = ("/sys/devices/system/cpu/cpufreq/policy0/related_cpus:0-3\n"
            "/sys/class/thermal/thermal_zone0/type:cpu-big\n@@thermalservice\n@@battery\n@@end\n")
    snap = st.parse_snapshot(text)
    assert snap["clusters"] == [{"policy": "policy0", "cpus": [0, 1, 2, 3], "max_freq_khz": "unavailable",
                                 "cur_freq_khz": "unavailable", "scaling_max_freq_khz": "unavailable",
                                 "governor": "unavailable"}]
    assert snap["thermal_c"] == {"thermal_zone0:cpu-big": "unavailable"}
    assert snap["thermal"] == {"status": "unavailable", "hal_c": {}}
    assert snap["battery"] == {"level_percent": "unavailable", "temp_c": "unavailable", "charging": "unavailable"}
    assert st.hottest_c(snap) is None


def test_cores_by_name_or_number_and_their_mask():
    assert st.pick_cores("big", CLUSTERS, 9) == [4, 5, 6, 7, 8]
    assert st.pick_cores("prime", CLUSTERS, 9) == [8] and st.pick_cores("little", CLUSTERS, 9) == [0, 1, 2, 3]
    assert st.pick_cores("all", CLUSTERS, 9) == list(range(9)) and st.pick_cores("4-5,8", CLUSTERS, 9) == [4, 5, 8]
    assert st.cpu_mask([4, 5, 6, 7]) == "f0" and st.cpu_mask([8]) == "100"
    assert st.pick_cores("big", CLUSTERS[:1], 4) == [0, 1, 2, 3]  # one cluster: all of it
    with pytest.raises(SpecbenchError, match="--cores 'huge'"):
        st.pick_cores("huge", CLUSTERS, 9)
    with pytest.raises(SpecbenchError, match="this phone has CPUs 0-8"):
        st.pick_cores("7-12", CLUSTERS, 9)


def test_runner_builds_per_abi():
    assert runner_dirs("arm64-v8a", gpu=False) == ("arm64-v8a-android", "aarch64-linux")
    assert runner_dirs("arm64-v8a", gpu=True)[0] == "arm64-v8a-android-opencl"
    assert runner_dirs("x86_64", gpu=False) == ("x86_64-linux",) and runner_dirs("mips", gpu=False) == ()
