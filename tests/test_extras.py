"""Optional extras: without one, the command that needs it fails with one line naming the extra.

The library is made unimportable in a fresh interpreter (`sys.modules[name] = None`, what an
environment without it looks like to `import`), then the real CLI runs on real inputs.
"""

from __future__ import annotations

import json
import os
import re
import socket
import struct
import subprocess
import sys
import wave
from pathlib import Path

import pytest
from click.testing import CliRunner

from specbench.cli import main
from specbench.extras import EXTRAS
from tests.helpers import write_study

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
"""The checkout under test comes first, whatever the working directory."""
# argv[1]: the modules to hide, comma-separated; the rest is the specbench command line
WITHOUT = ("import runpy, sys; [sys.modules.__setitem__(m, None) for m in sys.argv.pop(1).split(',')]; "
           "runpy.run_module('specbench', run_name='__main__')")


def without(modules: str, *args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", WITHOUT, modules, *map(str, args)], cwd=cwd, env=ENV,
                          capture_output=True, text=True, timeout=300)


def message(extra: str, what: str) -> str:
    return f"Error: {what} needs the '{extra}' extra: pip install 'specbench[{extra}]'\n"


def test_listing_phones_without_adbutils(tmp_path):
    done = without("adbutils", "devices", "--adb-port", 1, cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (1, "", message("adb", "the adb device"))


def test_profiling_a_phone_without_adbutils(tmp_path):
    with socket.socket() as server:  # something listens at the adb address, so the phone is looked up there
        server.bind(("127.0.0.1", 0))
        server.listen()
        out = tmp_path / "p.yaml"
        (tmp_path / "t.gguf").write_bytes(b"GGUF")  # never loaded: the phone is opened first
        done = without("adbutils", "profile", "SERIAL1", "--adb-port", server.getsockname()[1], "--target",
                       "t.gguf", "--out", out, cwd=tmp_path)
    assert (done.returncode, done.stderr) == (1, message("adb", "the adb device"))
    assert not out.exists()


def test_audio_windows_without_soundfile(tmp_path):
    with wave.open(str(tmp_path / "a.wav"), "wb") as audio:
        audio.setnchannels(1)
        audio.setsampwidth(2)
        audio.setframerate(16000)
        audio.writeframes(struct.pack("<1600h", *[1000] * 1600))
    (tmp_path / "manifest.json").write_text(json.dumps({"audio_filepath": "a.wav", "text": "hi", "duration": 0.1}))
    done = without("soundfile", "windows", "manifest.json", "--out", "w.jsonl", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr == "Error: manifest.json: line 1: " + message("audio", "reading audio").removeprefix("Error: ")
    assert not (tmp_path / "w.jsonl").exists()


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("study")
    _, windows, traces, profiles = write_study(root, n_windows=4, n_devices=1)
    out = root / "results"
    done = CliRunner().invoke(main, ["run", str(windows), "--traces", str(traces), "--profile", str(profiles[0]),
                                     "--drafter", "small", "--methods", "target,sd", "--out", str(out)])
    assert done.exit_code == 0, done.output
    return out


@pytest.mark.parametrize("flag", ["--plots", "--bundle"])
def test_report_figures_without_matplotlib(results, tmp_path, flag):
    done = without("matplotlib", "report", results, flag, tmp_path / "out", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == message("plots", "drawing figures (report --plots, --bundle)")
    assert not (tmp_path / "out").exists()


def test_a_broken_extra_names_what_is_missing(results, tmp_path):
    # matplotlib there, but a library it imports is not: the message adds the import error
    done = without("PIL", "report", results, "--plots", tmp_path / "out", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr == message("plots", "drawing figures (report --plots, --bundle)")[:-1] + \
        " (import of PIL halted; None in sys.modules)\n"


def test_the_emulated_phone_without_adbutils(tmp_path):
    done = subprocess.run([sys.executable, "-c", "import sys; sys.modules['adbutils'] = None\n"
                           "from specbench.emuphone.adb_server import bundled_adb_path; bundled_adb_path()"],
                          cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == ("specbench.errors.SpecbenchError: " +
                                            message("adb", "the emulated phone's adb server")[len("Error: "):-1])


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~\[;\s]", r, maxsplit=1)[0].lower() for r in requirements}


def test_hf_windows_without_datasets(tmp_path):
    (tmp_path / "corpus").mkdir()
    done = without("datasets", "windows", "corpus", "--layout", "hf", "--out", "w.jsonl", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == message("hf", "--layout hf (a Hugging Face dataset saved to disk)")
    assert not (tmp_path / "w.jsonl").exists() and not (tmp_path / "w-audio").exists()


def test_tracing_on_ray_without_ray(tmp_path):
    _, windows, _, _ = write_study(tmp_path, n_windows=2, n_devices=1)
    (tmp_path / "t.gguf").write_bytes(b"GGUF")
    done = without("ray", "trace", windows, "--target", tmp_path / "t.gguf", "--drafter", f"d={tmp_path / 't.gguf'}",
                   "--ray", "--out", tmp_path / "ray-traces", cwd=tmp_path)
    assert done.returncode == 1 and done.stderr == message("ray", "trace --ray")
    assert not (tmp_path / "ray-traces").exists()


def test_pyproject_declares_each_extra_and_all():
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    optional = project["optional-dependencies"]
    core = _names(project["dependencies"])
    for extra, modules in EXTRAS.items():
        assert _names(optional[extra]) == set(modules), extra  # these libraries' module and package names agree
        assert not core & set(modules), f"{extra}: {sorted(core & set(modules))} is also a core dependency"
    # ray (`trace --ray`) is a cluster engine and datasets (`--layout hf`) a large library, installed on
    # purpose, not one of every study's parts
    assert optional["all"] == [f"specbench[{','.join(sorted(set(EXTRAS) - {'ray', 'hf'}))}]"]
    assert "specbench[all,hf]" in optional["test"]  # the tests use every part but ray
    assert "jiwer" in core  # WER/CER: every report with answer texts
