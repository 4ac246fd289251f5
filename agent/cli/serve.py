"""``scholarloop serve``: a local web page to ask a question and inspect the answer.

The page lists the libraries, streams the run's tool steps as Server-Sent Events while the
question is answered, then shows :meth:`Answer.to_html`'s view of the answer. The server binds
to loopback only and answers only requests addressed to a loopback host name: it runs models
and reads the user's papers, and has no accounts, so nothing off the machine may reach it, not
even a web page that rebinds its own domain to 127.0.0.1.

Questions run one at a time on a single background event loop, so the web server stays
responsive while a local model blocks, and the models and indexes of a session stay on the loop
they were first used on.
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import json
import logging
import secrets
import threading
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable
from concurrent.futures import Future
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from fastapi import FastAPI

    from agent.api import Session
    from agent.core.state import Answer

__all__ = ["create_app", "discover_libraries", "is_loopback", "serve_command"]

log = logging.getLogger(__name__)

WEB = Path(__file__).parent / "web"
KEEP_ANSWERS = 50  # answers kept for their standalone pages; older ones are forgotten
LOOPBACK_HOSTS = "127.0.0.1, ::1 or localhost"


def is_loopback(host: str) -> bool:
    """Is ``host`` (a name or an address, IPv6 with or without brackets) this machine only?"""
    host = host.strip().strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _host_of(header: str) -> str:
    """The host part of a ``Host`` header: ``[::1]:8765`` → ``::1``, ``localhost:80`` → ``localhost``."""
    if header.startswith("["):
        return header[1 : header.find("]")]
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def discover_libraries(home: Path, extra: Iterable[Path] = ()) -> list[Path]:
    """The libraries a user can pick: ``extra`` first, then every index under the home."""
    found: list[Path] = []
    candidates = [*extra, home / "index"]
    libraries = home / "libraries"
    if libraries.is_dir():
        candidates += sorted(p for p in libraries.iterdir() if p.is_dir())
    for path in candidates:
        path = path.expanduser().resolve()
        if (path / "manifest.json").exists() and path not in found:
            found.append(path)
    return found


def _library_id(path: Path) -> str:
    return hashlib.sha256(str(path).encode()).hexdigest()[:12]


def _describe(path: Path) -> dict[str, Any] | None:
    from agent.core.errors import ScholarloopError
    from corpus.store import Library

    try:
        info = Library.open(path).info()
    except ScholarloopError as exc:
        log.warning("skipping library %s: %s", path, exc)
        return None
    return {
        "id": _library_id(path),
        "name": path.name,
        "path": str(path),
        "papers": info["papers"],
        "chunks": info["chunks"],
    }


class _Runner:
    """One background thread with one event loop, on which every question runs, in turn."""

    def __init__(self, session_for: Callable[[Path], Session]) -> None:
        self.session_for = session_for
        self.sessions: dict[Path, Session] = {}
        self.loop = asyncio.new_event_loop()
        self.lock = asyncio.Lock()
        self.thread = threading.Thread(target=self.loop.run_forever, name="scholarloop-runs", daemon=True)
        self.thread.start()

    def submit(self, coro: Coroutine[Any, Any, None]) -> Future[None]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    async def session(self, path: Path) -> Session:
        # Built once per library (models load, an index may be read) and off the loop.
        if path not in self.sessions:
            self.sessions[path] = await asyncio.to_thread(self.session_for, path)
        return self.sessions[path]

    def close(self) -> None:
        def stop() -> None:  # a question still running is cancelled, not left half-done
            for task in asyncio.all_tasks(self.loop):
                task.cancel()
            self.loop.call_soon(self.loop.stop)

        self.loop.call_soon_threadsafe(stop)
        self.thread.join(timeout=10)
        if not self.thread.is_alive():
            self.loop.close()


Emit = Callable[[str, Any], None]


async def _run(runner: _Runner, path: Path, question: str, emit: Emit) -> None:
    from agent.core.errors import ScholarloopError

    try:
        if runner.lock.locked():
            emit("queued", {"message": "waiting for the question already running"})
        async with runner.lock:
            session = await runner.session(path)
            answer = await session.ask(question, on_event=emit)
        emit("answer", answer)
    except ScholarloopError as exc:
        emit("failure", {"message": str(exc)})
    except Exception as exc:  # the page must hear about any failure, or it waits forever
        log.exception("question failed")
        emit("failure", {"message": f"{type(exc).__name__}: {exc}"})
    finally:
        emit("end", None)


def _sse(event: str, data: Any) -> str:
    return f"event: {event}\ndata: {json.dumps(data, default=str)}\n\n"


def create_app(
    libraries: Iterable[Path] | Callable[[], Iterable[Path]],
    session_for: Callable[[Path], Session],
) -> FastAPI:
    """The web app. ``libraries`` lists (or, called, finds) the indexes a user may pick;
    ``session_for`` builds the :class:`~agent.api.Session` for one of them (tests inject one
    with scripted models)."""
    from fastapi import FastAPI, HTTPException, Query
    from fastapi.responses import HTMLResponse, JSONResponse, StreamingResponse

    from agent.core.html import ANSWER_CSS, answer_body

    runner: _Runner | None = None
    answers: OrderedDict[str, Answer] = OrderedDict()

    def listed() -> dict[str, Path]:
        paths = libraries() if callable(libraries) else libraries
        return {_library_id(p.resolve()): p.resolve() for p in paths}

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        if runner is not None:
            runner.close()

    app = FastAPI(title="scholarloop", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    app.add_middleware(_LoopbackHostOnly)
    page = (WEB / "index.html").read_text(encoding="utf-8").replace("/*ANSWER_CSS*/", ANSWER_CSS)

    @app.get("/", response_model=None)
    def index() -> HTMLResponse:
        nonce = secrets.token_urlsafe(16)
        csp = (
            f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'unsafe-inline'; "
            "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
        )
        return HTMLResponse(page.replace("{{NONCE}}", nonce), headers={"Content-Security-Policy": csp})

    @app.get("/api/libraries", response_model=None)
    def list_libraries() -> JSONResponse:
        described = (_describe(p) for p in listed().values())
        return JSONResponse([d for d in described if d is not None])

    @app.get("/api/ask", response_model=None)
    async def ask(
        library: str = Query(...), question: str = Query(..., max_length=2000)
    ) -> StreamingResponse:
        nonlocal runner
        path = listed().get(library)
        if path is None:
            raise HTTPException(404, f"no library {library!r}; GET /api/libraries lists them")
        if not question.strip():
            raise HTTPException(400, "the question is empty")
        if runner is None:
            runner = _Runner(session_for)
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        server_loop = asyncio.get_running_loop()

        def emit(event: str, data: Any) -> None:  # called on the runner's thread
            server_loop.call_soon_threadsafe(queue.put_nowait, (event, data))

        future = runner.submit(_run(runner, path, question.strip(), emit))

        async def events() -> AsyncIterator[str]:
            try:
                while True:
                    event, data = await queue.get()
                    if event == "end":
                        return
                    if event == "answer":
                        answer_id = uuid.uuid4().hex[:12]
                        answers[answer_id] = data
                        while len(answers) > KEEP_ANSWERS:
                            answers.popitem(last=False)
                        data = {
                            "id": answer_id,
                            "status": data.status.value,
                            "html": answer_body(data),
                            "url": f"/answers/{answer_id}",
                        }
                    yield _sse(event, data)
            finally:
                future.cancel()  # the page went away: stop spending model time on the question

        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        return StreamingResponse(events(), media_type="text/event-stream", headers=headers)

    @app.get("/answers/{answer_id}", response_model=None)
    def answer_page(answer_id: str) -> HTMLResponse:
        if answer_id not in answers:
            raise HTTPException(404, "no such answer (the server keeps the latest few)")
        csp = "default-src 'none'; style-src 'unsafe-inline'"
        return HTMLResponse(answers[answer_id].to_html(), headers={"Content-Security-Policy": csp})

    return app


class _LoopbackHostOnly:
    """Reject a request whose ``Host`` is not loopback (a DNS-rebinding page sends its own name)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            host = headers.get(b"host", b"").decode("latin-1")
            if not is_loopback(_host_of(host)):
                from starlette.responses import PlainTextResponse

                response = PlainTextResponse(f"host {host!r} refused: loopback only", status_code=421)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help=f"Loopback address ({LOOPBACK_HOSTS}).")
