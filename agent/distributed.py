"""Batches on Ray: a fixed set of worker actors, each holding one :class:`Session`.

A batch on one machine is bound by the models: the local llama.cpp model is one queue per
process, so ``concurrency`` helps API models and not the local one. Ray spreads the work over
processes (and machines): ``workers`` actors each build their own session from a picklable
:class:`SessionRecipe` (settings, index path, an optional model factory), load its models once,
and then answer question after question. The driver keeps everything that must stay in one
place: it reads the resume file, hands out the questions, appends each answer to the same file
in the same format as it arrives, and returns the answers in input order. So a batch started
locally can be resumed on Ray, and the other way round.

The driver pulls rather than pushes: each worker has ``concurrency`` slots, and a slot takes the
next question when its last one is done, so a worker stuck on a long question does not hold a
queue of others. A question that raises becomes a failed answer, as on the local path; a worker
process that dies fails the question it held, Ray restarts it (models reloaded), and the batch
goes on. Ray is imported only when a batch asks for it, so the package works without the
``ray`` extra.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.api import Session, answer_item, answered, append_answer, library_for_papers, question_id
from agent.core.errors import ConfigError, ScholarloopError
from agent.core.settings import Settings, load_settings
from agent.core.state import Answer, Status
from agent.llm import switch

if TYPE_CHECKING:
    from agent.llm.base import BaseLLM

__all__ = ["LOCAL", "Job", "SessionRecipe", "aask_many_on_ray", "connect", "run_on_actors"]

LOCAL = "local"
"""The address that starts a Ray instance on this machine (``--ray`` with no value)."""

# A job runs inside a worker with that worker's session; it and its payload travel by pickle.
Job = Callable[[Session, Any], Awaitable[Any]]
LLMFactory = Callable[[Settings], "dict[str, BaseLLM]"]
# Ray restarts a worker whose process died this many times (reloading its models) before the
# batch goes on without it.
MAX_RESTARTS = 3


@dataclass(frozen=True)
class SessionRecipe:
    """What a worker needs to build its own :class:`Session`: plain values that pickle.

    ``llms`` is a factory (a module-level function, so it pickles by name) that builds the role
    models inside the worker; ``None`` resolves them from the settings, as a session does.
    ``allow_model_requests`` carries the driver's model switch (:mod:`agent.llm.switch`) into
    the workers, so the test suite's ban on real model calls holds in every process.
    """

    settings: Settings
    index: Path | None = None
    online: bool = False
    llms: LLMFactory | None = None
    allow_model_requests: bool = field(default_factory=switch.model_requests_allowed)

    @classmethod
    def resolve(
        cls,
        *,
        papers: str | Path | None = None,
        index: str | Path | None = None,
        online: bool = False,
        settings: Settings | None = None,
        llms: LLMFactory | None = None,
        **overrides: Any,
    ) -> SessionRecipe:
        """Settings resolved as :class:`Session` does; a papers folder is indexed here, once.

        Indexing in the driver keeps the workers from indexing the same folder at the same time.
        """
        if settings is None:
            settings = load_settings(overrides.pop("config", None), **overrides)
        elif overrides:
            settings = settings.with_overrides(**overrides)
        root = Path(index).expanduser().resolve() if index is not None else None
        if root is None and papers is not None:
            root = library_for_papers(Path(papers), settings)
        return cls(settings=settings, index=root, online=online, llms=llms)

    def build(self, threads: int | None = None) -> Session:
        """The worker's session; ``threads`` is its share of the cores for llama.cpp, unless set."""
        switch.ALLOW_MODEL_REQUESTS = self.allow_model_requests
        settings = self.settings
        if threads and settings.llm.local.n_threads is None:
            settings = settings.with_overrides(llm__local__n_threads=threads)
        llms = self.llms(settings) if self.llms is not None else None
        return Session(index=self.index, online=self.online, settings=settings, llms=llms)


class _SessionWorker:
    """A Ray actor: one session, its models loaded at start, running jobs as they come.

    A session that cannot be built (a missing API key, a bad index) is reported by
    :meth:`ready` as text: the exception itself may not survive the trip back (ours take
    arguments that pickle does not restore), and its message is what the user needs.
    """

    def __init__(self, recipe: SessionRecipe, threads: int | None) -> None:
        self.error: str | None = None
        try:
            self.session = recipe.build(threads)
            for llm in {id(m): m for m in self.session.llms.values()}.values():
                load = getattr(llm, "loaded", None)  # the local provider loads its model lazily
                if callable(load) and recipe.allow_model_requests:
                    load()
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"

    async def ready(self) -> str | None:
        return self.error

    async def run(self, job: Job, payload: Any) -> Any:
        return await job(self.session, payload)


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ConfigError(
            'Ray is not installed: pip install "scholarloop[ray]" (or run without --ray)'
        ) from exc
    return ray


def connect(address: str) -> bool:
    """Start a local Ray instance (``"local"``) or connect to ``address``; True if this call did.

    A Ray already initialised in this process (a notebook, a test) is used as it is.
    """
    ray = _ray()
    if ray.is_initialized():
        return False
    quiet = {"log_to_driver": False, "logging_level": logging.WARNING}
    if address == LOCAL:
        ray.init(num_cpus=os.cpu_count() or 1, include_dashboard=False, **quiet)
    else:
        ray.init(address=address, **quiet)
    return True


