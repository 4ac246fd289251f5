"""Resume files: a crash's torn last line is cut, and only newlines end a line."""

from pathlib import Path

from agent.core.jsonl import resume_lines


def test_a_torn_last_line_is_cut_from_the_file(tmp_path: Path) -> None:
    path = tmp_path / "answers.jsonl"
    path.write_bytes(b'{"id": "a"}\n{"id": "b"}\n{"id": "c", "ans')
    assert resume_lines(path) == [b'{"id": "a"}', b'{"id": "b"}']
    # cut on disk too: the next append starts a line of its own
    assert path.read_bytes() == b'{"id": "a"}\n{"id": "b"}\n'


def test_a_whole_file_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "answers.jsonl"
    path.write_bytes(b'{"id": "a"}\n')
    before = path.stat().st_mtime_ns
    assert resume_lines(path) == [b'{"id": "a"}']
    assert path.stat().st_mtime_ns == before
    assert resume_lines(tmp_path / "missing.jsonl") == []


def test_unicode_line_separators_inside_a_record_do_not_split_it(tmp_path: Path) -> None:
    # pydantic writes U+2028 and U+0085 unescaped; str.splitlines() would cut the record in three
    path = tmp_path / "questions.jsonl"
    path.write_text('{"text": "a\u2028b\x85c"}\n', encoding="utf-8")
    assert [line.decode() for line in resume_lines(path)] == ['{"text": "a\u2028b\x85c"}']
