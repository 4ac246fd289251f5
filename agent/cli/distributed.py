"""``--ray`` for ``scholarloop batch`` and ``bench``: the options, and the benchmark run on Ray.

The benchmark's questions are answered and graded inside the workers (:mod:`agent.distributed`):
the choice extraction, the free-text judge and the RAGAS metrics need the worker's models, so
grading travels with the answer and only a :class:`Graded` row comes back. The driver keeps the
run's bookkeeping as :func:`agent.cli.bench.run_bench` does: the same sample, seeds and option
order, the same ``questions.jsonl`` rows and resume keys, and the report built from the rows in
the same order, so a local run can be resumed on Ray and back.

A question whose grading raises is not written, so a rerun with the same ``--out`` does it
again; the others finish first and the run then fails naming it (the local runner stops at the
first). Ray and the application are imported when a run starts, not when the command line loads.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from agent.bench.grading import BenchQuestion, Graded, load_set, row_key, sample, set_name
from agent.cli.output import progress_bar

if TYPE_CHECKING:
    from agent.api import Session
    from agent.distributed import SessionRecipe

__all__ = ["BenchJob", "grade_job", "ray_options", "run_bench_on_ray"]

F = TypeVar("F", bound=Callable[..., Any])
SYSTEM = "scholarloop"  # the one system a Ray run benchmarks

# A worker's DOI index, built once per session: every question of the run grades against it.
_DOIS: weakref.WeakKeyDictionary[Any, dict[str, set[str]]] = weakref.WeakKeyDictionary()


def _address(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    # `--ray questions.txt` reads the file as the address: say so, instead of "missing argument"
    if value is not None and value != "local" and Path(value).exists():
        raise click.BadParameter(
            f"'{value}' is a file, taken as the Ray address: put --ray after it, or write --ray=ADDRESS",
            ctx,
            param,
        )
    return value


def ray_options(command: F) -> F:
    """``--ray [ADDRESS]`` and ``--workers N``: passed to the command as ``ray_address`` and ``workers``."""
    command = click.option(
        "--workers",
        default=2,
        show_default=True,
        type=click.IntRange(min=1),
        metavar="N",
        help="Ray worker actors (with --ray); each builds its own session and loads its own models.",
    )(command)
    command = click.option(
        "--ray",
        "ray_address",
        is_flag=False,
        flag_value="local",
        default=None,
        metavar="[ADDRESS]",
        callback=_address,
        help="Run the questions on Ray (the 'ray' extra): alone, on a Ray instance started on this "
        "machine; with ADDRESS (auto, HOST:6379, ray://HOST:10001), on that cluster. Same resume "
        "file and order as without.",
    )(command)
    return command


@dataclass(frozen=True)
class BenchJob:
    """One question of one repeat of one set: what a worker needs to answer and grade it."""

    question: BenchQuestion
    set_name: str
    repeat: int
    seed: int
    withhold: bool
    free_text: bool

    @property
    def key(self) -> str:
        return row_key(SYSTEM, self.set_name, self.question.id, self.repeat)


async def grade_job(session: Session, job: BenchJob) -> Graded:
    """Runs in a worker: the question through its session, graded as the local runner grades it."""
    from agent.cli.bench import ScholarloopSystem, doi_index, grade_one

    if session not in _DOIS:
        _DOIS[session] = doi_index(session.library)
    graded = await grade_one(
        ScholarloopSystem(session),
        session,
        _DOIS[session],
        job.question,
        job.seed + job.repeat,
        job.withhold,
        job.free_text,
    )
    return graded.model_copy(update={"system": SYSTEM, "set_name": job.set_name, "repeat": job.repeat})


async def run_bench_on_ray(
    sets: list[Path],
    recipe: SessionRecipe,
    out: Path,
    *,
    limit: int | None,
    seed: int,
    withhold: bool,
    repeats: int = 1,
    free_text: bool = False,
    progress: bool = True,
    address: str = "local",
    workers: int = 2,
) -> dict[str, Any]:
    """:func:`agent.cli.bench.run_bench` for the scholarloop system, its questions on Ray."""
    from agent.bench.report import write_report
    from agent.cli.bench import bench_meta, load_graded
    from agent.core.errors import ScholarloopError
    from agent.distributed import run_on_actors

    out.mkdir(parents=True, exist_ok=True)
    results_path = out / "questions.jsonl"
    done = load_graded(results_path)
    # the local runner's order: set by set, repeat by repeat, question by question
    plan = [
        BenchJob(q, set_name(path), repeat, seed, withhold, free_text)
        for path in sets
        for repeat in range(repeats)
        for q in sample(load_set(path), limit, seed)
    ]
    todo = [job for job in plan if job.key not in done]
    failed: dict[str, str] = {}
    with progress_bar(silent=not progress) as bar:
        label = f"{workers} Ray workers"
        starting = f"{label}: loading models" if todo else label
        task = bar.add_task(starting, total=len(plan), completed=len(plan) - len(todo))

        def finished(n: int, result: Any) -> None:
            job = todo[n]
            if isinstance(result, Graded):
                done[job.key] = result
                with results_path.open("a") as fh:
                    fh.write(result.model_dump_json() + "\n")
            else:
                failed[job.key] = f"{type(result).__name__}: {result}"
            got = [done[j.key] for j in plan if j.key in done]
            acc = sum(g.correct for g in got) / len(got) if got else 0.0
            bar.update(task, advance=1, description=f"{label} acc {acc:.2f}")

        await run_on_actors(
            recipe,
            grade_job,
            todo,
            finished,
            address=address,
            workers=workers,
            on_ready=lambda: bar.update(task, description=label),
        )
    if failed:
        key, error = next(iter(failed.items()))
        raise ScholarloopError(
            f"{len(failed)} question(s) failed, first {key}: {error}; rerun with the same --out to retry them"
        )
    rows = [done[job.key] for job in plan]
    return write_report(out, rows, bench_meta(recipe.settings, seed, repeats, withhold, free_text))
