"""The Python API: ``ask`` / ``aask`` for one question, ``ask_many`` / ``aask_many`` for a batch.

``ask`` works in a plain REPL and inside a running event loop (Jupyter): there it runs the
question on a worker thread with its own loop and returns the :class:`Answer`, never a bare
Task. A :class:`Session` holds what questions share (settings, library, search, models), so a
batch loads the models and the index once.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import os
from collections.abc import Callable, Collection, Coroutine, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from agent.core.errors import ConfigError, ScholarloopError
from agent.core.evidence import is_insufficient
from agent.core.jsonl import json_objects, read_text, resume_lines
from agent.core.settings import Settings, load_settings
from agent.core.state import INSUFFICIENT, Answer, RunState, Status
from agent.llm.base import BaseLLM
from agent.llm.factory import resolve_role_llms
from agent.loop import TOOLS, run_loop
from agent.policy import LLMPolicy, PipelinePolicy, Policy
from corpus.search import Filters, LocalSearch
from corpus.store import Library, write_atomic
from tools.base import ToolContext

__all__ = [
    "Session",
    "aask",
    "aask_many",
    "answer_item",
    "answered",
    "append_answer",
    "ask",
    "ask_many",
    "library_for_papers",
    "load_questions",
    "question_id",
]

EventCallback = Callable[[str, dict[str, Any]], None]
P = ParamSpec("P")
T = TypeVar("T")


def library_for_papers(papers: Path, settings: Settings, quiet: bool = True) -> Path:
    """Index a folder of papers once (and incrementally after), under the scholarloop home."""
    from corpus.build import build_index

    papers = papers.expanduser().resolve()
    if not papers.exists():
        raise ConfigError(f"papers path {papers} does not exist")
    digest = hashlib.sha256(str(papers).encode()).hexdigest()[:12]
    root = settings.home / "libraries" / f"{papers.name}-{digest}"
    build_index([papers], root, settings)
    return root


class Session:
    """Settings, library, search and models shared by the questions of one session."""

    def __init__(
        self,
        *,
        papers: str | Path | None = None,
        index: str | Path | None = None,
        online: bool = False,
        settings: Settings | None = None,
        llms: dict[str, BaseLLM] | None = None,
        **overrides: Any,
    ) -> None:
        if settings is None:
            settings = load_settings(overrides.pop("config", None), **overrides)
        elif overrides:
            settings = settings.with_overrides(**overrides)
        if online:
            settings = settings.model_copy(
                update={"online": settings.online.model_copy(update={"enabled": True})}
            )
        self.settings = settings
        if index is not None:
            root = Path(index)
        elif papers is not None:
            root = library_for_papers(Path(papers), settings)
        else:
            root = settings.home / "index"
            if not (root / "manifest.json").exists() and not settings.online.enabled:
                raise ConfigError(
                    "no papers to answer from: pass papers=DIR (a folder of PDFs/text), index=DIR "
                    "(built with `scholarloop index build`), or online=True"
                )
        from corpus.embeddings import make_embedder

        if (root / "manifest.json").exists():
            self.library = Library.open(root)
        else:  # online only: papers found online are collected in a new library
            embedder = make_embedder(settings.embedding.model)
            self.library = Library.open_or_create(
                root,
                embedder=embedder.name,
                dim=embedder.dim,
                chunk_chars=settings.chunking.chunk_chars,
                overlap_chars=settings.chunking.overlap_chars,
                index_kind=settings.retrieval.index_kind,
            )
        self.searcher = LocalSearch(
            self.library,
            make_embedder(self.library.manifest.embedder),
            hybrid_weight=settings.retrieval.hybrid_weight,
        )
        self.llms = llms if llms is not None else resolve_role_llms(settings)
        self.online: Any = None
        if settings.online.enabled:
            from tools.online_search import OnlineSearch

            self.online = OnlineSearch(settings, self.searcher)

    def policy(self) -> Policy:
        return LLMPolicy(TOOLS) if self.settings.agent.policy == "llm" else PipelinePolicy()

    async def ask(
        self,
        question: str,
        *,
        options: Sequence[str] | None = None,
        exclude_doc_ids: Iterable[str] = (),
        on_event: EventCallback | None = None,
    ) -> Answer:
        opts = list(options) if options else None
        if opts is not None and not any(is_insufficient(o) for o in opts):
            opts.append(INSUFFICIENT)
        base = Filters(exclude_doc_ids=set(exclude_doc_ids))
        ctx = ToolContext(
            state=RunState(question=question, options=opts),
            settings=self.settings,
            llms=self.llms,
            searcher=self.searcher,
            filters=base,
            on_event=on_event,
            base_filters=base,
            online=self.online,
        )
        return await run_loop(ctx, self.policy())


async def aask(
    question: str,
    *,
    papers: str | Path | None = None,
    index: str | Path | None = None,
    online: bool = False,
    settings: Settings | None = None,
    options: Sequence[str] | None = None,
    on_event: EventCallback | None = None,
    **overrides: Any,
) -> Answer:
    """Answer one question (async); :func:`ask` does the same from a plain REPL or Jupyter.

    Args:
        question: the question, in plain words.
        papers: a folder (or file) of PDFs/text/JSONL, indexed once under the scholarloop home.
        index: an index built with ``scholarloop index build`` (instead of ``papers``).
        online: also search Semantic Scholar and Crossref and fetch open-access PDFs.
        settings: resolved settings; default: the ``default`` preset plus the environment.
        options: multiple-choice options; the insufficient-information option is added.
        on_event: called with each step and observation as the run goes.
        overrides: settings by dotted path with ``__``, e.g. ``llm__judge="claude-haiku-4-5"``,
            or ``config="fast"`` for a preset.
    """
    session = Session(papers=papers, index=index, online=online, settings=settings, **overrides)
    return await session.ask(question, options=options, on_event=on_event)


def _run_sync(coro_factory: Callable[[], Any]) -> Any:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro_factory())
    # Inside a running loop (Jupyter): a worker thread with its own loop, and we wait for it.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="scholarloop") as pool:
        return pool.submit(lambda: asyncio.run(coro_factory())).result()


def question_id(item: dict[str, Any]) -> str:
    return str(item.get("id") or hashlib.sha256(item["question"].encode()).hexdigest()[:12])


def load_questions(source: str | Path | Sequence[str | dict[str, Any]]) -> list[dict[str, Any]]:
    """Questions as strings, dicts with ``question`` (and ``id``, ``options``), or a file.

    A file is a ``Path``, or a string naming a .txt / .jsonl file (either may be gzipped): .txt
    holds one question a line, .jsonl one object a line with ``question``. A file that is not
    that (binary, bad JSON, no ``question``) raises :class:`ConfigError` naming the file, the
    line and the expected format.
    """
    suffixes = (".txt", ".jsonl", ".txt.gz", ".jsonl.gz")
    if isinstance(source, Path) or (isinstance(source, str) and source.endswith(suffixes)):
        path = Path(source)
        expected = (
            "expected a .txt file (one question a line) or .jsonl (one JSON object a line with "
            '"question", optionally "id" and "options"), either one gzipped or not'
        )
        if not path.exists():
            raise ConfigError(f"questions file {path} does not exist")
        if not path.name.endswith(suffixes):
            raise ConfigError(f"{path}: unknown questions file type; {expected}")
        text = read_text(path, expected)
        if path.name.removesuffix(".gz").endswith(".txt"):
            return [{"question": line.strip()} for line in text.splitlines() if line.strip()]
        items = []
        for n, row in json_objects(path, text, expected):
            if not isinstance(row.get("question"), str) or not row["question"].strip():
                raise ConfigError(f"{path}:{n}: no 'question' field with text; {expected}")
            items.append(row)
        return items
    if isinstance(source, str):
        return [{"question": source}]
    return [{"question": q} if isinstance(q, str) else dict(q) for q in source]


def answered(out: Path, retry: Collection[str] | None = None) -> dict[str, dict[str, Any]]:
    """The rows of a resume file that need no rerun, by id: a failed answer is tried again.

    ``retry``: the ids this run asks (None: every id). Their failed rows are dropped from the
    file, since the retry's row replaces them, and so are unreadable lines (a crash's torn last line, cut by
    :func:`resume_lines`, or an older version's glued one) and rows repeated for one id: a
    resumed batch ends with each question once, as an uninterrupted one does. The file is
    rewritten atomically, and only when something is dropped.
    """
    lines = resume_lines(out)
    rows: dict[str, tuple[bytes, bool]] = {}  # id -> (line, failed); the last good row wins
    for line in lines:
        try:
            row = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        if not isinstance(row, dict) or "id" not in row:
            continue
        failed = row.get("status") == Status.failed.value
        if not failed or rows.get(row["id"], (b"", True))[1]:
            rows[row["id"]] = (line, failed)
    keep = [
        (qid, line, failed)
        for qid, (line, failed) in rows.items()
        if not (failed and (retry is None or qid in retry))
    ]
    if len(keep) != len(lines):
        write_atomic(out, b"".join(line + b"\n" for _, line, _ in keep))
    return {qid: json.loads(line) for qid, line, failed in keep if not failed}


async def answer_item(session: Session, item: dict[str, Any]) -> Answer:
    """One batch item's answer; any exception becomes a failed answer: one question never sinks a batch."""
    try:
        return await session.ask(item["question"], options=item.get("options"))
    except (ScholarloopError, Exception) as exc:
        return Answer(
            question=item["question"], status=Status.failed, answer="", error=f"{type(exc).__name__}: {exc}"
        )


