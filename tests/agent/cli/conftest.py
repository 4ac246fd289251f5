import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from agent.cli.main import cli
from agent.llm.testing import FunctionLLM, Request
from tests.agent.conftest import good_answer, keyword_judge, keyword_summary
from tests.tools.conftest import EGFR, TP53

# The hashing embedder and a gate the scripted summaries pass: no model file is read.
HASH = ["--set", "embedding.model=hash", "--set", "evidence.min_score=5"]


def invoke(*args: str) -> Result:
    """Run the CLI in-process; ``result.stdout`` and ``result.stderr`` are kept apart."""
    return CliRunner().invoke(cli, list(args), prog_name="scholarloop")


def pick_option(req: Request) -> object:
    """A multiple-choice answer: the Osimertinib option when offered, else the insufficient one;
    a free-text request gets the plain cited answer."""
    content = req.messages[-1].content
    if "Options:\n" not in content:
        return good_answer(req)
    options = dict(
        line.split(") ", 1) for line in content.split("Options:\n")[1].splitlines() if ") " in line[:3]
    )
    letter = next((k for k, v in options.items() if v == "Osimertinib"), None) or next(
        k for k, v in options.items() if v.startswith("Insufficient")
    )
    keys = [line[1 : line.index("]")] for line in content.splitlines() if line.startswith("[")]
    return {"choice": letter, "citations": keys[:1], "quote": ""}


@pytest.fixture(autouse=True)
def _restore_log_level() -> Iterator[None]:
    """``-v`` raises the root logger's level for the process; later tests get it back."""
    root = logging.getLogger()
    level = root.level
    yield
    root.setLevel(level)


@pytest.fixture
def scripted_models(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every role answers from a script, so commands that load models run without one."""
    roles = {
        "summary": FunctionLLM(keyword_summary),
        "judge": FunctionLLM(lambda r: "No", score_function=keyword_judge),
        "answer": FunctionLLM(pick_option),
    }
    roles["agent"] = roles["answer"]
    monkeypatch.setattr("agent.api.resolve_role_llms", lambda settings: roles)


def write_corpus(path: Path, records: list[dict[str, object]]) -> Path:
    """A JSONL corpus (gzipped when the name ends in .gz), one document a line."""
    import gzip

    text = "".join(json.dumps(r) + "\n" for r in records)
    if path.name.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


@pytest.fixture
def two_corpora(tmp_path: Path) -> tuple[Path, Path]:
    egfr = {"doc_id": "egfr:1", "title": "EGFR T790M and osimertinib", "text": EGFR, "source": "test"}
    tp53 = {"doc_id": "tp53:1", "title": "TP53 in tumour suppression", "text": TP53, "source": "test"}
    return write_corpus(tmp_path / "a.jsonl", [egfr]), write_corpus(tmp_path / "b.jsonl.gz", [tp53])


@pytest.fixture
def question_set(tmp_path: Path) -> Path:
    rows = [
        {
            "id": "1",
            "question": "Which inhibitor remains active against EGFR T790M tumours?",
            "ideal": "Osimertinib",
            "distractors": ["Aspirin", "Gefitinib"],
            "sources": ["egfr:1"],
        }
    ]
    path = tmp_path / "set.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path
