"""Line-oriented files: a user's (question sets, batch questions) and the runs' own resume files.

A file given on the command line may be anything: a gzipped corpus, a binary, a JSON array.
Each problem becomes one :class:`ConfigError` naming the file (and line) and the format the
caller expected, instead of a decoding error from deep inside a run.

A resume file (batch answers, a benchmark's ``questions.jsonl``) is appended one whole line at
a time, so the only damage a crash can do is a torn *last* line: :func:`resume_lines` cuts it.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agent.core.errors import ConfigError

__all__ = ["json_objects", "read_text", "resume_lines"]


def read_text(path: Path, expected: str) -> str:
    """The file's text, gunzipped when it is gzip; unreadable or binary content is a ConfigError."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it ({exc.strerror}); {expected}") from exc
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise ConfigError(f"{path}: a damaged gzip file ({exc}); {expected}") from exc
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: a binary file, not UTF-8 text (byte {exc.start}); {expected}") from exc
    if "\x00" in text:
        raise ConfigError(f"{path}: a binary file (NUL bytes); {expected}")
    return text


def json_objects(path: Path, text: str, expected: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for each non-blank line; a line that is not a JSON object raises."""
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}:{n}: not JSON ({exc.msg}, column {exc.colno}); {expected}") from exc
        if not isinstance(row, dict):
            raise ConfigError(f"{path}:{n}: a JSON {type(row).__name__}, not an object; {expected}")
        yield n, row


def resume_lines(path: Path) -> list[bytes]:
    """The whole lines of a resume file, after cutting from the file a last line with no newline.

    That line is an append a crash interrupted; its record is redone. Left in the file, the
    next append would be glued to it and a good record would become one unreadable line. Split
    on ``\\n`` only: ``str.splitlines()`` also splits at U+2028 and U+0085, which
    pydantic's JSON writes unescaped and PDF text does contain, tearing a whole record in two.
    """
    if not path.exists():
        return []
    data = path.read_bytes()
    end = data.rfind(b"\n") + 1
    if end < len(data):
        with path.open("r+b") as fh:
            fh.truncate(end)
            fh.flush()
            os.fsync(fh.fileno())
    return data[:end].split(b"\n")[:-1]
