import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent.cli.main import cli
from agent.llm.testing import FunctionLLM
from tests.agent.conftest import good_answer, keyword_judge, keyword_summary

HASH = ["--set", "embedding.model=hash", "--set", "evidence.min_score=5"]


@pytest.fixture(autouse=True)
def scripted_models(monkeypatch: pytest.MonkeyPatch) -> None:
    roles = {
        "summary": FunctionLLM(keyword_summary),
        "judge": FunctionLLM(lambda r: "No", score_function=keyword_judge),
        "answer": FunctionLLM(good_answer),
    }
    roles["agent"] = roles["answer"]
    monkeypatch.setattr("agent.api.resolve_role_llms", lambda settings: roles)


def test_ask_json_has_the_documented_fields(index_dir: Path) -> None:
    result = CliRunner().invoke(
        cli,
        ["--json", *HASH, "ask", "Which inhibitor remains active against T790M?", "--index", str(index_dir)],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["status"] == "answered"
    assert "[Egfr2017]" in data["answer"]
    claim = data["claims"][0]
    assert set(claim) >= {"text", "citations", "verdict"} and claim["verdict"] == "supported"
    ev = data["evidence"][0]
    assert set(ev) >= {"key", "doc_id", "text"} and ev["page_start"] is None
    assert data["references"][0]["key"] == "Egfr2017"
    assert set(data["usage"]) == {"summary", "answer", "judge"}  # judge: does the claim answer the question


def test_ask_human_output_shows_steps_answer_and_verification(index_dir: Path) -> None:
    result = CliRunner().invoke(
        cli, [*HASH, "ask", "Which inhibitor remains active against T790M?", "--index", str(index_dir)]
    )
    assert result.exit_code == 0, result.output
    out = result.output
    assert "→ paper_search" in out and "→ verify_citations" in out
    assert "References" in out and "Verification" in out and "status answered" in out


def test_ask_papers_folder_builds_an_index(tmp_path: Path) -> None:
    papers = tmp_path / "papers"
    papers.mkdir()
    from tests.tools.conftest import EGFR

    (papers / "egfr.md").write_text(EGFR)
    result = CliRunner().invoke(
        cli, ["--json", *HASH, "ask", "Which inhibitor works on T790M?", "--papers", str(papers)]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["status"] == "answered"


def test_batch_writes_one_line_per_question(index_dir: Path, tmp_path: Path) -> None:
    questions = tmp_path / "q.jsonl"
    questions.write_text(
        json.dumps({"id": "a", "question": "Which inhibitor works on T790M?"})
        + "\n"
        + json.dumps({"id": "b", "question": "What does TP53 encode?"})
        + "\n"
    )
    out = tmp_path / "answers.jsonl"
    result = CliRunner().invoke(
        cli,
        [
            "--json",
            *HASH,
            "batch",
            str(questions),
            "-o",
            str(out),
            "--index",
            str(index_dir),
            "--concurrency",
            "2",
        ],
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["answers"] == 2
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["id"] for r in rows) == ["a", "b"]
    assert all({"status", "answer", "claims", "evidence", "references", "usage"} <= set(r) for r in rows)
