"""Reports: per set, tag, system and repeat; report.md, plots; the RAGAS four on a scripted answer."""

import json
from pathlib import Path

import pytest

from agent.bench.grading import Graded
from agent.bench.ragas import ragas_scores
from agent.bench.report import build_report, side_by_side, write_report
from agent.core.settings import Settings
from agent.core.state import Answer, Claim, Evidence, Status
from agent.llm.testing import FunctionLLM, Request
from tests.agent.conftest import graded_row, make_session


def row(qid: str, correct: bool, answered: bool = True, **kw: object) -> Graded:
    return graded_row(correct, answered, id=qid, tag=kw.pop("tag", "litqa2"), set_name="s", **kw)


def test_report_groups_by_system_set_tag_and_repeat() -> None:
    rows = [
        # repeat 0: 2/2 right; repeat 1: 1/2 right -> accuracy 0.75 ± 0.354
        row("a", True, repeat=0, tag="cancer"),
        row("b", True, repeat=0, tag="genes"),
        row("a", True, repeat=1, tag="cancer"),
        row("b", False, repeat=1, tag="genes"),
        row("a", False, False, system="paperqa", seconds=30.0),
        row("b", True, system="paperqa", seconds=50.0),
    ]
    report = build_report(rows, {"seed": 0})
    ours = report["sets"]["s"]  # the first system's sets
    assert ours["n"] == 4 and ours["accuracy"] == 0.75 and ours["repeats"] == 2
    assert ours["mean_sd"]["accuracy"]["mean"] == pytest.approx(0.75)
    assert ours["mean_sd"]["accuracy"]["sd"] == pytest.approx(0.35355, abs=1e-4)
    assert ours["by_tag"]["cancer"]["accuracy"] == 1.0 and ours["by_tag"]["genes"]["accuracy"] == 0.5
    theirs = report["systems"]["paperqa"]["s"]
    assert theirs["n"] == 2 and theirs["precision"] == 1.0 and theirs["coverage"] == 0.5
    assert theirs["median_seconds"] == 40.0 and "mean_sd" not in theirs
    table = side_by_side(report)
    assert "| s | scholarloop | 4 | 75 ± 35% |" in table and "| s | paperqa | 2 | 50% | 100% | 50% |" in table


def test_write_report_writes_json_markdown_and_plots(tmp_path: Path) -> None:
    rows = [row("a", True), row("b", False, False), row("a", True, system="paperqa")]
    write_report(tmp_path, rows, {"seed": 3, "repeats": 1})
    report = json.loads((tmp_path / "report.json").read_text())
    for key in (
        "n",
        "accuracy",
        "precision",
        "coverage",
        "abstention_accuracy",
        "recall_at_k",
        "faithfulness",
        "fabricated_citations",
        "median_seconds",
        "median_tokens",
    ):
        assert key in report["sets"]["s"], key
    md = (tmp_path / "report.md").read_text()
    assert "| s | scholarloop |" in md and "| s | paperqa |" in md and "![metrics.png]" in md
    for png in ("metrics.png", "latency.png"):
        assert (tmp_path / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(tmp_path.glob("*.tmp"))


async def test_ragas_four_with_the_projects_judge_and_embedder(index_dir: Path, settings: Settings) -> None:
    """Judge: supports only statements about osimertinib; passage 2 is useless to the question."""

    def judge(req: Request) -> float:
        text = req.messages[-1].content
        passage, _, ask = text.rpartition("</passage>")
        if "Useful?" in ask:
            return 0.9 if "T790M" in passage else 0.1
        return 0.95 if "osimertinib" in ask.lower() and "Osimertinib" in passage else 0.05

    answer_llm = FunctionLLM(lambda r: "Which inhibitor remains active against EGFR T790M tumours?")
    session = make_session(
        index_dir, settings, judge=FunctionLLM(lambda r: "No", score_function=judge), answer=answer_llm
    )
    ev = [
        Evidence(
            key="E", chunk_id="1", doc_id="e", paper_key="E", text="Osimertinib is active against T790M."
        ),
        Evidence(key="T", chunk_id="2", doc_id="t", paper_key="T", text="TP53 encodes p53."),
    ]
    answer = Answer(
        question="Which inhibitor remains active against EGFR T790M tumours?",
        status=Status.answered,
        answer="Osimertinib remains active [E]. TP53 is mutated in most cancers [T].",
        claims=[
            Claim(text="Osimertinib remains active against T790M.", citations=["E"]),
            Claim(text="TP53 is mutated in most cancers.", citations=["T"]),
        ],
        evidence=ev,
    )
    scores = await ragas_scores(answer, "The answer is osimertinib.", session)
    assert scores["faithfulness"] == 0.5  # one of two claims is supported by some passage
    assert scores["answer_relevancy"] == pytest.approx(1.0, abs=1e-6)  # regenerated question == question
    assert scores["context_precision"] == 1.0  # the only useful passage is ranked first
    assert scores["context_recall"] == 1.0
    answer.evidence.reverse()  # the useful passage now ranked second: precision@2 = 1/2
    assert (await ragas_scores(answer, None, session))["context_precision"] == 0.5
    no_support = await ragas_scores(answer, "The answer is aspirin.", session)
    assert no_support["context_recall"] == 0.0
