import json
from pathlib import Path

import pytest

from agent.bench.grading import BenchQuestion, extract_choice, grade, load_set, metrics, present, sample
from agent.cli.bench import run_bench
from agent.core.settings import Settings
from agent.core.state import INSUFFICIENT, Answer, Evidence, Status
from tests.agent.conftest import graded_row, make_session, write_mini_set


def q(**kw: object) -> BenchQuestion:
    base = {"id": "q1", "question": "Which?", "ideal": "Osimertinib", "distractors": ["Aspirin", "Gefitinib"]}
    return BenchQuestion(**{**base, **kw})  # type: ignore[arg-type]


def test_load_set_reads_native_and_shared_formats(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    rows = [
        {
            "id": "a",
            "question": "Q1?",
            "ideal": "x",
            "distractors": "['y', 'z']",
            "sources": "['https://doi.org/10.1/A']",
            "key-passage": "kp",
            "tag": "litqa2",
        },
        {
            "id": "b",
            "question": "Q2?",
            "ideal": None,
            "distractors": ["supported", "refuted"],
            "sources": ["scifact:1"],
            "answerable": False,
        },
    ]
    rows.append({"id": "c", "question": "Q3?", "ideal": "null", "distractors": ["u", "v"]})
    path.write_text("\n".join(json.dumps(r) for r in rows))
    a, b, c = load_set(path)
    assert c.ideal is None and not c.answerable and "null" not in present(c, 0)
    assert (
        a.distractors == ["y", "z"]
        and a.sources == ["https://doi.org/10.1/A"]
        and a.answerable
        and a.key_passage == "kp"
    )
    assert not b.answerable and b.tag == "s"


def test_presentation_is_shuffled_with_a_fixed_seed_and_includes_insufficient() -> None:
    options = present(q(), seed=0)
    assert sorted(options) == sorted(["Osimertinib", "Aspirin", "Gefitinib", INSUFFICIENT])
    assert present(q(), seed=0) == options
    orders = {tuple(present(q(id=f"q{i}"), seed=0)) for i in range(30)}
    assert len(orders) > 5  # the ideal answer is not always in the same place
    assert sample([q(id=str(i)) for i in range(50)], 5, seed=1) == sample(
        [q(id=str(i)) for i in range(50)], 5, seed=1
    )


@pytest.mark.parametrize(
    ("text", "letter"),
    [
        ("B", "B"),
        ("(C) because", "C"),
        ("The answer is D.", "D"),
        ("Answer: a", "A"),
        ("I think Aspirin is right", "B"),
        ("no idea", None),
        ("Therefore, the correct answer is:\nA) Osimertinib", "A"),
        ("Evidence points one way.\nC) Gefitinib, as reported", "C"),
        ("The answer is a kinase inhibitor", None),
        ("The answer is **B**", "B"),
    ],
)
def test_extract_choice(text: str, letter: str | None) -> None:
    assert extract_choice(text, ["Osimertinib", "Aspirin", "Gefitinib", INSUFFICIENT]) == letter


async def test_llm_fallback_maps_prose_to_an_option_or_none() -> None:
    from agent.bench.grading import extract_choice_llm
    from agent.llm.testing import FunctionLLM

    options = ["Osimertinib", "Aspirin", INSUFFICIENT]
    seen: list[str] = []

    def grader(req: object) -> dict[str, str]:
        content = req.messages[-1].content  # type: ignore[attr-defined]
        seen.append(content)
        return {"choice": "A" if "third-generation" in content else "none"}

    llm = FunctionLLM(grader)
    assert await extract_choice_llm(llm, "The third-generation inhibitor works.", options) == "A"
    assert await extract_choice_llm(llm, "Hard to say.", options) is None
    assert "A) Osimertinib" in seen[0] and "C) Insufficient" in seen[0]


graded = graded_row


def test_metrics_on_hand_made_results() -> None:
    rows = [
        graded(True, True, gold_rank=1, faithfulness=1.0, seconds=5),
        graded(False, True, gold_rank=7, faithfulness=0.5, fabricated=1, seconds=20),
        graded(False, False, seconds=30),
        graded(True, False, answerable=False, seconds=40),
    ]
    m = metrics(rows)
    assert m["n"] == 4
    assert m["accuracy"] == 0.5
    assert m["precision"] == 0.5  # 1 correct of 2 answered
    assert m["coverage"] == 0.5
    assert m["abstention_accuracy"] == 1.0
    assert m["recall_at_k"]["5"] == 0.25
    assert m["faithfulness"] == 0.75
    assert m["fabricated_citations"] == 1
    assert m["median_seconds"] == 25.0


def test_a_run_that_answered_nothing_has_no_precision() -> None:
    """All abstentions (a withheld-sources run): precision is undefined, shown "–", not 0%."""
    m = metrics([graded(True, False, answerable=False), graded(False, False)])
    assert m["precision"] is None and m["coverage"] == 0.0 and m["accuracy"] == 0.5


def test_grade_abstention_and_gold_rank() -> None:
    options = ["Aspirin", INSUFFICIENT, "Osimertinib"]
    ev = Evidence(key="k", chunk_id="c", doc_id="gold", paper_key="P", text="t")
    right = Answer(question="Which?", status=Status.answered, answer="", choice="C", evidence=[ev])
    g = grade(q(), options, right, {"gold"})
    assert g.correct and g.answered and g.gold_rank == 1
    abstain = Answer(question="Which?", status=Status.insufficient_evidence, answer="", choice="B")
    assert not grade(q(), options, abstain, set()).answered
    assert grade(q(answerable=False, ideal=None), options, abstain, set()).correct


async def test_bench_runs_withholds_and_resumes(index_dir: Path, settings: Settings, tmp_path: Path) -> None:
    session = make_session(index_dir, settings)
    egfr = next(p for p in session.library.papers if p.key.startswith("Egfr"))
    set_path = write_mini_set(tmp_path / "mini.jsonl", egfr.doc_id)

    from agent.llm.testing import FunctionLLM, Request

    def pick(req: Request) -> object:
        content = req.messages[-1].content
        options = dict(
            line.split(") ", 1) for line in content.split("Options:\n")[1].splitlines() if ") " in line[:3]
        )
        letter = next((k for k, v in options.items() if v == "Osimertinib"), None) or next(
            k for k, v in options.items() if v.startswith("Insufficient")
        )
        keys = [line[1 : line.index("]")] for line in content.splitlines() if line.startswith("[Egfr")]
        return {"choice": letter, "citations": keys[:1], "quote": ""}

    session = make_session(index_dir, settings, answer=FunctionLLM(pick))
    out = tmp_path / "out"
    report = await run_bench([set_path], session, out, limit=None, seed=0, withhold=False, progress=False)
    m = report["sets"]["mini"]
    assert m["n"] == 2 and m["accuracy"] == 0.5 and m["precision"] == 1.0 and m["coverage"] == 0.5
    assert len((out / "questions.jsonl").read_text().splitlines()) == 2
    again = await run_bench([set_path], session, out, limit=None, seed=0, withhold=False, progress=False)
    assert again["sets"]["mini"] == m and len((out / "questions.jsonl").read_text().splitlines()) == 2

    held = await run_bench(
        [set_path], session, tmp_path / "held", limit=None, seed=0, withhold=True, progress=False
    )
    first = json.loads((tmp_path / "held" / "questions.jsonl").read_text().splitlines()[0])
    assert egfr.doc_id not in {e["doc_id"] for e in first["answer"]["evidence"]}
    assert held["sets"]["mini"]["coverage"] == 0.0 and held["sets"]["mini"]["accuracy"] == 1.0

    # repeats: each repeat shuffles the options with its own seed; a rerun with more repeats
    # keeps the first repeat's rows and adds only the new ones
    rep = tmp_path / "rep"
    await run_bench([set_path], session, rep, limit=None, seed=0, withhold=False, repeats=1, progress=False)
    two = await run_bench(
        [set_path], session, rep, limit=None, seed=0, withhold=False, repeats=2, progress=False
    )
    lines = [json.loads(line) for line in (rep / "questions.jsonl").read_text().splitlines()]
    assert sorted((r["id"], r["repeat"]) for r in lines) == [("1", 0), ("1", 1), ("2", 0), ("2", 1)]
    assert {tuple(r["options"]) for r in lines if r["id"] == "1"} == {
        tuple(present(load_set(set_path)[0], seed)) for seed in (0, 1)
    }
    m2 = two["sets"]["mini"]
    assert m2["repeats"] == 2 and m2["mean_sd"]["accuracy"] == {"mean": 0.5, "sd": 0.0}
