"""``scholarloop bench``: run LitQA2-style sets through the agent and write a report (resumable)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import click

__all__ = ["bench_command", "gold_documents", "run_bench"]


def gold_documents(sources: list[str], library: Any) -> set[str]:
    """Doc ids a question's ``sources`` name: DOI URLs (LitQA2) or corpus doc ids."""
    by_doi: dict[str, set[str]] = {}
    for p in library.papers:
        if p.doi:
            by_doi.setdefault(p.doi.lower(), set()).add(p.doc_id)
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


async def run_bench(
    sets: list[Path],
    session: Any,
    out: Path,
    *,
    limit: int | None,
    seed: int,
    withhold: bool,
    progress: bool = True,
) -> dict[str, Any]:
    from rich.progress import Progress

    from agent.bench import Graded, grade, load_set, metrics, present, sample

    out.mkdir(parents=True, exist_ok=True)
    results_path = out / "questions.jsonl"
    done: dict[str, Graded] = {}
    if results_path.exists():
        for line in results_path.read_text().splitlines():
            try:
                g = Graded.model_validate_json(line)
            except ValueError:
                continue  # a line torn by a crash is redone
            done[g.id] = g
    report: dict[str, Any] = {
        "seed": seed,
        "withhold_sources": withhold,
        "settings": session.settings.preset,
        "sets": {},
    }
    for set_path in sets:
        questions = sample(load_set(set_path), limit, seed)
        rows: list[Graded] = []
        with Progress(disable=not progress) as bar:
            task = bar.add_task(set_path.stem, total=len(questions))
            for q in questions:
                key = f"{set_path.stem}:{q.id}"
                if key in done:
                    rows.append(done[key])
                    bar.advance(task)
                    continue
                options = present(q, seed)
                gold = gold_documents(q.sources, session.library)
                answer = await session.ask(
                    q.question, options=options, exclude_doc_ids=gold if withhold else ()
                )
                if withhold:
                    q = q.model_copy(update={"answerable": False})
                graded = grade(q, options, answer, gold).model_copy(update={"id": key})
                rows.append(graded)
                with results_path.open("a") as fh:
                    fh.write(graded.model_dump_json() + "\n")
                acc = sum(r.correct for r in rows) / len(rows)
                bar.update(task, advance=1, description=f"{set_path.stem} acc {acc:.2f}")
        report["sets"][set_path.stem] = metrics(rows)
    tmp = out / "report.json.tmp"
    tmp.write_text(json.dumps(report, indent=2))
    tmp.replace(out / "report.json")
    return report


@click.command("bench")
@click.argument("sets", nargs=-1, required=True, type=click.Path(path_type=Path, exists=True, dir_okay=False))
@click.option("--index", type=click.Path(path_type=Path, file_okay=False), help="Index of the corpus.")
@click.option(
    "--corpus", multiple=True, type=click.Path(path_type=Path, exists=True), help="Corpus files to index."
)
@click.option("--limit", type=int, help="Seeded sample of N questions per set.")
@click.option("--seed", default=0, show_default=True)
@click.option(
    "--withhold-sources", is_flag=True, help="Hide each question's sources: the right answer is to abstain."
)
@click.option("--out", type=click.Path(path_type=Path, file_okay=False), required=True)
@click.pass_obj
def bench_command(
    obj: Any,
    sets: tuple[Path, ...],
    index: Path | None,
    corpus: tuple[Path, ...],
    limit: int | None,
    seed: int,
    withhold_sources: bool,
    out: Path,
) -> None:
    """Benchmark on LitQA2-style multiple-choice SETS; rerun with the same --out to resume."""
    from agent.api import Session

    settings = obj.settings
    if corpus:
        from corpus.build import build_index, iter_sources

        index = index or settings.home / "bench-index"
        build_index(list(iter_sources(list(corpus))), index, settings)
    session = Session(index=index, settings=settings)
    report = asyncio.run(
        run_bench(
            list(sets),
            session,
            out,
            limit=limit,
            seed=seed,
            withhold=withhold_sources,
            progress=not (obj.quiet or obj.as_json),
        )
    )
    click.echo(json.dumps(report, indent=2))
