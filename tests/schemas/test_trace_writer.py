"""TraceWriter: how another decoder writes a trace. The README's example runs here as written,
and every line it writes is validated by the loader first (bad windows leave the file as it was)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from specbench.cli import main
from specbench.core.methods.base import Model, TargetOracle, TraceDrafts
from specbench.core.methods.configs import SdConfig
from specbench.core.methods.sd import decode_sd
from specbench.errors import SpecbenchError
from specbench.schemas.traces import ModelRef, TraceWriter, load_trace_dir, load_trace_file

README = Path(__file__).resolve().parents[2] / "README.md"
TARGET, DRAFTER = ModelRef("big", "b" * 64, 49152), ModelRef("mine", "m" * 64, 49152)


def readme_example() -> str:
    section = README.read_text().split("## Writing traces from another decoder", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readme_example_writes_a_trace_that_replays(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(compile(readme_example(), "README.md", "exec"), {})
    trace_file = load_trace_file(tmp_path / "traces" / "mydrafter.jsonl")
    assert trace_file.target == ModelRef("big", "sha256 of big.gguf", 49152)
    trace = trace_file.windows["w1"]
    decoded = decode_sd(TargetOracle(trace.y), TraceDrafts(trace, "mydrafter"), 32, trace.n_prompt,
                        trace.n_prompt_drafter, SdConfig(width=5))
    assert list(decoded.tokens) == [791, 5679, 374, 21811, 13, 2]
    assert [(op.accepted, op.committed) for op in decoded.ops if op.model is Model.TARGET] == [(4, 5)]
    # it loads as a traces directory; a width whose rounds reach an unrecorded prefix is refused
    assert load_trace_dir(tmp_path / "traces")["mydrafter"].windows["w1"].text == "The dog sleeps."
    with pytest.raises(SpecbenchError, match=r"no draft row at t=3, .*missing context"):
        decode_sd(TargetOracle(trace.y), TraceDrafts(trace, "mydrafter"), 32, 24, 24, SdConfig(width=2))


def _window(**changes):
    return {"window_id": "w1", "window_sha256": "0" * 64, "y": np.array([5, 9, 2], dtype=np.int32),
            "stop_reason": "eos", "n_prompt": 7, **changes}


def test_a_bad_window_is_refused_with_the_loaders_message_and_nothing_is_appended(tmp_path):
    path = tmp_path / "t.jsonl"
    writer = TraceWriter(path, TARGET, DRAFTER)
    before = path.read_text()
    with pytest.raises(SpecbenchError, match=r"window 'w1': key 'stop_reason': expected 'eos' or 'cap', got 'done'"):
        writer.write_window(**_window(stop_reason="done"))
    with pytest.raises(SpecbenchError, match=r"key 'drafts\.conf\[0\]': expected a list of 1 probabilities"):
        writer.write_window(**_window(drafts={"k_max": 2, "tokens": [[5], None, None], "conf": [[0.5, 0.5], None,
                                                                                             None]}))
    with pytest.raises(SpecbenchError, match=r"key 'drafts\.tokens': expected 3 rows"):
        writer.write_window(**_window(drafts={"k_max": 2, "tokens": [[5]], "conf": [[0.5]]}))
    with pytest.raises(SpecbenchError, match=r"unknown key"):
        writer.write_window(**_window(logits=[0.1]))
    assert path.read_text() == before


def test_windows_append_one_at_a_time_and_a_resumed_file_continues(tmp_path):
    path = tmp_path / "t.jsonl"
    writer = TraceWriter(path, TARGET, DRAFTER, templates={"target": "chatml", "drafter": "model"})
    written = writer.write_window(**_window(drafts={"k_max": 2, "tokens": [None, np.array([9, 2]), None],
                                                    "conf": [None, np.array([0.75, 0.5]), None]}))
    assert not written.drafts.has_row(0) and written.drafts.tokens[1].tolist() == [9, 2]
    with pytest.raises(SpecbenchError, match="window 'w1' is already in the file"):
        writer.write_window(**_window())
    with pytest.raises(SpecbenchError, match="already exists"):
        TraceWriter(path, TARGET, DRAFTER)
    with path.open("a") as handle:
        handle.write('{"window_id": "w2", "y": [1')  # an interrupted write
    with pytest.raises(SpecbenchError, match="the drafter model differs"):
        TraceWriter(path, TARGET, ModelRef("other", "o" * 64, 49152), {"target": "chatml", "drafter": "model"}, resume=True)
    resumed = TraceWriter(path, TARGET, DRAFTER, {"target": "chatml", "drafter": "model"}, resume=True)
    assert resumed.done == {"w1": "0" * 64}
    resumed.write_window(**_window(window_id="w2", y=[4, 2]))
    loaded = load_trace_file(path)
    assert list(loaded.windows) == ["w1", "w2"] and loaded.templates == {"target": "chatml", "drafter": "model"}
    assert loaded.windows["w1"].drafts.recorded.tolist() == [False, True, False]


def test_a_header_with_a_bad_template_is_refused_before_the_file_exists(tmp_path):
    with pytest.raises(SpecbenchError, match=r"key 'templates'"):
        TraceWriter(tmp_path / "t.jsonl", TARGET, DRAFTER, templates={"target": "chatml"})
    assert not (tmp_path / "t.jsonl").exists()


def test_the_import_command_is_documented_with_an_example():
    result = CliRunner().invoke(main, ["import-trace", "--help"])
    assert result.exit_code == 0 and "Example:" in result.output


def test_the_vocabulary_size_is_read_from_the_gguf_metadata(tmp_path):
    """What llama.cpp counts as n_vocab: the length of tokenizer.ggml.tokens, found past keys
    of every kind (strings, numbers, arrays of strings and numbers)."""
    gguf = pytest.importorskip("gguf")
    from specbench.world.tracing import gguf_n_vocab

    path = tmp_path / "m.gguf"
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_string("general.name", "tiny")
    writer.add_uint32("llama.context_length", 64)
    writer.add_array("tokenizer.ggml.merges", ["a b", "ab c"])
    writer.add_array("tokenizer.ggml.scores", [0.5, 0.25, 0.125])
    writer.add_float32("llama.rope.freq_base", 10000.0)
    writer.add_token_list(["<s>", "a", "b", "ab", "c"])
    writer.add_tensor("w", np.zeros((2, 2), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    assert gguf_n_vocab(path) == 5
    no_vocab = tmp_path / "none.gguf"
    no_vocab.write_bytes(path.read_bytes().replace(b"tokenizer.ggml.tokens", b"tokenizer.ggml.tokenz"))
    with pytest.raises(SpecbenchError, match="no tokenizer.ggml.tokens in the GGUF metadata"):
        gguf_n_vocab(no_vocab)
    (tmp_path / "short.gguf").write_bytes(path.read_bytes()[:40])
    with pytest.raises(SpecbenchError, match="cut short"):
        gguf_n_vocab(tmp_path / "short.gguf")
