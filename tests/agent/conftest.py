from pathlib import Path

import pytest

from agent.api import Session
from agent.bench.grading import Graded
from agent.core.settings import Settings, load_settings
from agent.llm.testing import FunctionLLM, Request
from tests.tools.conftest import EGFR, INJECTION, TP53, build_three_sources, keyword_judge, keyword_summary

__all__ = ["EGFR", "INJECTION", "TP53", "graded_row", "keyword_judge", "keyword_summary", "write_mini_set"]


@pytest.fixture
def index_dir(tmp_path: Path) -> Path:
    return build_three_sources(tmp_path)


@pytest.fixture
def settings() -> Settings:
    return load_settings(
        environ={},
        embedding__model="hash",
        retrieval__top_k=5,
        retrieval__paper_k=5,
        evidence__summarize_k=3,
        evidence__min_score=5,
    )


def good_answer(req: Request) -> dict[str, object]:
    """Cites whatever key the prompt offers for the T790M passage, quoting it verbatim."""
    content = req.messages[-1].content
    key = next(
        line[1 : line.index("]")]
        for line in content.splitlines()
        if (line.startswith("[") and "T790M" in line) or (line.startswith("[Egfr"))
    )
    return {
        "claims": [
            {
                "text": "Osimertinib remains active against tumours carrying T790M.",
                "citations": [key],
                "quote": "Osimertinib remains active against tumours carrying T790M.",
            }
        ],
        "summary": "Osimertinib.",
        "limitations": "",
    }


def make_session(index_dir: Path, settings: Settings, **llms: object) -> Session:
    roles = {
        "summary": FunctionLLM(keyword_summary),
        "judge": FunctionLLM(lambda r: "No", score_function=keyword_judge),
        "answer": FunctionLLM(good_answer),
    }
    roles.update(llms)  # type: ignore[arg-type]
    roles.setdefault("agent", roles["answer"])
    return Session(index=index_dir, settings=settings, llms=roles)  # type: ignore[arg-type]


def graded_row(correct: bool, answered: bool, answerable: bool = True, **kw: object) -> Graded:
    """A hand-made graded question for metric and report tests."""
    base: dict[str, object] = {
        "id": "x",
        "tag": "t",
        "answerable": answerable,
        "options": [],
        "choice": "A" if answered else None,
        "chosen": "x" if answered else None,
        "correct": correct,
        "answered": answered,
        "status": "answered",
        "seconds": 10.0,
        "tokens": 100,
        "llm_calls": 5,
        "cost_usd": 0.0,
    }
    return Graded(**{**base, **kw})  # type: ignore[arg-type]


def write_mini_set(path: Path, egfr_doc_id: str, second: dict[str, object] | None = None) -> Path:
    """Two questions: the EGFR one (its source is the EGFR paper) and one nothing answers."""
    import json

    rows = [
        {
            "id": "1",
            "question": "Which inhibitor remains active against EGFR T790M tumours?",
            "ideal": "Osimertinib",
            "distractors": ["Aspirin", "Gefitinib"],
            "sources": [egfr_doc_id],
        },
        second or {"id": "2", "question": "What does TP53 encode?", "ideal": "p53", "distractors": ["EGFR"]},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    return path
