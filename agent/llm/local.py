"""The in-process llama.cpp provider (``local:NAME``).

One ``Llama`` instance per model file per process, behind a one-thread executor: llama.cpp is
not re-entrant, and a single worker thread is an async queue that works from any event loop
(``ask()`` in a REPL and in Jupyter run on different loops). Consecutive calls that share a
prompt prefix (the judge's system prompt, the few-shot examples) reuse llama.cpp's KV cache.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from agent.core.errors import MalformedResponseError, ModelNotAvailableError
from agent.llm.base import BaseLLM
from agent.llm.local_decode import Decoded, decode_json, eval_prompt, schema_grammar
from agent.llm.local_kernels import ExtraBuffers, KernelChoice, choose_kernels, model_params_with
from agent.llm.local_models import resolve_model_path
from agent.llm.types import Completion, JsonSchema, Message, ToolCall, ToolSpec, Usage, YesNoScore

__all__ = ["LoadedModel", "LocalLLM", "load_model"]

T = TypeVar("T")


@dataclass
class LoadedModel:
    """A llama.cpp model and the single worker thread that may touch it."""

    path: Path
    llama: Any
    executor: ThreadPoolExecutor
    formatter: Any
    kernels: KernelChoice = field(default_factory=lambda: KernelChoice(True, "default"))
    yes_ids: list[int] = field(default_factory=list)
    no_ids: list[int] = field(default_factory=list)

    async def run(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn)

    def perf(self) -> tuple[int, float, int, float]:
        """llama.cpp's own counters: (prompt tokens, prompt ms, generated tokens, gen ms)."""
        import llama_cpp

        data = llama_cpp.llama_perf_context(self.llama._ctx.ctx)
        return data.n_p_eval, data.t_p_eval_ms, data.n_eval, data.t_eval_ms


_LOADED: dict[tuple[str, int, int, str], LoadedModel] = {}
_LOAD_LOCK = threading.Lock()


def _answer_token_ids(llama: Any, words: list[str]) -> list[int]:
    ids: set[int] = set()
    for word in words:
        for variant in (word, " " + word):
            toks = llama.tokenize(variant.encode(), add_bos=False, special=False)
            if toks:
                ids.add(toks[0])
    return sorted(ids)


def load_model(
    path: Path,
    *,
    n_ctx: int,
    n_threads: int | None,
    n_gpu_layers: int,
    seed: int,
    extra_buffers: ExtraBuffers = "auto",
    verdicts_dir: Path | None = None,
) -> LoadedModel:
    """Load (once per process) the GGUF at ``path``.

    ``extra_buffers`` decides llama.cpp's weight layouts (see :mod:`agent.llm.local_kernels`):
    a build whose AMX kernels fault on this CPU would otherwise kill the process on its first
    prompt. The probe's verdict is kept in ``verdicts_dir`` (the models directory), else beside
    the model file.
    """
    key = (str(path), n_ctx, n_gpu_layers, extra_buffers)
    with _LOAD_LOCK:
        if key in _LOADED:
            return _LOADED[key]
        try:
            from llama_cpp import Llama
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ModelNotAvailableError(
                "llama-cpp-python is not installed: pip install -e '.[offline]'"
            ) from exc
        kernels = choose_kernels(path, verdicts_dir or path.parent, extra_buffers)
        # llama-cpp-python's own default is half the cores for generation; on 2 cores that is one
        # thread, and generation measured 21 tok/s on one thread vs 32 on two (Qwen 1.5B).
        with model_params_with(extra_buffers=kernels.extra_buffers):
            llama = Llama(
                model_path=str(path),
                n_ctx=n_ctx,
                n_threads=n_threads or os.cpu_count() or 1,
                n_gpu_layers=n_gpu_layers,
                seed=seed,
                verbose=False,
            )
        template = llama.metadata.get("tokenizer.chat_template")
        if not template:
            raise ModelNotAvailableError(f"{path.name} carries no chat template")
        formatter = Jinja2ChatFormatter(
            template=template,
            eos_token=llama._model.token_get_text(llama.token_eos()),
            bos_token=llama._model.token_get_text(llama.token_bos()),
        )
        loaded = LoadedModel(
            path=path,
            llama=llama,
            executor=ThreadPoolExecutor(max_workers=1, thread_name_prefix="llama"),
            formatter=formatter,
            kernels=kernels,
            yes_ids=_answer_token_ids(llama, ["Yes", "yes", "YES"]),
            no_ids=_answer_token_ids(llama, ["No", "no", "NO"]),
        )
        _LOADED[key] = loaded
        return loaded


