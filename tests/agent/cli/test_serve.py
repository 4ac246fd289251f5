"""``scholarloop serve`` and ``ask --html``: the app over HTTP, then the page in a real browser.

Every question runs offline on the scripted test models, so the streamed steps and the answer
are the same on every machine. The browser test drives Debian's chromium through Playwright and
skips where either is missing; set ``SCHOLARLOOP_SCREENSHOTS=DIR`` to keep its screenshots
(docs/images holds the committed ones).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agent.api import Session
from agent.cli.main import cli
from agent.cli.serve import create_app, discover_libraries, is_loopback
from agent.core.errors import ConfigError
from agent.core.settings import Settings, load_settings
from agent.llm.testing import FunctionLLM, Request
from corpus.build import build_index
from tests.agent.conftest import good_answer, keyword_judge, keyword_summary, make_session
from tests.tools.conftest import EGFR, INJECTION, TP53

fastapi = pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

Q = "Which inhibitor remains active against EGFR T790M tumours?"
HASH = ["--set", "embedding.model=hash", "--set", "evidence.min_score=5"]
CHROMIUM = Path("/usr/bin/chromium")
# No update checks, sync or component downloads: the test machine has no network to offer them.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# A paper that tries to run code in the reader's browser: the page must show it as text.
HOSTILE = INJECTION + ' <script>window.pwned = 1</script><img src=x onerror="window.pwned = 1">'


@pytest.fixture
def libraries(tmp_path: Path) -> list[Path]:
    """Two libraries: TP53 reviews (listed first) and the lung cancer papers the question needs."""
    build = load_settings(environ={}, embedding__model="hash", chunking__chunk_chars=2000)
    out = []
    for name, papers in (
        ("tp53-reviews", {"tp53.md": TP53}),
        ("lung-cancer-papers", {"egfr.md": EGFR, "tp53.md": TP53, "notes.md": HOSTILE}),
    ):
        folder = tmp_path / "papers" / name
        folder.mkdir(parents=True)
        for file, text in papers.items():
            (folder / file).write_text(text)
        build_index([folder], tmp_path / name, build)
        out.append(tmp_path / name)
    return out


def client(app: Any) -> TestClient:
    return TestClient(app, base_url="http://127.0.0.1:8765")


def events_of(body: str) -> list[tuple[str, Any]]:
    out = []
    for block in body.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines())
        out.append((fields["event"], json.loads(fields["data"])))
    return out


def library_id(http: TestClient, name: str) -> str:
    return next(lib["id"] for lib in http.get("/api/libraries").json() if lib["name"] == name)


# --- the app over HTTP ----------------------------------------------------------------------


def test_libraries_page_and_a_streamed_question(libraries: list[Path], settings: Settings) -> None:
    app = create_app(libraries, lambda path: make_session(path, settings))
    with client(app) as http:
        listed = http.get("/api/libraries").json()
        assert [(lib["name"], lib["papers"]) for lib in listed] == [
            ("tp53-reviews", 1),
            ("lung-cancer-papers", 3),
        ]
        page = http.get("/")
        nonce = re.search(r"script-src 'nonce-([^']+)'", page.headers["content-security-policy"])
        assert nonce and f'<script nonce="{nonce.group(1)}">' in page.text
        assert ".sl-v-supported{" in page.text  # the answer's CSS comes with the page

        lung = library_id(http, "lung-cancer-papers")
        with http.stream("GET", "/api/ask", params={"library": lung, "question": Q}) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            events = events_of(response.read().decode())
        names = [e for e, _ in events]
        steps = [d["tool"] for e, d in events if e == "step"]
        assert steps == ["paper_search", "gather_evidence", "generate_answer", "verify_citations"]
        assert names.count("observation") == 4 and names[-2:] == ["done", "answer"]
        first = events[0][1]
        assert first == {"tool": "paper_search", "arguments": {"query": Q}, "reason": "start"}
        observation = next(d for e, d in events if e == "observation")
        assert observation["observation"].startswith("Found 3 paper(s)") and observation["seconds"] >= 0
        answer = events[-1][1]
        assert answer["status"] == "answered"
        assert "<mark>Osimertinib remains active against tumours carrying T790M.</mark>" in answer["html"]
        assert "&lt;script&gt;window.pwned" in answer["html"] and "<script" not in answer["html"]

        standalone = http.get(answer["url"])
        assert standalone.text.startswith("<!DOCTYPE html>") and "<mark>" in standalone.text
        assert (
            standalone.headers["content-security-policy"] == "default-src 'none'; style-src 'unsafe-inline'"
        )


def test_the_session_is_built_once_per_library(libraries: list[Path], settings: Settings) -> None:
    built: list[Path] = []

    def session_for(path: Path) -> Session:
        built.append(path)
        return make_session(path, settings)

    with client(create_app(libraries, session_for)) as http:
        lung = library_id(http, "lung-cancer-papers")
        for _ in range(2):
            with http.stream("GET", "/api/ask", params={"library": lung, "question": Q}) as response:
                assert events_of(response.read().decode())[-1][0] == "answer"
    assert built == [libraries[1].resolve()]


def test_a_failure_reaches_the_page_as_an_event(libraries: list[Path]) -> None:
    def broken(path: Path) -> Session:
        raise ConfigError("llm.answer: no such model 'nope'")

    with client(create_app(libraries, broken)) as http:
        lung = library_id(http, "lung-cancer-papers")
        with http.stream("GET", "/api/ask", params={"library": lung, "question": Q}) as response:
            events = events_of(response.read().decode())
    assert events == [("failure", {"message": "llm.answer: no such model 'nope'"})]


def test_bad_requests_are_refused(libraries: list[Path], settings: Settings) -> None:
    app = create_app(libraries, lambda path: make_session(path, settings))
    with client(app) as http:
        assert http.get("/api/ask", params={"library": "nope", "question": Q}).status_code == 404
        lung = library_id(http, "lung-cancer-papers")
        assert http.get("/api/ask", params={"library": lung, "question": "  "}).status_code == 400
        assert http.get("/answers/0123456789ab").status_code == 404
        # a page on another domain that rebinds its name to 127.0.0.1 still sends its own Host
        assert http.get("/", headers={"host": "attacker.example:8765"}).status_code == 421
        assert http.get("/", headers={"host": "[::1]:8765"}).status_code == 200
        assert http.get("/", headers={"host": "localhost"}).status_code == 200


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.10", False),
        ("example.org", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_discover_libraries_lists_given_ones_then_the_home(libraries: list[Path], tmp_path: Path) -> None:
    home = tmp_path / "home"
    shutil.copytree(libraries[0], home / "libraries" / "papers-0123")
    (home / "libraries" / "not-an-index").mkdir()
    found = discover_libraries(home, [libraries[1], libraries[1]])
    assert found == [libraries[1].resolve(), (home / "libraries" / "papers-0123").resolve()]


# --- the command line -----------------------------------------------------------------------


@pytest.fixture
def scripted_models(monkeypatch: pytest.MonkeyPatch) -> None:
    roles = {
        "summary": FunctionLLM(keyword_summary),
        "judge": FunctionLLM(lambda r: "No", score_function=keyword_judge),
        "answer": FunctionLLM(good_answer),
    }
    roles["agent"] = roles["answer"]
    monkeypatch.setattr("agent.api.resolve_role_llms", lambda settings: roles)


def test_serve_refuses_a_non_loopback_host() -> None:
    result = CliRunner().invoke(cli, ["serve", "--host", "0.0.0.0"])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        "Error: refusing to serve on 0.0.0.0: scholarloop serve binds to loopback only "
        "(127.0.0.1, ::1 or localhost)"
    ]


def test_serve_offers_the_given_index(
    monkeypatch: pytest.MonkeyPatch, libraries: list[Path], scripted_models: None
) -> None:
    started: dict[str, Any] = {}
    monkeypatch.setattr("uvicorn.run", lambda app, **kw: started.update(app=app, **kw))
    result = CliRunner().invoke(cli, [*HASH, "serve", "--index", str(libraries[1]), "--port", "9999"])
    assert result.exit_code == 0, result.output
    assert "http://127.0.0.1:9999/" in result.output
    assert started["host"] == "127.0.0.1" and started["port"] == 9999
    with client(started["app"]) as http:
        listed = http.get("/api/libraries").json()
        assert listed[0]["name"] == "lung-cancer-papers"
        with http.stream("GET", "/api/ask", params={"library": listed[0]["id"], "question": Q}) as r:
            assert events_of(r.read().decode())[-1][1]["status"] == "answered"


def test_ask_writes_the_answer_page(index_dir: Path, tmp_path: Path, scripted_models: None) -> None:
    out = tmp_path / "answer.html"
    result = CliRunner().invoke(cli, [*HASH, "ask", Q, "--index", str(index_dir), "--html", str(out)])
    assert result.exit_code == 0, result.output
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "<mark>" in page and 'data-verdict="supported"' in page
    assert not list(tmp_path.glob("*.tmp"))  # written atomically: no temporary file left behind


# --- the page in a real browser -------------------------------------------------------------


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """The app on a free loopback port, in a thread; yields its base URL."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", ws="none", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)
        sock.close()


