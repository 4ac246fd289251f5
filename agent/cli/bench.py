"""``scholarloop bench``: run LitQA2-style sets through one or more systems and write a report.

Every system answers the same seeded sample, shown with the same option order, and is graded
by the same :func:`agent.bench.grading.grade`. Each graded question is appended to ``questions.jsonl``
as soon as it is done; a rerun with the same ``--out`` skips what is there (resume), and the
report is recomputed from that file (:mod:`agent.bench.report`).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import click

from agent.bench.grading import BenchQuestion, Graded, row_key
from agent.cli.corpus import build_with_progress
from agent.cli.distributed import ray_options
from agent.cli.output import console, progress_bar, repeat_hint, spinner
from agent.core.errors import ScholarloopError
from agent.core.jsonl import resume_lines
from agent.core.state import Answer, Status

__all__ = [
    "BenchSystem",
    "ScholarloopSystem",
    "bench_command",
    "bench_meta",
    "check_sets",
    "doi_index",
    "gold_documents",
    "grade_one",
    "load_graded",
    "run_bench",
]


def doi_index(library: Any) -> dict[str, set[str]]:
    """DOI (lower-case) -> every doc id holding it: corpus passages of one paper share a DOI."""
    by_doi: dict[str, set[str]] = {}
    for p in library.papers:
        if p.doi:
            by_doi.setdefault(p.doi.lower(), set()).add(p.doc_id)
    return by_doi


def gold_documents(sources: list[str], library: Any, by_doi: dict[str, set[str]] | None = None) -> set[str]:
    """Doc ids a question's ``sources`` name: DOI URLs (LitQA2) or corpus doc ids.

    Pass ``by_doi`` (from :func:`doi_index`) when grading many questions of one library.
    """
    by_doi = doi_index(library) if by_doi is None else by_doi
    gold: set[str] = set()
    for s in sources:
        s = s.strip()
        doi = s.lower().removeprefix("https://doi.org/").removeprefix("doi:")
        if doi in by_doi:
            gold |= by_doi[doi]
        else:
            try:
                library.paper(s)
                gold.add(s)
            except KeyError:
                continue
    return gold


class BenchSystem(Protocol):
    """A question-answering system under benchmark: returns an :class:`Answer` to grade."""

    name: str

    async def answer(self, question: str, options: list[str] | None, exclude_doc_ids: set[str]) -> Answer: ...


class ScholarloopSystem:
    """This project's agent, through its public :class:`agent.api.Session`."""

    name = "scholarloop"

    def __init__(self, session: Any) -> None:
        self.session = session

    async def answer(self, question: str, options: list[str] | None, exclude_doc_ids: set[str]) -> Answer:
        result: Answer = await self.session.ask(question, options=options, exclude_doc_ids=exclude_doc_ids)
        return result


def load_graded(path: Path) -> dict[str, Graded]:
    """The graded rows of a run's questions.jsonl, by resume key (:func:`row_key`).

    A last line a crash tore is cut from the file (:func:`resume_lines`), so the rows appended
    next are whole lines and the question it held is graded once more, not twice.
    """
    done: dict[str, Graded] = {}
    for line in resume_lines(path):
        try:
            g = Graded.model_validate_json(line)
        except ValueError:
            continue  # an older version's glued line: its question is redone
        done[g.key] = g
    return done