def append_answer(out: Path, qid: str, answer: Answer) -> None:
    """One line of the resume file, on disk before the next is written (a crash loses no answer)."""
    line = json.dumps({"id": qid, **answer.model_dump(mode="json")}) + "\n"
    with out.open("a") as fh:
        fh.write(line)
        fh.flush()
        os.fsync(fh.fileno())


async def aask_many(
    questions: str | Path | Sequence[str | dict[str, Any]],
    *,
    concurrency: int = 1,
    out: str | Path | None = None,
    session: Session | None = None,
    progress: bool = True,
    papers: str | Path | None = None,
    index: str | Path | None = None,
    online: bool = False,
    settings: Settings | None = None,
    ray: str | None = None,
    workers: int = 2,
    **overrides: Any,
) -> list[Answer]:
    """Answer many questions; input order kept, failures isolated.

    Args:
        questions: strings, dicts with ``question`` (and ``id``, ``options``), or a .txt/.jsonl file.
        concurrency: questions in flight at once (on each worker, with ``ray``).
        out: a JSONL file to append each answer to as it finishes; ``None`` writes nothing.
            A rerun with the same ``out`` skips questions already answered there (resume after a
            crash or Ctrl-C); answers that failed are tried again.
        session: a :class:`Session` to reuse; otherwise one is made from the arguments below.
        progress: show a progress bar.
        papers, index, online, settings, overrides: as for :func:`ask`.
        ray: run the questions on Ray (``pip install "scholarloop[ray]"``): ``"local"`` starts a
            Ray instance on this machine, anything else is an address to connect to (``"auto"``,
            ``"HOST:6379"``, ``"ray://HOST:10001"``). Each worker builds its own session, so pass
            ``papers``/``index``/``settings`` rather than ``session``; see :mod:`agent.distributed`.
        workers: Ray worker actors (with ``ray``), each with ``concurrency`` questions in flight.
    """
    items = load_questions(questions)
    if ray is not None:
        from agent.distributed import SessionRecipe, aask_many_on_ray

        if session is not None:
            raise ConfigError(
                "a Session holds loaded models and cannot be sent to Ray workers: pass papers=, index= "
                "and settings= instead, and each worker builds its own"
            )
        recipe = SessionRecipe.resolve(
            papers=papers, index=index, online=online, settings=settings, **overrides
        )
        return await aask_many_on_ray(
            items, recipe, address=ray, workers=workers, concurrency=concurrency, out=out, progress=progress
        )
    session = session or Session(papers=papers, index=index, online=online, settings=settings, **overrides)
    out_path = Path(out) if out is not None else None
    done = answered(out_path, {question_id(item) for item in items}) if out_path else {}
    results: list[Answer | None] = [None] * len(items)
    lock = asyncio.Lock()
    sem = asyncio.Semaphore(max(1, concurrency))
    from rich.console import Console
    from rich.progress import Progress

    # on stderr, like every other progress display: stdout stays the answers (or JSON) alone
    with Progress(console=Console(stderr=True), disable=not progress, transient=False) as bar:
        task = bar.add_task("questions", total=len(items))

        async def one(i: int, item: dict[str, Any]) -> None:
            qid = question_id(item)
            if qid in done:
                results[i] = Answer.model_validate({k: v for k, v in done[qid].items() if k != "id"})
                bar.advance(task)
                return
            async with sem:
                answer = await answer_item(session, item)
            results[i] = answer
            if out_path is not None:
                async with lock:
                    append_answer(out_path, qid, answer)
            bar.advance(task)

        await asyncio.gather(*(one(i, item) for i, item in enumerate(items)))
    return [r for r in results if r is not None]


def _synchronous(fn: Callable[P, Coroutine[Any, Any, T]], name: str, doc: str) -> Callable[P, T]:
    """A blocking twin of ``fn`` that also works inside Jupyter's running loop.

    The twin keeps ``fn``'s signature (``help()`` and editors show every argument) without
    repeating it, so the two can never drift apart.
    """

    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        result: T = _run_sync(lambda: fn(*args, **kwargs))
        return result

    run.__name__ = run.__qualname__ = name
    run.__doc__ = doc
    return run


ask = _synchronous(
    aask, "ask", "Answer one question; works in a plain REPL and inside Jupyter's running loop (see aask)."
)
ask_many = _synchronous(
    aask_many, "ask_many", "Answer many questions; works in a plain REPL and inside Jupyter (see aask_many)."
)
