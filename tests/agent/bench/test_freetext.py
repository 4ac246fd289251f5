"""Free-form answers against the reference span: F1, containment, judge, right paper, abstention."""

import json
from pathlib import Path

import pytest

from agent.bench.freetext import (
    FreeTextGrade,
    answer_text,
    cited_documents,
    containment,
    normalize,
    score_free_text,
    token_f1,
)
from agent.bench.grading import BenchQuestion, grade, metrics
from agent.bench.report import build_report, side_by_side, write_report
from agent.cli.bench import run_bench
from agent.core.settings import Settings
from agent.core.state import Answer, Claim, Evidence, Status
from agent.llm.testing import FunctionLLM, Request
from tests.agent.conftest import good_answer, graded_row, keyword_judge, make_session, write_mini_set

EGFR_EV = Evidence(
    key="Egfr2021 p. 2", chunk_id="c1", doc_id="egfr", paper_key="Egfr2021", text="Osimertinib is active."
)
TP53_EV = Evidence(key="Tp53 p. 1", chunk_id="c2", doc_id="tp53", paper_key="Tp53", text="TP53 encodes p53.")


def answered(*claims: Claim, text: str = "", evidence: list[Evidence] | None = None) -> Answer:
    return Answer(
        question="Which inhibitor remains active against EGFR T790M tumours?",
        status=Status.answered,
        answer=text,
        claims=list(claims),
        evidence=[EGFR_EV, TP53_EV] if evidence is None else evidence,
    )


def test_normalize_is_squads() -> None:
    assert normalize("The  Single-stranded, linear RNA!") == ["singlestranded", "linear", "rna"]
    assert normalize("An apple a day") == ["apple", "day"]


@pytest.mark.parametrize(
    ("prediction", "reference", "f1"),
    [
        ("31 kb", "31 kb", 1.0),
        ("The genome is 31 kb long.", "31 kb", 2 * 0.4 * 1.0 / 1.4),  # P 2/5, R 2/2
        ("31 kb", "The genome is 31 kb long.", 2 * 1.0 * 0.4 / 1.4),  # symmetric
        ("about 20 kb", "20kb", 0.0),  # no shared token: "20kb" is one token
        ("", "31 kb", 0.0),
        ("the", "a", 1.0),  # both normalise to nothing
        ("kb kb kb", "kb 31", 2 * (1 / 3) * 0.5 / (1 / 3 + 0.5)),  # shared bag counts "kb" once
    ],
)
def test_token_f1_on_known_strings(prediction: str, reference: str, f1: float) -> None:
    assert token_f1(prediction, reference) == pytest.approx(f1)


LONG = "HBV entry requires both intracellular and cell-surface factors of hepatocytes"


@pytest.mark.parametrize(
    ("answer", "reference", "contained"),
    [
        ("The BCoV genome is 31 kb.", "31 kb", True),
        ("The BCoV genome is 131 kb.", "31 kb", False),  # a token run, not a substring
        ("The genome is 31 kb and 20 kb.", "31 KB.", True),
        (
            "It is single-stranded, linear and nonsegmented RNA.",
            "single-stranded, linear, and nonsegmented RNA",
            True,
        ),
        # long reference: 7 content tokens (hbv entry requires intracellular cellsurface factors hepatocytes)
        ("HBV entry needs intracellular and cell-surface factors.", LONG, True),  # 5/7
        ("Infection needs intracellular factors and cell-surface factors.", LONG, False),  # 3/7
        ("anything", "", False),
    ],
)
def test_containment_on_known_strings(answer: str, reference: str, contained: bool) -> None:
    assert containment(answer, reference) is contained