async def run_bench(
    sets: list[Path],
    session: Any,
    out: Path,
    *,
    limit: int | None,
    seed: int,
    withhold: bool,
    repeats: int = 1,
    systems: Sequence[BenchSystem] | None = None,
    free_text: bool = False,
    progress: bool = True,
) -> dict[str, Any]:
    """Answer, grade and report; ``session`` supplies the library (gold sources) and the judge."""
    from agent.bench.grading import load_set, sample, set_name
    from agent.bench.report import write_report

    out.mkdir(parents=True, exist_ok=True)
    results_path = out / "questions.jsonl"
    done = load_graded(results_path)
    by_doi = doi_index(session.library)
    systems = list(systems) if systems else [ScholarloopSystem(session)]
    rows: list[Graded] = []
    # Questions outermost, systems innermost: an interrupted side-by-side run still compares
    # the systems on the same questions, and a resume fills in the rest.
    with progress_bar(silent=not progress) as bar:
        for set_path in sets:
            name = set_name(set_path)
            questions: list[BenchQuestion] = sample(load_set(set_path), limit, seed)
            task = bar.add_task(name, total=len(questions) * repeats * len(systems))
            mine: dict[str, list[Graded]] = {s.name: [] for s in systems}
            for repeat in range(repeats):
                for q in questions:
                    for system in systems:
                        graded = done.get(row_key(system.name, name, q.id, repeat))
                        if graded is None:
                            graded = await grade_one(
                                system, session, by_doi, q, seed + repeat, withhold, free_text
                            )
                            graded = graded.model_copy(
                                update={"system": system.name, "set_name": name, "repeat": repeat}
                            )
                            with results_path.open("a") as fh:
                                fh.write(graded.model_dump_json() + "\n")
                        mine[system.name].append(graded)
                        accs = " ".join(
                            f"{who} {sum(r.correct for r in got) / len(got):.2f}"
                            for who, got in mine.items()
                            if got
                        )
                        bar.update(task, advance=1, description=f"{name} acc {accs}")
            for got in mine.values():
                rows += got
    return write_report(out, rows, bench_meta(session.settings, seed, repeats, withhold, free_text))


def bench_meta(settings: Any, seed: int, repeats: int, withhold: bool, free_text: bool) -> dict[str, Any]:
    """What a report says about how it was run (the local and the Ray runs say the same)."""
    return {
        "seed": seed,
        "repeats": repeats,
        "withhold_sources": withhold,
        "free_text": free_text,
        "settings": settings.preset,
    }


async def grade_one(
    system: BenchSystem,
    session: Any,
    by_doi: dict[str, set[str]],
    q: BenchQuestion,
    seed: int,
    withhold: bool,
    free_text: bool,
) -> Graded:
    from agent.bench.grading import extract_choice, extract_choice_llm, grade, present

    options = present(q, seed)
    gold = gold_documents(q.sources, session.library, by_doi)
    answer = await system.answer(q.question, None if free_text else options, gold if withhold else set())
    prose = answer.choice is None and answer.status is Status.answered and bool(answer.answer.strip())
    if not free_text and prose and extract_choice(answer.answer, options) is None:
        # prose that names no option (paper-qa's style): a model reads it, as aviary grades
        choice = await extract_choice_llm(session.llms["answer"], answer.answer, options)
        answer = answer.model_copy(update={"choice": choice})
    if withhold:
        q = q.model_copy(update={"answerable": False})
    free = None
    if free_text:
        from agent.bench.freetext import score_free_text

        # the judge grades against the span only where an answer is expected
        span = q.ideal if q.answerable else None
        # withheld sources cannot be cited, so "right paper cited" does not apply there
        cite_gold = set() if withhold else gold
        free = await score_free_text(
            q.question, span, answer, cite_gold, session.llms["judge"], q.ideal if withhold else None
        )
    graded = grade(q, options, answer, gold, free)
    if free_text:
        from agent.bench.ragas import ragas_scores

        reference = f"{q.question} {q.ideal}" if q.ideal else None
        graded.ragas = await ragas_scores(answer, reference, session)
    return graded


def check_sets(ctx: click.Context, sets: Sequence[Path]) -> None:
    """Load every set once so a bad one fails at once, naming the file, the line and the format.

    A file that follows a ``--corpus`` value is a corpus the user meant to pass with it: that is
    a usage error, answered with "repeat --corpus".
    """
    from agent.bench.grading import load_set

    for path in sets:
        try:
            load_set(path)
        except ScholarloopError as exc:
            hint = repeat_hint(ctx, str(path))
            if hint:
                raise click.UsageError(f"{path} is not a question set: {hint}", ctx) from exc
            raise


def _systems(names: Sequence[str], session: Any, stack: Any) -> list[BenchSystem]:
    out: list[BenchSystem] = []
    for name in names:
        if name == "scholarloop":
            out.append(ScholarloopSystem(session))
        else:
            from agent.bench.paperqa import PaperQASystem

            out.append(stack.enter_context(PaperQASystem.serving(session)))
    return out


def default_bench_index(home: Path, corpus: Sequence[Path]) -> Path:
    """One cached index per set of corpus paths: a run over other files never reuses (and grows)
    an index that holds documents it did not ask for."""
    key = "\n".join(sorted(str(p.expanduser().resolve()) for p in corpus))
    return home / "bench-index" / hashlib.sha256(key.encode()).hexdigest()[:12]


