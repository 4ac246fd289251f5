import gzip
import json
from pathlib import Path

import pytest

from agent.api import load_questions
from agent.bench.grading import load_set
from agent.core.errors import ConfigError
from tests.agent.cli.conftest import invoke, write_corpus

GOOD = {"id": "1", "question": "Which?", "ideal": "x", "distractors": ["y", "z"]}


def write(path: Path, content: str | bytes) -> Path:
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return path


@pytest.mark.parametrize(
    ("name", "content", "says"),
    [
        (
            "corpus.jsonl.gz",
            gzip.compress(b'{"doc_id": "d", "title": "T", "text": "body"}\n'),
            ":1: no question, ideal, distractors field (it has doc_id, text, title); it looks like a corpus",
        ),
        ("blob.jsonl", b"\x00\x01\x02\xff\xfe", ": a binary file"),
        ("latin.jsonl", "caf\xe9".encode("latin-1"), ": a binary file, not UTF-8 text (byte 3)"),
        ("bad.jsonl", json.dumps(GOOD) + "\n\n{not json\n", ":3: not JSON (Expecting property name"),
        ("list.jsonl", "[1, 2]\n", ":1: a JSON list, not an object"),
        ("q.jsonl", json.dumps({**GOOD, "question": ""}) + "\n", ":1: 'question' is not a non-empty string"),
        ("wrong.jsonl", json.dumps({**GOOD, "tag": 5}) + "\n", ":1: tag: Input should be a valid string"),
        ("empty.jsonl", "\n\n", ": no questions in the file"),
        ("broken.jsonl.gz", b"\x1f\x8b\x08\x00garbage", ": a damaged gzip file"),
    ],
)
def test_load_set_names_the_file_line_and_format(
    tmp_path: Path, name: str, content: str | bytes, says: str
) -> None:
    path = write(tmp_path / name, content)
    with pytest.raises(ConfigError) as info:
        load_set(path)
    message = str(info.value)
    assert message.startswith(str(path)) and says in message, message
    assert "expected JSONL (gzipped too), one question a line" in message
    assert "\n" not in message


def test_load_set_reads_a_gzipped_set_and_names_it_without_suffixes(tmp_path: Path) -> None:
    path = write_corpus(tmp_path / "litqa.jsonl.gz", [GOOD, {**GOOD, "id": "2", "ideal": None}])
    first, second = load_set(path)
    assert first.ideal == "x" and first.tag == "litqa" and not second.answerable


@pytest.mark.parametrize(
    ("name", "content", "says"),
    [
        ("blob.jsonl", b"PK\x03\x04\x00\x00", "a binary file (NUL bytes)"),
        ("png.jsonl", b"\x89PNG\r\n\x1a\n", ": a binary file, not UTF-8 text (byte 0)"),
        ("gz.jsonl", gzip.compress(b"\xff\xfe\x00"), ": a binary file, not UTF-8 text"),
        ("bad.jsonl", '{"question": "a"}\n\n{oops\n', ":3: not JSON (Expecting property name"),
        ("list.jsonl", '"just a string"\n', ":1: a JSON str, not an object"),
        ("noq.jsonl", '{"text": "a"}\n', ":1: no 'question' field"),
        ("q.json", '{"question": "a"}\n', "unknown questions file type"),
    ],
)
def test_load_questions_names_the_file_line_and_format(
    tmp_path: Path, name: str, content: str | bytes, says: str
) -> None:
    path = write(tmp_path / name, content)
    with pytest.raises(ConfigError) as info:
        load_questions(path)
    message = str(info.value)
    assert message.startswith(str(path)) and says in message, message
    assert (
        'expected a .txt file (one question a line) or .jsonl (one JSON object a line with "question"'
        in message
    )


def test_load_questions_reads_gzipped_files(tmp_path: Path) -> None:
    jsonl = write(tmp_path / "q.jsonl.gz", gzip.compress(b'{"id": "a", "question": "Q1?"}\n'))
    txt = write(tmp_path / "q.txt.gz", gzip.compress(b"Q2?\n\nQ3?\n"))
    assert load_questions(jsonl) == [{"id": "a", "question": "Q1?"}]
    assert load_questions(str(txt)) == [{"question": "Q2?"}, {"question": "Q3?"}]
    assert load_questions("What is p53.") == [{"question": "What is p53."}]


def test_bench_on_a_corpus_file_is_a_one_line_error(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "abstracts.jsonl.gz", [{"doc_id": "d", "title": "T", "text": "x"}])
    result = invoke("bench", str(corpus), "--out", str(tmp_path / "o"), "-q")
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {corpus}:1: no question, ideal, distractors field")
    assert result.stderr.count("\n") == 1 and "UnicodeDecodeError" not in result.stderr


def test_batch_on_a_binary_file_is_a_one_line_error(tmp_path: Path) -> None:
    blob = write(tmp_path / "questions.jsonl", b"\x1f\x8b\x08\x00\x00")
    result = invoke("batch", str(blob), "-q", "-o", str(tmp_path / "a.jsonl"))
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {blob}: a damaged gzip file") and result.stderr.count("\n") == 1
