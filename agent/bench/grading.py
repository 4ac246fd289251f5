"""LitQA2-style benchmarking: presentation, grading and metrics, resumable.

Each question is shown as LAB-Bench shows it: ``[ideal, *distractors, "Insufficient
information to answer the question"]`` shuffled into letters with a fixed seed. The chosen
option comes from the structured answer; :func:`extract_choice` parses free text as a fallback.
Metrics: accuracy = correct / all, precision = correct / answered, coverage = answered / all;
for ``answerable: false`` questions, abstaining is the correct response. A free-text run
(:mod:`agent.bench.freetext`) has no option to pick: there "correct" is the judge's verdict
against the reference span, and the span checks are reported beside it.
"""

from __future__ import annotations

import ast
import hashlib
import random
import re
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from agent.bench.freetext import FreeTextGrade
from agent.core.errors import ConfigError
from agent.core.evidence import LETTERS, lettered, option_text
from agent.core.jsonl import json_objects, read_text
from agent.core.state import INSUFFICIENT, Answer, Status

__all__ = [
    "SET_FORMAT",
    "BenchQuestion",
    "Graded",
    "as_list",
    "extract_choice",
    "extract_choice_llm",
    "grade",
    "load_set",
    "metrics",
    "present",
    "row_key",
    "sample",
    "set_name",
]


class BenchQuestion(BaseModel):
    id: str
    question: str
    ideal: str | None
    distractors: list[str]
    sources: list[str] = Field(default_factory=list)
    answerable: bool = True
    tag: str = ""
    key_passage: str | None = None


def as_list(value: Any) -> list[str]:
    """A list field that may arrive as a list or as its string repr (the shared LitQA2 file)."""
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            return [value]
    return [str(v) for v in value] if isinstance(value, list | tuple) else []


SET_FORMAT = (
    'expected JSONL (gzipped too), one question a line: {"id", "question", "ideal" (null when the '
    'corpus holds no answer), "distractors": [...], "sources": [...]}'
)
_REQUIRED = ("question", "ideal", "distractors")


def set_name(path: Path) -> str:
    """A set's name in reports and resume keys: the file name without .jsonl / .jsonl.gz."""
    return Path(path.name.removesuffix(".gz")).stem


def _check_row(path: Path, n: int, row: dict[str, Any]) -> dict[str, Any]:
    where = f"{path}:{n}"
    missing = [f for f in _REQUIRED if f not in row]
    if missing:
        has = ", ".join(sorted(row)[:8]) or "nothing"
        # a corpus line (doc_id, text) given as a set is the usual way to get here
        looks = "; it looks like a corpus document, not a question" if "text" in row else ""
        raise ConfigError(f"{where}: no {', '.join(missing)} field (it has {has}){looks}; {SET_FORMAT}")
    if not isinstance(row["question"], str) or not row["question"].strip():
        raise ConfigError(f"{where}: 'question' is not a non-empty string; {SET_FORMAT}")
    return row


def load_set(path: Path) -> list[BenchQuestion]:
    """LitQA2's native JSONL and the shared-data format (string-encoded lists, ``answerable``).

    A file that is not a question set (a gzipped corpus, a binary, a line of bad JSON, a row
    without the fields) raises :class:`ConfigError` naming the file, the line and the format,
    instead of a decoding error from deep inside the run.
    """
    out = []
    for n, raw in json_objects(path, read_text(path, SET_FORMAT), SET_FORMAT):
        row = _check_row(path, n, raw)
        ideal = row.get("ideal")
        # LitQA2's native file spells "no answer in the corpus" as the string "null"
        ideal = None if ideal is None or str(ideal).strip().lower() in ("", "null", "none") else str(ideal)
        try:
            question = BenchQuestion(
                id=str(row.get("id") or hashlib.sha256(row["question"].encode()).hexdigest()[:12]),
                question=row["question"],
                ideal=ideal,
                distractors=as_list(row.get("distractors", [])),
                sources=as_list(row.get("sources", [])),
                answerable=row.get("answerable", True) is not False and ideal is not None,
                tag=row.get("tag") or set_name(path),
                key_passage=row.get("key-passage"),
            )
        except ValidationError as exc:
            problem = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise ConfigError(f"{path}:{n}: {problem}; {SET_FORMAT}") from exc
        out.append(question)
    if not out:
        raise ConfigError(f"{path}: no questions in the file; {SET_FORMAT}")
    return out


def sample(questions: Sequence[BenchQuestion], limit: int | None, seed: int) -> list[BenchQuestion]:
    if not limit or limit >= len(questions):
        return list(questions)
    return random.Random(seed).sample(list(questions), limit)


