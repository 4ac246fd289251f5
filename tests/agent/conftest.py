from pathlib import Path

import pytest

from agent.api import Session
from agent.llm.testing import FunctionLLM, Request
from agent.settings import Settings, load_settings
from tests.tools.conftest import EGFR, INJECTION, TP53, build_three_sources, keyword_judge, keyword_summary

__all__ = ["EGFR", "INJECTION", "TP53", "keyword_judge", "keyword_summary"]


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
