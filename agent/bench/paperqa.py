"""``--system paperqa``: the installed paper-qa answers the same questions, graded identically.

What is compared. paper-qa's own evidence + answer pipeline (``Docs.aquery``: MMR retrieval of
``evidence_k`` chunks, one summary-and-score call per chunk, then its answer prompt over the best
``answer_max_sources`` summaries), with its default settings and prompts. It gets the same
library: the same papers, the same chunks and the same embedding vectors this project indexed,
wrapped as paper-qa ``Doc``/``Text`` objects, so retrieval differences come from paper-qa's
retrieval (dense MMR) and not from different parsing. The question is shown as LAB-Bench and
aviary show multiple choice (``Q: …\\n\\nOptions:\\nA) …``), in the same option order our
agent sees, and the reply is graded by the same :func:`agent.bench.grading.grade` (its free-text
fallback parser reads paper-qa's prose).

The model. paper-qa reaches models through litellm, so the local GGUF is served to it by
llama-cpp-python's OpenAI-compatible server on 127.0.0.1, which :class:`LlamaServer` starts on
a free port and stops when the benchmark ends. Nothing leaves the machine.

Withholding sources uses paper-qa's own ``deleted_dockeys`` filter for the one question.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx

from agent.core.errors import ConfigError
from agent.core.evidence import lettered
from agent.core.state import Answer, Evidence, Status
from agent.llm.local_kernels import choose_kernels
from agent.llm.types import Usage

__all__ = ["LlamaServer", "PaperQASystem", "mc_prompt"]

_ALIAS = "openai/local-gguf"
# `python -c _SERVE on|off ARGS…`: llama_cpp.server with or without llama.cpp's extra buffers.
_SERVE = (
    "import runpy, sys\n"
    "from agent.llm.local_kernels import model_params_with\n"
    "extra = sys.argv.pop(1) == 'on'\n"
    "with model_params_with(extra_buffers=extra):\n"
    "    runpy.run_module('llama_cpp.server', run_name='__main__', alter_sys=True)\n"
)


def mc_prompt(question: str, options: Sequence[str] | None) -> str:
    """aviary's MultipleChoiceQuestion layout, with the options in the order given."""
    if not options:
        return question
    return f"Q: {question}\n\nOptions:\n{lettered(options)}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LlamaServer:
    """llama-cpp-python's OpenAI-compatible server for one GGUF, on loopback, for one benchmark.

    Started as a child process so its llama.cpp threads and memory are released when it stops;
    its log goes to a file next to the benchmark output so a failed start can be diagnosed.
    """

    def __init__(
        self,
        model_path: Path,
        *,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        extra_buffers: bool = True,
        log_path: Path | None = None,
        command: Sequence[str] | None = None,
        start_timeout_s: float = 180.0,
    ) -> None:
        self.model_path = model_path
        self.port = _free_port()
        self.log_path = log_path
        self.start_timeout_s = start_timeout_s
        # A custom command (tests) may name the chosen port as "{port}".
        self.command = (
            [c.format(port=self.port) for c in command]
            if command is not None
            else self._default_command(n_ctx, n_threads, extra_buffers)
        )
        self.process: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    def _default_command(self, n_ctx: int, n_threads: int | None, extra_buffers: bool) -> list[str]:
        # llama_cpp.server run inside model_params_with, so it loads with the kernels the
        # in-process provider chose (a faulting AMX build would kill the server on its first prompt)
        cmd = [
            sys.executable,
            "-c",
            _SERVE,
            "on" if extra_buffers else "off",
            "--model",
            str(self.model_path),
            "--model_alias",
            _ALIAS.split("/", 1)[1],
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            str(n_ctx),
        ]
        # The same threads our in-process provider uses (llama.cpp's default is half the cores).
        threads = n_threads or os.cpu_count() or 1
        return [*cmd, "--n_threads", str(threads), "--n_threads_batch", str(threads)]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> LlamaServer:
        self._log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        self.process = subprocess.Popen(self.command, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.__exit__(None, None, None)
                raise ConfigError(
                    f"the llama.cpp server exited with code {self.process.returncode} before it was "
                    f"ready (log: {self.log_path or 'not kept'}); is llama-cpp-python[server] installed?"
                )
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.base_url}/models", timeout=2.0).status_code == 200:
                    return self
            time.sleep(0.5)
        self.__exit__(None, None, None)
        raise ConfigError(f"the llama.cpp server did not answer within {self.start_timeout_s:.0f} s")

    def __exit__(self, *exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._log not in (None, subprocess.DEVNULL):
            self._log.close()
        self._log = None


def _embedding_model(embedder: Any) -> Any:
    """Our embedder behind paper-qa's EmbeddingModel interface (the query side of retrieval)."""
    from lmi import EmbeddingModel

    class LibraryEmbedding(EmbeddingModel):
        async def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [v.tolist() for v in embedder.embed_documents(texts)]

    return LibraryEmbedding(name=f"scholarloop-{getattr(embedder, 'name', 'embedder')}")


def paperqa_settings(base_url: str, *, evidence_k: int | None = None) -> Any:
    """paper-qa's defaults, with every model role pointed at the loopback server."""
    from paperqa import Settings

    config = {
        "model_list": [
            {
                "model_name": _ALIAS,
                "litellm_params": {
                    "model": _ALIAS,
                    "api_base": base_url,
                    "api_key": "local-no-key",
                    "temperature": 0.0,
                },
            }
        ]
    }
    settings = Settings(llm=_ALIAS, llm_config=config, summary_llm=_ALIAS, summary_llm_config=config)
    if evidence_k is not None:
        settings.answer.evidence_k = evidence_k
    return settings


class PaperQASystem:
    """paper-qa's Docs pipeline over this project's library, through a loopback model server."""

    name = "paperqa"

    def __init__(self, library: Any, embedder: Any, settings: Any) -> None:
        import logging

        import litellm

        # litellm has no price for a local model, so paper-qa warns and litellm prints its
        # provider list on every call; the cost is $0. Its aiohttp session is never closed at
        # exit (an asyncio error line): httpx serves loopback just as well.
        logging.getLogger("lmi.llms").setLevel(logging.ERROR)
        litellm.suppress_debug_info = True
        os.environ.setdefault("DISABLE_AIOHTTP_TRANSPORT", "True")
        self.library = library
        self.embedding = _embedding_model(embedder)
        self.pqa_settings = settings
        self._docs: Any = None

    @classmethod
    @contextlib.contextmanager
    def serving(cls, session: Any, *, log_dir: Path | None = None) -> Iterator[PaperQASystem]:
        """Start the server for the session's answer model, yield the system, stop the server."""
        from agent.llm.local_models import resolve_model_path

        spec = session.settings.role_models()["answer"]
        if not spec.startswith("local:"):
            raise ConfigError(
                f"--system paperqa serves the local model to paper-qa; the answer model is {spec!r}"
            )
        path = resolve_model_path(spec.removeprefix("local:"), session.settings.models_dir)
        log = (log_dir or session.settings.home) / "llama-server.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        local = session.settings.llm.local
        kernels = choose_kernels(path, session.settings.models_dir, local.extra_buffers)
        with LlamaServer(
            path, n_threads=local.n_threads, extra_buffers=kernels.extra_buffers, log_path=log
        ) as server:
            yield cls(session.library, session.searcher.embedder, paperqa_settings(server.base_url))

    async def _load(self) -> Any:
        """Every paper of the library as a paper-qa Doc, its chunks as Texts with our vectors."""
        if self._docs is not None:
            return self._docs
        from paperqa import Doc, Docs, Text

        docs = Docs()
        rows: dict[str, list[int]] = {}
        for i, chunk in enumerate(self.library.chunks):
            rows.setdefault(chunk.doc_id, []).append(i)
        for paper in self.library.papers:
            if paper.doc_id not in rows:
                continue
            citation = ", ".join(
                x for x in [paper.key, paper.title or "", str(paper.year or ""), paper.venue or ""] if x
            )
            doc = Doc(docname=paper.key, dockey=paper.doc_id, citation=citation)
            texts = []
            for n, i in enumerate(rows[paper.doc_id]):
                chunk = self.library.chunks[i]
                # a chunk without pages (a text file, a JSONL record) is named as paper-qa names them
                name = chunk.citation if chunk.page_start is not None else f"{paper.key} chunk {n + 1}"
                texts.append(
                    Text(text=chunk.text, name=name, doc=doc, embedding=self.library.vectors[i].tolist())
                )
            await docs.aadd_texts(texts, doc, settings=self.pqa_settings, embedding_model=self.embedding)
        self._docs = docs
        return docs

    async def answer(self, question: str, options: list[str] | None, exclude_doc_ids: set[str]) -> Answer:
        docs = await self._load()
        added = set(exclude_doc_ids) - docs.deleted_dockeys
        docs.deleted_dockeys |= added
        start = time.perf_counter()
        try:
            result = await docs.aquery(
                mc_prompt(question, options), settings=self.pqa_settings, embedding_model=self.embedding
            )
        except Exception as exc:  # graded as a failed answer, as our own failures are
            return Answer(
                question=question,
                status=Status.failed,
                answer="",
                error=f"{type(exc).__name__}: {exc}",
                seconds=time.perf_counter() - start,
            )
        finally:
            docs.deleted_dockeys -= added
        return to_answer(question, result, time.perf_counter() - start, self.pqa_settings.answer.evidence_k)


def to_answer(question: str, result: Any, seconds: float, evidence_k: int) -> Answer:
    """A paper-qa session as our Answer: its prose, its contexts as evidence, its token counts."""
    contexts = sorted(result.contexts, key=lambda c: -c.score)
    evidence = [
        Evidence(
            key=c.text.name,
            chunk_id=c.text.name,
            doc_id=str(c.text.doc.dockey),
            paper_key=c.text.doc.docname,
            text=c.text.text,
            summary=c.context,
            score=max(0, min(10, int(c.score))),
        )
        for c in contexts
    ]
    prompt = sum(v[0] for v in result.token_counts.values())
    completion = sum(v[1] for v in result.token_counts.values())
    usage = Usage(
        role="paperqa",
        model=",".join(result.token_counts) or _ALIAS,
        prompt_tokens=prompt,
        completion_tokens=completion,
        cost_usd=float(result.cost or 0.0),
        seconds=seconds,
        calls=evidence_k + 1,  # paper-qa summarises every retrieved chunk, then answers once
    )
    text = result.answer or ""
    abstained = "cannot answer" in text.lower()
    return Answer(
        question=question,
        status=Status.insufficient_evidence if abstained else Status.answered,
        answer=text,
        evidence=evidence,
        usage={"paperqa": usage},
        seconds=seconds,
    )