def with_a_claim_that_fails(req: Request) -> dict[str, object]:
    """The good answer plus a claim its passage does not support, drafted every time."""
    out = good_answer(req)
    claims: list[dict[str, object]] = out["claims"]  # type: ignore[assignment]
    claims.append({"text": "Aspirin cures lung cancer.", "citations": claims[0]["citations"], "quote": ""})
    return out


def held_summary(release: threading.Event) -> Callable[[Request], Any]:
    """The keyword summary, held until ``release``: the test looks at the page mid-run."""

    async def summary(req: Request) -> object:
        await asyncio.to_thread(release.wait, 30)
        return keyword_summary(req)

    return summary


def keep(shot: Path) -> None:
    target = os.environ.get("SCHOLARLOOP_SCREENSHOTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(target) / shot.name)


@pytest.mark.browser
@pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no chromium at {CHROMIUM} (apt-get install chromium)")
def test_the_page_in_a_real_browser(libraries: list[Path], settings: Settings, tmp_path: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    release = threading.Event()
    held, failing = FunctionLLM(held_summary(release)), FunctionLLM(with_a_claim_that_fails)
    app = create_app(libraries, lambda path: make_session(path, settings, summary=held, answer=failing))
    problems: list[str] = []
    with serving(app) as base, sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 760})
            page.set_default_timeout(20_000)
            page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda exc: problems.append(str(exc)))
            page.goto(base)

            # pick the library (the other one is listed first) and type the question
            options = page.locator("#library option")
            options.first.wait_for(state="attached")
            assert options.all_inner_texts() == [
                "tp53-reviews (1 papers, 1 passages)",
                "lung-cancer-papers (3 papers, 3 passages)",
            ]
            lung = page.locator("#library option", has_text="lung-cancer-papers").get_attribute("value")
            page.select_option("#library", value=lung)
            page.fill("#question", Q)
            page.screenshot(path=tmp_path / "serve-question.png")

            # the steps stream in while the run is still going
            page.click("#ask")
            page.locator("#steps li.running[data-tool='gather_evidence']").wait_for()
            searched = page.locator("#steps li.done[data-tool='paper_search'] .obs")
            assert searched.inner_text().startswith("Found 3 paper(s) (3 new)")
            assert page.locator("#answer .sl-answer").count() == 0
            assert page.locator("#ask").is_disabled()
            page.screenshot(path=tmp_path / "serve-steps.png")
            release.set()

            # the answer: verdicts, the marked quote, links to the passages
            page.locator("#answer .sl-answer").wait_for()
            assert page.locator("#run-status").inner_text() == "finished: answered in 4 steps"
            tools = [li.get_attribute("data-tool") for li in page.locator("#steps li.done").all()]
            draft = ["generate_answer", "verify_citations"]
            # the unsupported claim is dropped, not rewritten from the same passages
            assert tools == ["paper_search", "gather_evidence", *draft]
            kept = page.locator("#answer .sl-claim[data-verdict=supported] > .sl-badge")
            dropped = page.locator("#answer .sl-claim-removed[data-verdict=unsupported]")
            assert kept.is_visible() and kept.inner_text() == "supported"
            assert dropped.is_visible() and "Aspirin cures lung cancer." in dropped.inner_text()
            colour = "e => getComputedStyle(e).backgroundColor"
            assert kept.evaluate(colour) != dropped.locator("> .sl-badge").evaluate(colour)
            mark = page.locator("#answer .sl-cited mark").first
            assert mark.is_visible()
            assert mark.inner_text() == "Osimertinib remains active against tumours carrying T790M."
            status = page.locator("#answer .sl-meta .sl-badge").first
            assert status.inner_text() == "answered"
            # the hostile paper is shown as text, and none of its code ran
            assert page.locator(".sl-passage", has_text="<script>window.pwned = 1</script>").count() == 1
            assert page.evaluate("typeof window.pwned") == "undefined"
            page.click("#answer .sl-text a.sl-cite")
            assert page.locator(".sl-passage:target").get_attribute("data-key") == "Egfr2017"
            page.screenshot(path=tmp_path / "serve-answer.png", full_page=True)

            # the answer's own page, as `ask --html` writes it
            page.goto(base + page.locator("#answer-page").get_attribute("href"))
            assert page.locator("mark").first.inner_text().startswith("Osimertinib remains active")
            assert page.evaluate("typeof window.pwned") == "undefined"
        finally:
            browser.close()
    assert problems == []  # no script error, and no CSP violation (each would log one)
    for shot in ("serve-question.png", "serve-steps.png", "serve-answer.png"):
        assert (tmp_path / shot).stat().st_size > 10_000
        keep(tmp_path / shot)