def present(q: BenchQuestion, seed: int) -> list[str]:
    """Options in presentation order (the insufficient option included), fixed per (seed, question)."""
    options = [o for o in [q.ideal, *q.distractors] if o is not None]
    options.append(INSUFFICIENT)
    rng = random.Random(f"{seed}:{q.id}")
    rng.shuffle(options)
    return options


def extract_choice(text: str, options: Sequence[str]) -> str | None:
    """The option letter a free-text reply picked: 'B', '(B)', 'B)', 'Answer: B', 'the correct
    answer is:\nA) yes', a line 'C) <option text>', or the only option whose text it mentions."""
    letters = LETTERS[: len(options)]
    cue = r"(?:answer|choice|option)\s*(?:is|would be)?\s*:?\s*\**\s*\(?"
    m = re.search(rf"{cue}([{letters}])(?![a-z])", text, re.IGNORECASE)
    if m and (m.group(1).isupper() or re.match(r"[a-z](?:[).:,]|\s*$)", text[m.start(1) :])):
        return m.group(1).upper()
    m = re.match(rf"\s*\(?([{letters}])[).:\s]", text + " ")
    if m:
        return m.group(1)
    for line in re.finditer(rf"(?m)^\s*\(?([{letters}])\)\s*(.+)$", text):
        option = options[letters.index(line.group(1))]
        if line.group(2).strip().lower().startswith(option.lower()):
            return line.group(1)
    lowered = text.lower()
    hits = [letters[i] for i, o in enumerate(options) if o.lower() in lowered]
    return hits[0] if len(hits) == 1 else None


CHOICE_EXTRACTION = (
    "You grade a multiple-choice exam. Given the options and a student's free-text answer, reply "
    "with the letter of the option the answer commits to, or 'none' if it commits to none of them "
    "(for example, it only says the information is insufficient without picking that option)."
)


async def extract_choice_llm(llm: Any, text: str, options: Sequence[str]) -> str | None:
    """LAB-Bench/aviary-style fallback for prose that names no letter: a model maps it to one.

    Only used when :func:`extract_choice` finds nothing, for any system alike; the call is
    grading, so it is not counted in the system's own tokens.
    """
    from agent.llm.types import Message

    letters = LETTERS[: len(options)]
    schema = {
        "type": "object",
        "properties": {"choice": {"type": "string", "enum": [*letters, "none"]}},
        "required": ["choice"],
    }
    reply = await llm.complete(
        [
            Message.system(CHOICE_EXTRACTION),
            Message.user(
                f"Options:\n{lettered(options)}\n\nAnswer:\n{text[:3000]}\n\nReply with JSON: choice."
            ),
        ],
        role="other",
        json_schema=schema,
        max_tokens=20,
    )
    choice = str(reply.json().get("choice", "none"))
    return choice if choice in letters else None


class Graded(BaseModel):
    """One graded question of one run (system x set x repeat): a line of ``questions.jsonl``."""

    id: str
    tag: str
    system: str = "scholarloop"
    set_name: str = ""
    repeat: int = 0
    answerable: bool
    options: list[str]
    choice: str | None
    chosen: str | None
    correct: bool
    answered: bool
    status: str
    seconds: float
    tokens: int
    llm_calls: int
    cost_usd: float
    gold_rank: int | None = None
    faithfulness: float | None = None
    fabricated: int = 0
    ragas: dict[str, float | None] | None = None
    free_text: FreeTextGrade | None = None
    answer: dict[str, Any] | None = None

    @property
    def key(self) -> str:
        return row_key(self.system, self.set_name, self.id, self.repeat)


def row_key(system: str, set_name: str, question_id: str, repeat: int) -> str:
    """Resume key: the same question in another system, set or repeat is another row."""
    return f"{system}:{set_name}:{question_id}:{repeat}"


def grade(
    q: BenchQuestion,
    options: list[str],
    answer: Answer,
    gold_docs: set[str],
    free: FreeTextGrade | None = None,
) -> Graded:
    """Grade one answer; with ``free`` (a free-text run) no option is read from the prose.

    Free text: answered = some claim was delivered; correct = the judge's verdict, or, where
    abstaining is right, the run reporting insufficient evidence (a failed or truncated run did
    not abstain, it broke).
    """
    if free is None:
        choice = answer.choice or extract_choice(answer.answer, options)
        chosen = option_text(options, choice)
        answered = chosen is not None and chosen != INSUFFICIENT
        correct = (chosen == q.ideal) if q.answerable else not answered
    else:
        choice, chosen, answered = None, None, free.answered
        correct = bool(free.correct) if q.answerable else free.abstained
    ranks = [i + 1 for i, e in enumerate(answer.evidence) if e.doc_id in gold_docs]
    v = answer.verification
    return Graded(
        id=q.id,
        tag=q.tag,
        answerable=q.answerable,
        options=options,
        choice=choice,
        chosen=chosen,
        correct=correct,
        answered=answered,
        status=answer.status.value,
        seconds=answer.seconds,
        tokens=answer.total_tokens,
        llm_calls=sum(u.calls for u in answer.usage.values()),
        cost_usd=answer.cost_usd,
        gold_rank=min(ranks) if ranks else None,
        faithfulness=v.faithfulness if v and v.claims else None,
        fabricated=(v.counts.get("fabricated_citations", 0) if v else 0),
        free_text=free,
        answer=answer.model_dump(mode="json"),
    )