@click.command("bench")
@click.argument("sets", nargs=-1, required=True, type=click.Path(path_type=Path, exists=True, dir_okay=False))
@click.option("--index", type=click.Path(path_type=Path, file_okay=False), help="Index of the corpus.")
@click.option(
    "--corpus",
    multiple=True,
    type=click.Path(path_type=Path, exists=True),
    metavar="PATH",
    help="A corpus file or folder, indexed into --index (default: one index per set of --corpus paths "
    "under $SCHOLARLOOP_HOME/bench-index) or reused; "
    "repeat --corpus for each: --corpus A.jsonl --corpus B.jsonl.gz.",
)
@click.option("--limit", type=int, help="Seeded sample of N questions per set.")
@click.option("--seed", default=0, show_default=True)
@click.option(
    "--repeats", default=1, show_default=True, help="Runs per question, each with its own option order."
)
@click.option(
    "--withhold-sources", is_flag=True, help="Hide each question's sources: the right answer is to abstain."
)
@click.option(
    "--system",
    "system_names",
    multiple=True,
    type=click.Choice(["scholarloop", "paperqa"]),
    default=("scholarloop",),
    show_default=True,
    help="A system to run; repeat --system to compare systems side by side on the same sample.",
)
@click.option(
    "--free-text",
    is_flag=True,
    help="Ask without options; score the answer against the reference span (token F1, containment, "
    "a judge's verdict, right paper cited) and the RAGAS four.",
)
@click.option("--out", type=click.Path(path_type=Path, file_okay=False), required=True)
@ray_options
@click.pass_obj
def bench_command(
    obj: Any,
    sets: tuple[Path, ...],
    index: Path | None,
    corpus: tuple[Path, ...],
    limit: int | None,
    seed: int,
    repeats: int,
    withhold_sources: bool,
    system_names: tuple[str, ...],
    free_text: bool,
    out: Path,
    ray_address: str | None,
    workers: int,
) -> None:
    """Benchmark on LitQA2-style multiple-choice SETS; rerun with the same --out to resume.

    A set is JSONL (gzipped too), one question a line: "question", "ideal" (null when the corpus
    holds no answer), "distractors", and optionally "id", "sources", "answerable", "tag".
    """
    from contextlib import ExitStack

    from agent.api import Session

    settings = obj.settings
    check_sets(click.get_current_context(), sets)  # before the index build, which can take minutes
    if ray_address is not None and system_names != ("scholarloop",):
        raise click.UsageError("--ray runs the scholarloop system only; leave out --system paperqa")
    if corpus:
        index = index or default_bench_index(settings.home, corpus)
        build_with_progress(list(corpus), index, settings, silent=obj.silent)
    if ray_address is not None:
        from agent.cli.distributed import run_bench_on_ray
        from agent.distributed import SessionRecipe

        report = asyncio.run(
            run_bench_on_ray(
                list(sets),
                SessionRecipe.resolve(index=index, settings=settings),
                out,
                limit=limit,
                seed=seed,
                withhold=withhold_sources,
                repeats=repeats,
                free_text=free_text,
                progress=not obj.silent,
                address=ray_address,
                workers=workers,
            )
        )
        _print_report(obj, report, out)
        return
    with spinner(console(silent=obj.silent), "opening the index and loading models…"):
        session = Session(index=index, settings=settings)
    with ExitStack() as stack:
        with spinner(console(silent=obj.silent), f"starting {', '.join(system_names)}…"):
            systems = _systems(system_names, session, stack)
        report = asyncio.run(
            run_bench(
                list(sets),
                session,
                out,
                limit=limit,
                seed=seed,
                withhold=withhold_sources,
                repeats=repeats,
                systems=systems,
                free_text=free_text,
                progress=not obj.silent,
            )
        )
    _print_report(obj, report, out)


def _print_report(obj: Any, report: dict[str, Any], out: Path) -> None:
    from agent.bench.report import side_by_side

    if obj.as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        click.echo(side_by_side(report))
        click.echo(f"\nreport: {out / 'report.md'}  ({out / 'report.json'}, {out / 'questions.jsonl'})")
