"""`specbench windows --layout hf`: Hugging Face datasets saved to disk, made here with `datasets` from
synthesized speech: audio as arrays, as an Audio feature's file bytes, and as paths; and bad inputs."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from specbench.cli import main
from specbench.schemas.windows import load_windows
from specbench.world.audio import audio_window_sha256, load_window_audio, read_span
from tests.audio.speech import SENTENCES, speak

datasets = pytest.importorskip("datasets", reason="the hf extra (pip install 'specbench[hf]')")


def invoke(*args):
    result = CliRunner().invoke(main, [str(a) for a in args])
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def speech(tmp_path_factory):
    """utterance id -> (a FLAC file of it at 22.05 kHz, its transcript)."""
    root = tmp_path_factory.mktemp("speech")
    return {utt: (speak(text, root / "audio" / f"{utt}.flac", rate=22050), text) for utt, text in SENTENCES.items()}


def nemo_hashes(speech, tmp_path) -> dict[str, str]:
    """The window hash of each file read through a NeMo manifest: what every layout must give the same audio."""
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text("".join(json.dumps({"audio_filepath": str(path), "duration": read_span(path)[0].shape[0] /
                                            22050, "text": text, "id": utt}) + "\n"
                                for utt, (path, text) in speech.items()))
    assert invoke("windows", manifest, "--out", tmp_path / "nemo.jsonl")[0] == 0
    return {w.window_id: w.window_sha256 for w in load_windows(tmp_path / "nemo.jsonl")}


def test_a_dataset_dict_of_arrays(speech, tmp_path):
    arrays = [read_span(path)[0][:, 0] for path, _ in speech.values()]  # float32 samples, as users keep them
    table = datasets.Dataset.from_dict({
        "id": list(speech), "audio": [{"array": a, "sampling_rate": 22050} for a in arrays],
        "sentence": [text for _, text in speech.values()]})
    datasets.DatasetDict({"test": table, "train": table.select([0])}).save_to_disk(str(tmp_path / "corpus"))
    out = tmp_path / "w.jsonl"
    code, output = invoke("windows", tmp_path / "corpus", "--split", "test", "--text-column", "sentence",
                          "--out", out)  # auto: a directory saved by datasets is hf
    assert code == 0, output
    assert "3 windows" in output and "3 converted to 16 kHz mono" in output
    windows = load_windows(out)
    assert [w.window_id for w in windows] == list(SENTENCES)
    assert [w.reference for w in windows] == list(SENTENCES.values())
    assert windows[0].dataset == "corpus" and windows[0].input.conversion["source_rate"] == 22050
    for window in windows:  # each array became a file the window names, hashed like any audio window
        assert window.input.audio_path == str(tmp_path / "w-audio" / f"{window.window_id}.wav")
        samples, _ = load_window_audio(window.input.audio_path, 0.0, None)
        assert audio_window_sha256(samples, window.instruction, window.template, window.cap) == window.window_sha256
    # the same speech as files in a NeMo manifest is the same windows, hash for hash
    assert {w.window_id: w.window_sha256 for w in windows} == nemo_hashes(speech, tmp_path)


def test_an_audio_feature_and_a_column_of_paths(speech, tmp_path):
    files = [path for path, _ in speech.values()]
    table = datasets.Dataset.from_dict({
        "audio": [{"bytes": path.read_bytes(), "path": path.name} for path in files],
        "text": [text for _, text in speech.values()]}).cast_column("audio", datasets.Audio())
    table.save_to_disk(str(tmp_path / "featured"))
    code, output = invoke("windows", tmp_path / "featured", "--layout", "hf", "--out", tmp_path / "f.jsonl")
    assert code == 0, output
    featured = load_windows(tmp_path / "f.jsonl")
    assert [w.window_id for w in featured] == ["row-0", "row-1", "row-2"]
    # the file's bytes are kept as they are (FLAC), so the hashes are the NeMo manifest's
    assert [w.input.audio_path for w in featured] == [str(tmp_path / "f-audio" / f"row-{i}.flac") for i in range(3)]
    hashes = nemo_hashes(speech, tmp_path)
    assert [w.window_sha256 for w in featured] == list(hashes.values())
    # paths relative to the dataset's directory
    root = tmp_path / "paths"
    table = datasets.Dataset.from_dict({"id": list(speech), "wav": [f"../{p.parent.name}/{p.name}" for p in files],
                                        "text": [text for _, text in speech.values()]})
    table.save_to_disk(str(root))
    (tmp_path / files[0].parent.name).symlink_to(files[0].parent)
    code, output = invoke("windows", root, "--audio-column", "wav", "--out", tmp_path / "p.jsonl")
    assert code == 0, output
    assert [w.window_sha256 for w in load_windows(tmp_path / "p.jsonl")] == list(hashes.values())
    assert not (tmp_path / "p-audio").exists()  # nothing to write: the files are there


@pytest.mark.parametrize("args, message", [
    (("--audio-column", "speech"), "{root}: no column 'speech' (--audio-column; columns: audio, text) (hint: name "
                                   "the column with --audio-column)"),
    (("--text-column", "transcript"), "{root}: no column 'transcript' (--text-column; columns: audio, text) (hint: "
                                      "name the column with --text-column)"),
    (("--split", "test"), "{root}: --split test, but the dataset saved there has no splits (hint: leave out --split)"),
])
def test_a_dataset_without_the_named_columns_is_one_line_and_writes_nothing(tmp_path, args, message):
    root = tmp_path / "corpus"
    datasets.Dataset.from_dict({"audio": [{"array": [0.1] * 1600, "sampling_rate": 16000}],
                                "text": ["hi"]}).save_to_disk(str(root))
    code, output = invoke("windows", root, "--layout", "hf", *args, "--out", tmp_path / "w.jsonl")
    assert code == 1 and output.splitlines() == ["Error: " + message.format(root=root)]
    assert not (tmp_path / "w.jsonl").exists() and not (tmp_path / "w-audio").exists()


def test_an_empty_reference_midway_leaves_no_audio_behind(tmp_path):
    root = tmp_path / "corpus"
    datasets.Dataset.from_dict({"audio": [{"array": [0.1] * 1600, "sampling_rate": 16000}] * 2,
                                "text": ["hi", " "]}).save_to_disk(str(root))
    code, output = invoke("windows", root, "--out", tmp_path / "w.jsonl")
    assert code == 1 and output.splitlines()[0].startswith(f"Error: {root}: row 1: empty transcript")
    assert not (tmp_path / "w.jsonl").exists() and not (tmp_path / "w-audio").exists()