def metrics(rows: Sequence[Graded], k: int = 5) -> dict[str, Any]:
    n = len(rows)
    if n == 0:
        return {"n": 0}
    answered = [r for r in rows if r.answered]
    unanswerable = [r for r in rows if not r.answerable]
    secs = sorted(r.seconds for r in rows)
    faith = [r.faithfulness for r in rows if r.faithfulness is not None]
    return {
        "n": n,
        "accuracy": sum(r.correct for r in rows) / n,
        # nothing answered has no precision (shown "–"), not a precision of 0
        "precision": (sum(r.correct for r in answered) / len(answered)) if answered else None,
        "coverage": len(answered) / n,
        "abstention_accuracy": (sum(r.correct for r in unanswerable) / len(unanswerable))
        if unanswerable
        else None,
        "recall_at_k": {str(k): sum(1 for r in rows if r.gold_rank is not None and r.gold_rank <= k) / n},
        "faithfulness": statistics.mean(faith) if faith else None,
        "fabricated_citations": sum(r.fabricated for r in rows),
        "median_seconds": statistics.median(secs),
        "p90_seconds": secs[min(n - 1, int(0.9 * n))],
        "median_tokens": statistics.median(r.tokens for r in rows),
        "median_llm_calls": statistics.median(r.llm_calls for r in rows),
        "total_cost_usd": sum(r.cost_usd for r in rows),
        "abstention_rate": sum(r.status == Status.insufficient_evidence for r in rows) / n,
        **_free_text_means(rows),
        **_ragas_means(rows),
    }


def _mean(values: Sequence[float]) -> float | None:
    return statistics.mean(values) if values else None


def _free_text_means(rows: Sequence[Graded]) -> dict[str, Any]:
    """The free-form answer checks (free-text runs only; see :mod:`agent.bench.freetext`).

    ``token_f1`` and ``containment`` average over answerable questions, an abstention scoring
    0: what a user asking every question gets. The ``_answered`` variants average over the
    answers given, the figure to set beside the judge's ``precision``. ``right_paper_cited`` is
    the share of answers (to questions with known sources) citing a passage of a source paper.
    """
    free = [(r, f) for r in rows if (f := r.free_text) is not None]
    if not free:
        return {}
    scored = [(r, f) for r, f in free if r.answerable and f.token_f1 is not None]
    given = [(r, f) for r, f in scored if f.answered]
    sourced = [f for _, f in free if f.right_paper is not None]
    judged = [f for _, f in given if f.judge_p_yes is not None]
    withheld = [f for r, f in free if not r.answerable and f.answered]
    return {
        "token_f1": _mean([f.token_f1 or 0.0 for _, f in scored]),
        "token_f1_answered": _mean([f.token_f1 or 0.0 for _, f in given]),
        "containment": _mean([float(bool(f.containment)) for _, f in scored]),
        "containment_answered": _mean([float(bool(f.containment)) for _, f in given]),
        "judge_correct_of_answered": _mean([float(bool(f.correct)) for f in judged]),
        "judged": len(judged),
        "right_paper_cited": _mean([float(bool(f.right_paper)) for f in sourced]),
        # abstention's misses split: the withheld paper's answer found elsewhere, or something else
        "withheld_answered": len(withheld),
        "withheld_answered_stating_reference": sum(bool(f.states_withheld) for f in withheld),
    }


def _ragas_means(rows: Sequence[Graded]) -> dict[str, Any]:
    """Mean of each RAGAS metric over the questions that have it (free-text runs only)."""
    scored = [r.ragas for r in rows if r.ragas]
    if not scored:
        return {}
    names = sorted({k for s in scored for k in s})
    means: dict[str, float | None] = {}
    for name in names:
        values = [v for s in scored if (v := s.get(name)) is not None]
        means[name] = statistics.mean(values) if values else None
    return {"ragas": means}
