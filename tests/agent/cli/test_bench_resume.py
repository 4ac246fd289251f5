"""A benchmark's questions.jsonl after a crash: torn last line cut, each question graded once."""

import json
from pathlib import Path

from agent.cli.bench import load_graded, run_bench
from agent.core.settings import Settings
from tests.agent.conftest import graded_row, make_session, write_mini_set


def test_a_record_holding_unicode_line_separators_is_read_back_whole(tmp_path: Path) -> None:
    path = tmp_path / "questions.jsonl"
    row = graded_row(True, True, id="q1", answer={"answer": "PDF text\u2028with a separator\x85"})
    path.write_text(row.model_dump_json() + "\n", encoding="utf-8")
    assert load_graded(path) == {row.key: row}


async def test_a_resume_after_a_torn_append_grades_each_question_once(
    index_dir: Path, settings: Settings, tmp_path: Path
) -> None:
    session = make_session(index_dir, settings)
    egfr = next(p for p in session.library.papers if p.key.startswith("Egfr"))
    set_path = write_mini_set(tmp_path / "mini.jsonl", egfr.doc_id)
    out = tmp_path / "out"
    first = await run_bench([set_path], session, out, limit=None, seed=0, withhold=False, progress=False)
    results = out / "questions.jsonl"
    whole = results.read_bytes()
    last = whole.rstrip(b"\n").rsplit(b"\n", 1)[-1]
    results.write_bytes(whole[: len(whole) - len(last) - 1] + last[: len(last) // 2])  # a kill mid-append

    again = await run_bench([set_path], session, out, limit=None, seed=0, withhold=False, progress=False)
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert sorted(r["id"] for r in rows) == ["1", "2"]
    assert again["sets"]["mini"]["n"] == 2
    assert again["sets"]["mini"]["accuracy"] == first["sets"]["mini"]["accuracy"]
