"""`specbench run --native --sustained` end to end on the emulated phone (a real adb server, the
x86_64 runner on the tiny models): paced arrivals on the runner's clock, the thermal timeline, and
the heating phone's throttling named at the request where its thermal model throttled it
(docs/METHODS.md §6.3 Sustained load). Nothing here asserts how fast anything ran."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from specbench.app.report.sustained import first_throttled, throttle_table
from specbench.cli import main
from specbench.emuphone.thermal import status_at
from specbench.schemas.results import load_results
from specbench.schemas.timeline import load_timeline
from specbench.schemas.windows import make_text_window, save_windows
from tests.devices.phones import connected

pytestmark = pytest.mark.serial  # arrivals and throttling follow the emulated phone's clock and heat

TEXTS = ["hello the world", "in the heat", "a tale of the tin"]


def invoke(*args):
    result = CliRunner().invoke(main, [str(a) for a in args])
    return result.exit_code, result.output


def windows_file(path):
    save_windows(path, [make_text_window(f"w{i}", t, "Repeat this.", 8, "tiny", "test") for i, t in enumerate(TEXTS)])
    return path


def model_statuses(trace, big_c: float) -> list[int]:
    """The thermal model's status at every tick whose BIG zone showed `big_c` (sysfs: millidegrees)."""
    return [tick.status for tick in trace if round(round(tick.temps_c[0], 3) * 1000) == round(big_c * 1000)]


@pytest.fixture
def hot_phone(adb_server, runner, tmp_path, monkeypatch):
    """The x86_64 phone whose synthetic thermal model heats within a few requests (x86-hot-emu.yaml)."""
    with connected(adb_server, "x86-hot-emu.yaml", tmp_path / "phone", monkeypatch) as handle:
        yield handle


def test_realtime_arrivals_follow_the_rate_on_the_runners_clock(hot_phone, tiny, tmp_path):
    windows = windows_file(tmp_path / "windows.jsonl")
    out = tmp_path / "realtime"
    code, output = invoke("run", windows, "--native", "--device", hot_phone.serial, "--target", tiny.target,
                          "--methods", "target", "--sustained", "2s", "--rate", 4, "--out", out)
    assert code == 0, output
    timeline = load_timeline(out)
    # the schedule: request k arrives k / rate after the stream's zero, decodes window k mod n
    assert [t.request for t in timeline] == list(range(len(timeline))) and len(timeline) == 8
    assert [t.arrival_s for t in timeline] == [pytest.approx(k * 0.25, abs=1e-6) for k in range(8)]
    assert [t.window_id for t in timeline] == [f"w{k % 3}" for k in range(8)]
    assert all(t.arrival_s <= t.start_s <= t.end_s for t in timeline)  # a request never starts before it arrives
    assert all(b.start_s >= a.end_s for a, b in zip(timeline, timeline[1:], strict=False))  # one at a time
    assert all(t.pace == "realtime" and t.cooldown and t.lossless and t.tokens > 0 for t in timeline)
    assert all(t.thermal_status is not None and "thermal_zone0:BIG" in t.zones_c for t in timeline)
    assert all(set(t.max_freq_khz) == {"policy0", "policy1"} for t in timeline)
    _, rows = load_results(out)
    # one row per window: the median over its requests, every request's decode in samples_s
    assert sorted(rows["window_id"]) == ["w0", "w1", "w2"]
    assert sorted(len(s) for s in rows["samples_s"]) == [2, 3, 3]


