"""The file helpers every writer shares: JSON lines appended after an interruption."""

from __future__ import annotations

import json

from specbench.schemas.fileio import append_jsonl, drop_cut_line, safe_name


def lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_append_drops_a_line_an_interruption_cut_short(tmp_path):
    path = tmp_path / "rows.jsonl"
    append_jsonl(path, [{"n": 1}, {"n": 2}])
    with open(path, "a") as handle:
        handle.write('{"n": 3, "cut')  # killed mid-write: no newline
    append_jsonl(path, [{"n": 4}])
    assert lines(path) == [{"n": 1}, {"n": 2}, {"n": 4}]


def test_a_cut_first_line_and_a_long_cut_line_are_dropped_whole(tmp_path):
    path = tmp_path / "trace.jsonl"
    path.write_text('{"header": ')
    drop_cut_line(path)
    assert path.read_bytes() == b""
    path.write_text('{"n": 1}\n' + "x" * 200_000)  # longer than one block read from the end
    drop_cut_line(path)
    assert path.read_text() == '{"n": 1}\n'


def test_append_creates_the_file_and_writes_nothing_for_no_documents(tmp_path):
    path = tmp_path / "new.jsonl"
    append_jsonl(path, [])
    assert not path.exists()
    append_jsonl(path, iter([{"a": [1, 2]}]))
    assert path.read_text() == '{"a":[1,2]}\n'


def test_safe_name_keeps_a_serial_readable():
    assert safe_name("127.0.0.1:5555") == "127.0.0.1-5555" and safe_name("R5CT20 XYZ/1") == "R5CT20-XYZ-1"