def test_answer_text_is_the_delivered_claims_only() -> None:
    rendered = (
        "Osimertinib remains active [Egfr2021 p. 2]. It is a third-generation inhibitor [Egfr2021 p. 2]."
        "\n\nLimitations: one small study."
    )
    ours = answered(
        Claim(text="Osimertinib remains active [Egfr2021 p. 2]", citations=["Egfr2021 p. 2"]),
        Claim(text="It is a third-generation inhibitor.", citations=["Egfr2021 p. 2"]),
        Claim(text="A claim citing nothing gathered.", citations=["Ghost2020"]),
        text=rendered,
    )
    assert answer_text(ours) == "Osimertinib remains active. It is a third-generation inhibitor."
    # paper-qa's prose: its citations go, other parentheses stay, the Limitations line goes
    prose = answered(text="Osimertinib (a TKI) remains active (Egfr2021 p. 2).\n\nLimitations: few.")
    assert answer_text(prose) == "Osimertinib (a TKI) remains active."
    abstained = Answer(
        question="q",
        status=Status.insufficient_evidence,
        answer='Insufficient evidence to answer the question.\n\nPassages read:\n- [Egfr2021 p. 2] "31 kb"',
        evidence=[EGFR_EV],
    )
    assert answer_text(abstained) == ""


def test_cited_documents_from_claims_or_from_prose() -> None:
    ours = answered(Claim(text="TP53 encodes p53.", citations=["Tp53 p. 1", "Ghost"]))
    assert cited_documents(ours) == {"tp53"}
    assert cited_documents(answered(text="Osimertinib works (Egfr2021 pages 1-2).")) == {"egfr"}
    assert cited_documents(answered(text="Osimertinib works.")) == set()


def correctness_judge(req: Request) -> float:
    """P(Yes) high when the candidate names the reference's drug; counts nothing else."""
    text = req.messages[-1].content
    reference = text.split("Reference answer:")[1].split("Candidate answer:")[0].lower()
    candidate = text.split("Candidate answer:")[1].lower()
    return 0.9 if "osimertinib" in reference and "osimertinib" in candidate else 0.1


async def test_judge_grades_answers_with_one_call_each() -> None:
    judge = FunctionLLM(lambda r: "No", score_function=correctness_judge)
    right = answered(Claim(text="Osimertinib remains active.", citations=["Egfr2021 p. 2"]))
    g = await score_free_text(right.question, "Osimertinib", right, {"egfr"}, judge)
    assert g.correct and g.judge_p_yes == pytest.approx(0.9) and g.right_paper and g.containment
    assert g.token_f1 == pytest.approx(0.5) and g.cited_docs == ["egfr"]
    assert len(judge.requests) == 1 and "<passage>" in judge.requests[0].messages[-1].content

    wrong_paper = answered(Claim(text="Gefitinib remains active.", citations=["Tp53 p. 1"]))
    g = await score_free_text(right.question, "Osimertinib", wrong_paper, {"egfr"}, judge)
    assert g.correct is False and g.right_paper is False and not g.containment

    abstained = Answer(question="q", status=Status.insufficient_evidence, answer="Insufficient evidence.")
    g = await score_free_text("q", "Osimertinib", abstained, {"egfr"}, judge)
    assert not g.answered and g.abstained and g.correct is False and g.token_f1 == 0.0
    assert g.judge_p_yes is None and g.right_paper is None and len(judge.requests) == 2  # no call

    # withheld sources: no reference, no judge call; abstaining is what counts
    g = await score_free_text("q", None, right, set(), judge)
    assert g.answered and g.token_f1 is None and g.correct is None and len(judge.requests) == 2
    assert g.states_withheld is None
    # ... but an answer given anyway is read against the withheld paper's reference
    g = await score_free_text("q", None, right, set(), judge, withheld_reference="Osimertinib")
    assert g.correct is None and g.states_withheld is True and g.judge_p_yes == pytest.approx(0.9)
    g = await score_free_text("q", None, wrong_paper, set(), judge, withheld_reference="Osimertinib")
    assert g.states_withheld is False and len(judge.requests) == 4
    g = await score_free_text("q", None, abstained, set(), judge, withheld_reference="Osimertinib")
    assert g.states_withheld is None and len(judge.requests) == 4  # an abstention states nothing