def test_back_to_back_requests_arrive_when_the_previous_ends_and_throttling_is_named(hot_phone, tiny, tmp_path):
    windows = windows_file(tmp_path / "windows.jsonl")
    out = tmp_path / "b2b"
    code, output = invoke("run", windows, "--native", "--device", hot_phone.serial, "--target", tiny.target,
                          "--drafter", f"near={tiny.near}", "--methods", "target,sd", "--method", "sd:W=3",
                          "--sustained", "5s", "--pace", "back-to-back", "--no-cooldown", "--out", out)
    assert code == 0, output
    timeline = load_timeline(out)
    streams = {t.config: [r for r in timeline if r.config == t.config] for t in timeline}
    assert list(streams) == ["target", "sd[W=3,drafter=near]"] and [s[0].stream for s in streams.values()] == [0, 1]
    for records in streams.values():
        assert records[0].arrival_s == 0.0
        # no idle gap in the schedule: each request arrives the instant the previous one ends
        assert all(b.arrival_s == a.end_s for a, b in zip(records, records[1:], strict=False))
        assert all(t.arrival_s <= t.start_s <= t.end_s and not t.cooldown for t in timeline)
    model = hot_phone.phone.description.thermal_model
    first = [t for t in streams["target"] if t.thermal_status][0]
    named = first_throttled(streams["target"])
    # the phone starts cool (31 °C) and throttles within seconds of decoding
    assert named is not None and named.request == first.request > 0
    # per the thermal model: each earlier request's snapshot read temperatures of a tick at status 0 (the
    # model's own trace says so), and the named one read status >= 1, with every policy capped
    trace = hot_phone.phone.thermal.trace()
    earlier = [t for t in streams["target"] if t.request < named.request]
    for record in earlier:
        ticks = model_statuses(trace, record.zones_c["thermal_zone0:BIG"])
        assert ticks and set(ticks) == {0} and status_at(model, max(record.zones_c.values())) == 0
        assert record.thermal_status == 0 and record.max_freq_khz == {"policy0": 1800000, "policy1": 2800000}
    assert named.thermal_status >= 1
    # the caps go with the status: a snapshot reads the status and the cpufreq files one after the other,
    # and the phone cools a little between requests, so a tick between the reads can show one status beside
    # the other's caps; each capped snapshot is next to one that read status >= 1
    after = [t for t in streams["target"] if t.request >= named.request]
    capped = [set(t.max_freq_khz.values()) == {model.throttled_max_freq_khz} for t in after]
    hot = [t.thermal_status >= 1 for t in after]
    assert any(capped), [(t.thermal_status, t.max_freq_khz) for t in after[:5]]
    assert all(any(hot[max(i - 1, 0):i + 2]) for i, c in enumerate(capped) if c)
    # heat carries over: with no cool-down, the second stream starts hotter than the first did
    second = streams["sd[W=3,drafter=near]"]
    assert max(second[0].zones_c.values()) > max(streams["target"][0].zones_c.values()) + 3
    table = throttle_table([(out.name, timeline)])
    assert table.loc[table["config"] == "target", "first_throttled_request"].item() == named.request


@pytest.mark.parametrize(("args", "message"), [
    (["--sustained", "0s"], "--sustained 0s: expected a duration such as 120s, 10m or 1h, from 1 s to 24 h"),
    (["--sustained", "ten"], "--sustained ten: expected a duration"),
    (["--sustained", "10s"], "--pace realtime: window 'w0' is a text window, so its requests need a stated rate: "
                             "pass --rate R (requests per second)"),
    (["--sustained", "10s", "--pace", "back-to-back", "--rate", "2"], "--rate 2 is for --pace realtime"),
    (["--pace", "back-to-back"], "--pace is for --sustained runs (add --sustained DURATION)"),
    (["--sustained", "10s", "--rate", "2", "--runs", "3"], "--runs is not for --sustained runs"),
    (["--sustained", "10s", "--rate", "2", "--resume"], "--resume is not for --sustained runs"),
])
def test_bad_sustained_flags_are_one_line_errors(tiny, tmp_path, args, message):
    windows = windows_file(tmp_path / "windows.jsonl")
    code, output = invoke("run", windows, "--native", "--device", "local", "--target", tiny.target,
                          "--methods", "target", "--out", tmp_path / "out", *args)
    assert code == 1 and message in output and len(output.strip().splitlines()) <= 2, output


def test_rate_out_of_range_is_refused_by_the_flag(tiny, tmp_path):
    code, output = invoke("run", windows_file(tmp_path / "w.jsonl"), "--native", "--target", tiny.target,
                          "--sustained", "10s", "--rate", "0", "--out", tmp_path / "out")
    assert code == 2 and "--rate" in output


def audio_window(window_id: str, duration_s: float | None):
    from specbench.schemas.windows import InputView, Split, Window

    return Window(window_id, "0" * 64, InputView("audio", audio_path="a.wav", duration_s=duration_s),
                  "Transcribe the audio.", "model", 32, "d", Split.TEST)


def test_realtime_gaps_are_the_audio_durations_and_the_rate_for_the_rest():
    from specbench.errors import SpecbenchError
    from specbench.world.decode_run import SustainedLoad
    from specbench.world.sustained import arrival_gaps_us, parse_duration

    text = make_text_window("t", "hello", "Repeat.", 8, "d", "test")
    windows = [audio_window("a", 12.0), audio_window("b", 7.5), text]
    assert arrival_gaps_us(windows, SustainedLoad(60, "realtime", rate_per_s=0.5)) == [12_000_000, 7_500_000, 2_000_000]
    assert arrival_gaps_us(windows[:2], SustainedLoad(60, "realtime")) == [12_000_000, 7_500_000]
    assert arrival_gaps_us(windows, SustainedLoad(60, "back-to-back")) is None
    with pytest.raises(SpecbenchError, match="window 'c' is an audio window with no duration_s"):
        arrival_gaps_us([audio_window("c", None)], SustainedLoad(60, "realtime"))
    assert [parse_duration(t) for t in ("120s", "10m", "1.5h", "90")] == [120.0, 600.0, 5400.0, 90.0]
    for bad in ("0.5s", "25h", "-3s", "10 minutes"):
        with pytest.raises(SpecbenchError, match=f"--sustained {bad}: expected a duration"):
            parse_duration(bad)