def _tools_schema(tools: list[ToolSpec]) -> JsonSchema:
    """One grammar over "which tool, with which arguments": the local stand-in for tool calling."""
    return {
        "anyOf": [
            {
                "type": "object",
                "properties": {"tool": {"const": t.name}, "arguments": t.parameters},
                "required": ["tool", "arguments"],
            }
            for t in tools
        ]
    }


def _tools_prompt(tools: list[ToolSpec]) -> str:
    lines = ['You can call exactly one of these tools. Reply with JSON {"tool": NAME, "arguments": {...}}.']
    for t in tools:
        lines.append(f"- {t.name}: {t.description} Arguments schema: {json.dumps(t.parameters)}")
    return "\n".join(lines)


def _chat_messages(messages: list[Message]) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    for m in messages:
        if m.role == "tool":
            out.append({"role": "user", "content": f"[tool result {m.tool_call_id}]\n{m.content}"})
        elif m.role == "assistant" and m.tool_calls:
            calls = [{"tool": c.name, "arguments": c.arguments} for c in m.tool_calls]
            out.append({"role": "assistant", "content": json.dumps(calls[0] if len(calls) == 1 else calls)})
        else:
            out.append({"role": m.role, "content": m.content})
    return out


class LocalLLM(BaseLLM):
    """llama.cpp in-process. Cost is 0; usage counts real tokens."""

    provider = "local"

    def __init__(
        self,
        model: str,
        *,
        models_dir: Path,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        n_gpu_layers: int = 0,
        seed: int = 0,
        lazy_grammar: bool = True,
        extra_buffers: ExtraBuffers = "auto",
        **kw: Any,
    ) -> None:
        kw["concurrency"] = 1
        super().__init__(model, **kw)
        self.models_dir = models_dir
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.n_gpu_layers = n_gpu_layers
        self.seed = seed
        # greedy JSON replies check the grammar per pick, not per vocabulary (see local_decode)
        self.lazy_grammar = lazy_grammar
        self.extra_buffers: ExtraBuffers = extra_buffers
        self._loaded: LoadedModel | None = None

    def loaded(self) -> LoadedModel:
        """Resolve (assembling if needed) and load the model; cached per process."""
        if self._loaded is None:
            path = resolve_model_path(self.model, self.models_dir)
            self._loaded = load_model(
                path,
                n_ctx=self.n_ctx,
                n_threads=self.n_threads,
                n_gpu_layers=self.n_gpu_layers,
                seed=self.seed,
                extra_buffers=self.extra_buffers,
                verdicts_dir=self.models_dir,
            )
        return self._loaded

    async def _complete(
        self,
        messages: list[Message],
        *,
        json_schema: JsonSchema | None,
        tools: list[ToolSpec],
        max_tokens: int,
        temperature: float,
    ) -> Completion:
        model = await asyncio.to_thread(self.loaded) if self._loaded is None else self._loaded
        chat = _chat_messages(messages)
        schema = json_schema
        if tools:
            schema = _tools_schema(tools)
            chat.insert(
                0 if chat[0]["role"] != "system" else 1,
                {"role": "system", "content": _tools_prompt(tools)},
            )
            if chat[0]["role"] == "system" and chat[1]["role"] == "system":
                chat[0] = {
                    "role": "system",
                    "content": chat[0]["content"] + "\n\n" + chat.pop(1)["content"],
                }

        if schema is not None and temperature == 0.0 and self.lazy_grammar:
            text, finish, usage = await self._decode_lazily(model, chat, schema, max_tokens)
        else:
            text, finish, usage = await self._decode_in_llama(model, chat, schema, max_tokens, temperature)
        calls: list[ToolCall] = []
        if tools:
            try:
                data = json.loads(text)
                calls = [
                    ToolCall(
                        id=f"local_{id(data)}",
                        name=data["tool"],
                        arguments=data.get("arguments") or {},
                    )
                ]
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise MalformedResponseError(
                    f"tool call is not valid JSON: {text[:200]!r}", model=self.name
                ) from exc
            text = ""
        return Completion(text=text, tool_calls=calls, finish_reason=finish, usage=usage)

    async def _decode_lazily(
        self, model: LoadedModel, chat: list[dict[str, str]], schema: JsonSchema, max_tokens: int
    ) -> tuple[str, str | None, Usage]:
        gbnf = schema_grammar(schema)

        def run() -> tuple[Decoded, float]:
            timer = self._timer()
            formatted = model.formatter(messages=chat)
            prompt = model.llama.tokenize(
                formatted.prompt.encode("utf-8"), add_bos=not formatted.added_special, special=True
            )
            return decode_json(model.llama, prompt, gbnf, max_tokens, model=self.name), timer.elapsed

        decoded, seconds = await model.run(run)
        usage = Usage(
            model=self.name,
            prompt_tokens=decoded.prompt_tokens,
            completion_tokens=decoded.completion_tokens,
            cached_prompt_tokens=decoded.prompt_tokens - decoded.evaluated,
            seconds=seconds,
        )
        return decoded.text, decoded.finish_reason, usage

    async def _decode_in_llama(
        self,
        model: LoadedModel,
        chat: list[dict[str, str]],
        schema: JsonSchema | None,
        max_tokens: int,
        temperature: float,
    ) -> tuple[str, str | None, Usage]:
        """llama-cpp-python's own chat completion: sampled replies, free text, or lazy_grammar off."""

        def run() -> tuple[dict[str, Any], int, float]:
            before = model.perf()
            timer = self._timer()
            kwargs: dict[str, Any] = {
                "messages": chat,
                "max_tokens": max_tokens,
                "temperature": temperature,
                "seed": self.seed,
            }
            if schema is not None:
                kwargs["response_format"] = {"type": "json_object", "schema": schema}
            result = model.llama.create_chat_completion(**kwargs)
            after = model.perf()
            return result, after[0] - before[0], timer.elapsed

        result, evaluated, seconds = await model.run(run)
        choice = result["choices"][0]
        usage_raw = result.get("usage", {})
        prompt_tokens = int(usage_raw.get("prompt_tokens", 0))
        usage = Usage(
            model=self.name,
            prompt_tokens=prompt_tokens,
            completion_tokens=int(usage_raw.get("completion_tokens", 0)),
            cached_prompt_tokens=max(0, prompt_tokens - evaluated - 1),
            seconds=seconds,
        )
        return choice["message"].get("content") or "", choice.get("finish_reason"), usage

    async def _score_yes(self, messages: list[Message]) -> YesNoScore:
        """P(Yes) from the next-token logits after the chat prompt, normalised over Yes/No tokens."""
        model = await asyncio.to_thread(self.loaded) if self._loaded is None else self._loaded

        def run() -> tuple[float, int, int, float]:
            timer = self._timer()
            llama = model.llama
            prompt = model.formatter(messages=_chat_messages(messages)).prompt
            tokens = llama.tokenize(prompt.encode(), add_bos=False, special=True)
            prefix = eval_prompt(llama, tokens, model=self.name)
            logits = np.ctypeslib.as_array(llama._ctx.get_logits_ith(-1), shape=(llama.n_vocab(),))
            yes = logits[model.yes_ids].astype(np.float64)
            no = logits[model.no_ids].astype(np.float64)
            top = max(float(yes.max()), float(no.max()))
            p_yes = float(np.exp(yes - top).sum())
            p_no = float(np.exp(no - top).sum())
            p = p_yes / (p_yes + p_no) if p_yes + p_no > 0 else 0.5
            return p, len(tokens), prefix, timer.elapsed

        p, n_prompt, cached, seconds = await model.run(run)
        if math.isnan(p):
            p = 0.5
        usage = Usage(model=self.name, prompt_tokens=n_prompt, cached_prompt_tokens=cached, seconds=seconds)
        return YesNoScore(p_yes=min(1.0, max(0.0, p)), usage=usage, method="logits")