def q(**kw: object) -> BenchQuestion:
    base = {"id": "q1", "question": "Which?", "ideal": "Osimertinib", "distractors": ["Aspirin"]}
    return BenchQuestion(**{**base, **kw})  # type: ignore[arg-type]


def test_free_text_grade_reads_no_option_and_counts_abstention_on_withheld_sources() -> None:
    """Prose that names an option is not an option pick; under withholding only a reported
    insufficient-evidence run is a correct abstention (a failed run broke, it did not abstain)."""
    right = answered(Claim(text="Osimertinib, not Aspirin.", citations=["Egfr2021 p. 2"]))
    free = FreeTextGrade(text="Osimertinib, not Aspirin.", answered=True, abstained=False, correct=False)
    g = grade(q(), ["Aspirin", "Osimertinib"], right, {"egfr"}, free)
    assert g.choice is None and g.chosen is None and g.answered and not g.correct

    held = q(answerable=False)
    abstain = Answer(question="q", status=Status.insufficient_evidence, answer="Insufficient evidence.")
    failed = Answer(question="q", status=Status.failed, answer="")
    rows = [
        grade(held, [], abstain, set(), FreeTextGrade(text="", answered=False, abstained=True)),
        grade(held, [], failed, set(), FreeTextGrade(text="", answered=False, abstained=False)),
        grade(held, [], right, set(), FreeTextGrade(text="x", answered=True, abstained=False)),
        grade(held, [], abstain, set(), FreeTextGrade(text="", answered=False, abstained=True)),
    ]
    assert [r.correct for r in rows] == [True, False, False, True]
    m = metrics(rows)
    assert m["abstention_rate"] == 0.5 and m["abstention_accuracy"] == 0.5 and m["coverage"] == 0.25
    assert m["token_f1"] is None and m["judge_correct_of_answered"] is None and m["judged"] == 0


def free_row(qid: str, f1: float | None, contained: bool, correct: bool, **kw: object) -> object:
    ans = f1 is not None and f1 > 0
    free = FreeTextGrade(
        text="x" if ans else "",
        answered=ans,
        abstained=not ans,
        token_f1=f1,
        containment=contained,
        judge_p_yes=(0.9 if correct else 0.1) if ans else None,
        correct=correct,
        right_paper=kw.pop("right_paper", None),
    )
    status = "answered" if ans else "insufficient_evidence"
    return graded_row(
        correct, ans, id=qid, set_name="covidqa-dev", status=status, free_text=free, choice=None, **kw
    )


def free_rows() -> list[object]:
    return [
        free_row("a", 1.0, True, True, right_paper=True, seconds=4.0, tokens=100),
        free_row("b", 0.5, False, True, right_paper=True, seconds=6.0, tokens=300),
        free_row("c", 0.25, False, False, right_paper=False, seconds=8.0, tokens=200),
        free_row("d", 0.0, False, False, seconds=10.0, tokens=50),  # abstained
    ]


def test_free_text_metrics_and_report(tmp_path: Path) -> None:
    rows = free_rows()
    m = metrics(rows)  # type: ignore[arg-type]
    assert m["coverage"] == 0.75 and m["precision"] == pytest.approx(2 / 3)  # judge correct of answered
    assert m["judge_correct_of_answered"] == pytest.approx(2 / 3) and m["judged"] == 3
    assert m["token_f1"] == pytest.approx(1.75 / 4) and m["token_f1_answered"] == pytest.approx(1.75 / 3)
    assert m["containment"] == 0.25 and m["containment_answered"] == pytest.approx(1 / 3)
    assert m["right_paper_cited"] == pytest.approx(2 / 3) and m["abstention_rate"] == 0.25
    assert m["median_seconds"] == 7.0 and m["median_tokens"] == 150

    write_report(tmp_path, rows, {"seed": 1, "free_text": True})  # type: ignore[arg-type]
    report = json.loads((tmp_path / "report.json").read_text())
    for key in (
        "token_f1",
        "token_f1_answered",
        "containment",
        "containment_answered",
        "judge_correct_of_answered",
        "right_paper_cited",
        "abstention_rate",
        "coverage",
        "median_seconds",
        "median_tokens",
    ):
        assert key in report["sets"]["covidqa-dev"], key
    md = (tmp_path / "report.md").read_text()
    assert "| set | system | n | coverage | judge correct (of answered) | token F1 |" in md
    assert (
        "| covidqa-dev | scholarloop | 4 | 75% | 67% | 44% | 58% | 25% | 33% | 67% | 25% | – | 7 | 150 |"
        in md
    )