@click.option(
    "--port", default=8765, show_default=True, type=click.IntRange(1, 65535), help="Port to listen on."
)
@click.option(
    "--papers",
    multiple=True,
    type=click.Path(path_type=Path, exists=True),
    help="Folder of papers to offer, indexed first (once); repeat for more.",
)
@click.option(
    "--index",
    "indexes",
    multiple=True,
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    help="Index built with `index build` to offer; repeat for more.",
)
@click.pass_obj
def serve_command(
    obj: Any, host: str, port: int, papers: tuple[Path, ...], indexes: tuple[Path, ...]
) -> None:
    """Ask questions in a local web page: pick a library, watch the steps, inspect the answer."""
    if not is_loopback(host):
        raise click.ClickException(
            f"refusing to serve on {host}: scholarloop serve binds to loopback only ({LOOPBACK_HOSTS})"
        )
    try:
        import uvicorn
    except ImportError as exc:
        raise click.ClickException(
            "scholarloop serve needs FastAPI and uvicorn: pip install 'scholarloop[serve]'"
        ) from exc
    from agent.api import Session
    from corpus.store import Library

    settings = obj.settings
    ready: dict[Path, Session] = {}
    for folder in papers:  # indexing can take minutes: do it before the page is offered
        session = Session(papers=folder, settings=settings)
        ready[Path(session.library.root).resolve()] = session
    for index in indexes:
        Library.open(index)  # a missing or stale index fails here, with its fix, not in the page

    def session_for(path: Path) -> Session:
        return ready.get(path) or Session(index=path, settings=settings)

    app = create_app(lambda: discover_libraries(settings.home, [*ready, *indexes]), session_for)
    shown = f"[{host}]" if ":" in host else host
    click.echo(f"scholarloop serve: http://{shown}:{port}/  (Ctrl-C stops it)", err=True)
    # Ctrl-C must not wait for a streamed question to finish: a local model may need minutes.
    uvicorn.run(app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=2)
