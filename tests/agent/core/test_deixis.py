"""Which questions point at one work without naming it."""

import pytest

from agent.core.deixis import unnamed_work


@pytest.mark.parametrize(
    ("question", "phrase"),
    [
        ("What method is developed in this study?", "this study"),
        ("What have the authors reviewed?", "the authors"),
        ("What  does this   review describe?", "this review"),
        ("What were the model assumptions?", "the model"),
        ("What was the authors' recent report on?", "the authors"),
        ("When was The Study conducted?", "the study"),
        ("What is reported in this publication?", "this publication"),
    ],
)
def test_a_reference_to_one_unnamed_work_is_found(question: str, phrase: str) -> None:
    assert unnamed_work(question) == phrase


@pytest.mark.parametrize(
    "question",
    [
        # a field of research, not one work
        "What developments have been made possible by the study of B-cell repertoire?",
        "What have the studies on NP shown for the protection against influenza challenge?",
        # named, or no work at all
        "What is the genome size of the coronavirus?",
        "Did Lo et al. study EGFR T790M?",
        "Which studies report osimertinib resistance?",
        "",
    ],
)
def test_questions_that_name_their_subject_or_a_field_are_left_alone(question: str) -> None:
    assert unnamed_work(question) is None