def _cause(exc: BaseException) -> BaseException:
    """The job's own exception out of Ray's wrapper, where there is one."""
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, BaseException) else exc


async def _start(ray: Any, recipe: SessionRecipe, address: str, workers: int) -> list[Any]:
    cpus = float(ray.cluster_resources().get("CPU", 1.0))
    # On this machine the workers share its cores; on a cluster each node's llama.cpp keeps them
    # all unless llm.local.n_threads says otherwise.
    threads = max(1, (os.cpu_count() or 1) // workers) if address == LOCAL else None
    actor = ray.remote(_SessionWorker).options(
        num_cpus=min(1.0, cpus / workers), max_restarts=MAX_RESTARTS, scheduling_strategy="SPREAD"
    )
    actors = [actor.remote(recipe, threads) for _ in range(workers)]
    try:
        errors = [e for e in await asyncio.gather(*(a.ready.remote() for a in actors)) if e]
    except ray.exceptions.RayError as exc:  # a worker process that died while starting
        errors = [str(exc)]
    if errors:
        for a in actors:
            ray.kill(a)
        raise ConfigError(f"a Ray worker could not build its session: {errors[0]}")
    return actors


async def _back(ray: Any, actor: Any) -> bool:
    """Whether a worker whose process died is back (Ray restarted it) rather than gone for good."""
    while True:
        try:
            return await actor.ready.remote() is None
        except ray.exceptions.ActorUnavailableError:  # still restarting
            await asyncio.sleep(0.5)
        except ray.exceptions.RayError:
            return False


async def run_on_actors(
    recipe: SessionRecipe,
    job: Job,
    payloads: Sequence[Any],
    on_done: Callable[[int, Any], None],
    *,
    address: str = LOCAL,
    workers: int = 2,
    concurrency: int = 1,
    on_ready: Callable[[], None] | None = None,
) -> None:
    """Run ``job(session, payload)`` for every payload on ``workers`` actors, calling
    ``on_done(i, result)`` in the driver as each finishes, in completion order.

    A job that raises, or whose worker died, gives ``on_done(i, exception)``; the rest go on.
    Payloads left when every worker has died for good are reported the same way. ``on_ready``
    is called once every worker has built its session and loaded its models.
    """
    ray = _ray()
    if not payloads:  # all answered already: no workers to start, no models to load
        return
    owned = connect(address)
    try:
        actors = await _start(ray, recipe, address, max(1, workers))
        if on_ready is not None:
            on_ready()
        pending = iter(range(len(payloads)))  # shared by every slot: each takes the next one

        async def slot(actor: Any) -> None:
            for i in pending:
                try:
                    result = await actor.run.remote(job, payloads[i])
                except ray.exceptions.RayActorError as exc:
                    on_done(i, exc)
                    if not await _back(ray, actor):
                        return
                    continue
                except ray.exceptions.RayError as exc:
                    result = _cause(exc)
                on_done(i, result)

        try:
            await asyncio.gather(*(slot(a) for a in actors for _ in range(max(1, concurrency))))
        finally:
            for a in actors:
                ray.kill(a)
        for i in pending:
            on_done(i, ScholarloopError("every Ray worker died; rerun with the same out file to resume"))
    finally:
        if owned:
            ray.shutdown()


async def aask_many_on_ray(
    items: Sequence[dict[str, Any]],
    recipe: SessionRecipe,
    *,
    address: str = LOCAL,
    workers: int = 2,
    concurrency: int = 1,
    out: str | Path | None = None,
    progress: bool = True,
) -> list[Answer]:
    """:func:`agent.api.aask_many` on Ray: the same resume file, the same order, the same failures.

    ``items`` are loaded questions (:func:`agent.api.load_questions`). Questions already
    answered in ``out`` are not sent; each new answer is appended there as it arrives.
    """
    out_path = Path(out) if out is not None else None
    done = answered(out_path, {question_id(item) for item in items}) if out_path else {}
    results: list[Answer | None] = [None] * len(items)
    todo: list[int] = []
    for i, item in enumerate(items):
        row = done.get(question_id(item))
        if row is None:
            todo.append(i)
        else:
            results[i] = Answer.model_validate({k: v for k, v in row.items() if k != "id"})
    from rich.console import Console
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), disable=not progress, transient=False) as bar:
        label = f"questions ({workers} Ray workers)"
        starting = f"{label}: loading models" if todo else label
        task = bar.add_task(starting, total=len(items), completed=len(items) - len(todo))

        def finished(n: int, result: Any) -> None:
            i = todo[n]
            item = items[i]
            answer = result
            if not isinstance(result, Answer):  # the worker died under it
                cause = _cause(result)
                error = f"{type(cause).__name__}: {cause}"
                answer = Answer(question=item["question"], status=Status.failed, answer="", error=error)
            results[i] = answer
            if out_path is not None:
                append_answer(out_path, question_id(item), answer)
            bar.advance(task)

        await run_on_actors(
            recipe,
            answer_item,
            [items[i] for i in todo],
            finished,
            address=address,
            workers=workers,
            concurrency=concurrency,
            on_ready=lambda: bar.update(task, description=label),
        )
    return [r for r in results if r is not None]