def test_multiple_choice_reports_show_no_free_text_table() -> None:
    table = side_by_side(build_report([graded_row(True, True, set_name="s")], {}))
    assert "token F1" not in table and "| s | scholarloop | 1 | 100% |" in table


def e2e_answer(req: Request) -> object:
    """The cited Osimertinib answer, or no claim when the EGFR passage is not offered; RAGAS's
    reverse-question request gets the question back."""
    if req.messages[0].content.startswith("Write the one question"):
        return "Which inhibitor remains active against EGFR T790M tumours?"
    try:
        return good_answer(req)
    except StopIteration:
        return {"claims": [], "summary": "", "limitations": ""}


def e2e_judge(req: Request) -> float:
    text = req.messages[-1].content
    if "Reference answer:" in text:
        return correctness_judge(req)
    return keyword_judge(req) if "Claim:" in text else 0.5


async def test_free_text_bench_end_to_end(index_dir: Path, settings: Settings, tmp_path: Path) -> None:
    judge = FunctionLLM(lambda r: "No", score_function=e2e_judge)
    session = make_session(index_dir, settings, answer=FunctionLLM(e2e_answer), judge=judge)
    egfr = next(p for p in session.library.papers if p.key.startswith("Egfr"))
    set_path = write_mini_set(tmp_path / "mini.jsonl", egfr.doc_id)
    out = tmp_path / "free"
    report = await run_bench(
        [set_path], session, out, limit=None, seed=0, withhold=False, free_text=True, progress=False
    )
    lines = {r["id"]: r for r in map(json.loads, (out / "questions.jsonl").read_text().splitlines())}
    first = lines["1"]["free_text"]
    assert first["answered"] and first["correct"] and first["right_paper"] and first["containment"]
    assert "[" not in first["text"] and egfr.doc_id in first["cited_docs"]
    m = report["sets"]["mini"]
    assert m["n"] == 2 and m["judged"] == sum(r["free_text"]["answered"] for r in lines.values())
    assert m["right_paper_cited"] is not None and "ragas" in m
    judge_calls = [r for r in judge.requests if "Reference answer:" in r.messages[-1].content]
    assert len(judge_calls) == m["judged"]  # one correctness call per answered question
    assert "token F1" in (out / "report.md").read_text()

    held = await run_bench(
        [set_path],
        session,
        tmp_path / "held",
        limit=None,
        seed=0,
        withhold=True,
        free_text=True,
        progress=False,
    )
    h = held["sets"]["mini"]
    rows = [json.loads(x) for x in (tmp_path / "held" / "questions.jsonl").read_text().splitlines()]
    abstained = sum(r["status"] == "insufficient_evidence" for r in rows)
    assert next(r for r in rows if r["id"] == "1")["status"] == "insufficient_evidence"
    assert h["abstention_rate"] == abstained / 2 and h["abstention_accuracy"] == abstained / 2
    assert h["token_f1"] is None and all(r["free_text"]["right_paper"] is None for r in rows)
    answered_rows = [r for r in rows if r["free_text"]["answered"]]
    assert h["withheld_answered"] == len(answered_rows) == 2 - abstained == 1
    stating = [r for r in answered_rows if r["free_text"]["states_withheld"]]
    assert h["withheld_answered_stating_reference"] == len(stating)
    assert all(r["free_text"]["states_withheld"] is None for r in rows if not r["free_text"]["answered"])
