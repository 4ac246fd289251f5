"""Greedy JSON decoding that checks the grammar only when the model's own pick breaks it.

llama-cpp-python puts the JSON-schema grammar in the sampler chain, so every generated token
runs the grammar over the whole vocabulary (151,646 tokens for Qwen2.5) before the greedy pick.
On two cores that alone took generation from ~17 to ~10 tokens/s. Under greedy decoding the
full pass is wasted whenever the unconstrained best token is one the grammar allows, which is
most tokens of a JSON reply the model was prompted to write: this module takes the argmax first,
asks the grammar about that one token, and runs the full pass only when it is refused (llama.cpp's
own ``common_sampler`` does the same). The result is the same token sequence the constrained
chain would produce: the argmax over allowed tokens *is* the unconstrained argmax whenever that
one is allowed.

``benchmarks/json_decoding.py`` replays real calls through llama-cpp-python's sampler and
through this decoder and compares replies and seconds. Prompt-lookup drafts (the next tokens
proposed from where the context's last tokens occurred before, checked in one batch) were
measured the same way and left out: a batched evaluation rounds differently from one token at a
time, so greedy picks at near ties changed and 7 of 14 replies differed.
"""

from __future__ import annotations

import ctypes
import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from agent.core.errors import MalformedResponseError
from agent.llm.types import JsonSchema

__all__ = ["Decoded", "decode_json", "eval_prompt", "schema_grammar"]


@dataclass
class Decoded:
    """What one constrained greedy generation produced."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    evaluated: int  # prompt tokens actually run through the model (the rest came from the KV cache)
    finish_reason: str  # "stop" (end-of-generation token) or "length" (max_tokens reached)
    full_passes: int  # tokens where the greedy pick broke the grammar and the full pass ran


@lru_cache(maxsize=64)
def _gbnf(schema_json: str) -> str:
    from llama_cpp.llama_grammar import JSON_GBNF, json_schema_to_gbnf

    try:
        return str(json_schema_to_gbnf(schema_json))
    except Exception:  # the converter raises several types; llama-cpp-python falls back the same way
        return str(JSON_GBNF)


def schema_grammar(schema: JsonSchema) -> str:
    """The GBNF grammar llama-cpp-python would build for ``schema`` (cached by its JSON); like
    llama-cpp-python, a schema its converter cannot handle falls back to plain JSON."""
    return _gbnf(json.dumps(schema, sort_keys=False))


class _Grammar:
    """A llama.cpp grammar sampler, with a cheap one-token check and the full-vocabulary pass."""

    def __init__(self, llama: Any, gbnf: str) -> None:
        import llama_cpp

        self._lib = llama_cpp
        self._ptr = llama_cpp.llama_sampler_init_grammar(llama._model.vocab, gbnf.encode(), b"root")
        if not self._ptr:
            raise MalformedResponseError("llama.cpp rejected the JSON grammar built from the schema")
        self._one = (llama_cpp.llama_token_data * 1)()
        self._one_arr = llama_cpp.llama_token_data_array(
            data=ctypes.cast(self._one, llama_cpp.llama_token_data_p), size=1, selected=-1, sorted=False
        )
        n_vocab = llama.n_vocab()
        self._all = np.zeros(
            n_vocab, dtype=np.dtype([("id", np.intc), ("logit", np.single), ("p", np.single)], align=True)
        )
        self._all["id"] = np.arange(n_vocab, dtype=np.intc)
        self._all_arr = llama_cpp.llama_token_data_array(
            data=self._all.ctypes.data_as(llama_cpp.llama_token_data_p),
            size=n_vocab,
            selected=-1,
            sorted=False,
        )

    def allows(self, token: int, logit: float) -> bool:
        self._one[0] = self._lib.llama_token_data(id=token, logit=logit, p=0.0)
        self._one_arr.size = 1
        self._one_arr.selected = -1
        self._lib.llama_sampler_apply(self._ptr, ctypes.byref(self._one_arr))
        return bool(np.isfinite(self._one[0].logit))

    def best_allowed(self, logits: np.ndarray) -> int:
        self._all["logit"] = logits
        self._all["p"] = 0.0
        self._all_arr.size = len(self._all)
        self._all_arr.selected = -1
        self._all_arr.sorted = False
        self._lib.llama_sampler_apply(self._ptr, ctypes.byref(self._all_arr))
        # llama.cpp's grammar pass marks refused tokens -inf in place; it does not reorder them
        return int(self._all["id"][int(np.argmax(self._all["logit"]))])

    def accept(self, token: int) -> None:
        self._lib.llama_sampler_accept(self._ptr, token)

    def close(self) -> None:
        if self._ptr:
            self._lib.llama_sampler_free(self._ptr)
            self._ptr = None


def eval_prompt(llama: Any, tokens: list[int], *, model: str | None = None) -> int:
    """Run ``tokens`` through the model, reusing the KV cache for the prefix they share with the
    previous call; returns how many tokens came from the cache. Afterwards the last row of
    logits predicts the token after ``tokens``. A prompt that leaves no room in the context is
    refused before anything runs (``model`` names it in the error)."""
    if len(tokens) >= llama.n_ctx():
        raise MalformedResponseError(
            f"prompt of {len(tokens)} tokens exceeds n_ctx={llama.n_ctx()}", model=model
        )
    prefix = 0
    for a, b in zip(llama._input_ids.tolist(), tokens, strict=False):
        if a != b:
            break
        prefix += 1
    prefix = min(prefix, len(tokens) - 1)  # at least one token must run to refresh the logits
    llama.n_tokens = prefix
    llama.eval(tokens[prefix:])
    return prefix


def decode_json(
    llama: Any, prompt: list[int], gbnf: str, max_tokens: int, *, model: str | None = None
) -> Decoded:
    """Greedy-generate after ``prompt`` under ``gbnf``, reusing the KV cache's shared prefix.

    Runs on the model's worker thread (llama.cpp is not re-entrant). The context limits are the
    ones ``Llama.create_completion`` applies, so a reply ends where it would have ended there.
    """
    import llama_cpp

    prefix = eval_prompt(llama, prompt, model=model)
    room = llama.n_ctx() - len(prompt)
    budget = min(max_tokens, room) if max_tokens > 0 else room
    vocab = llama._model.vocab
    n_vocab = llama.n_vocab()
    grammar = _Grammar(llama, gbnf)
    out: list[int] = []
    finish = "length"
    full = 0
    try:
        while len(out) < budget:
            logits = np.ctypeslib.as_array(llama._ctx.get_logits_ith(-1), shape=(n_vocab,))
            token = int(np.argmax(logits))
            if not grammar.allows(token, float(logits[token])):
                full += 1
                token = grammar.best_allowed(logits)
            if llama_cpp.llama_vocab_is_eog(vocab, token):
                finish = "stop"
                break
            grammar.accept(token)
            out.append(token)
            if len(out) < budget:
                llama.eval([token])
    finally:
        grammar.close()
    text = llama.detokenize(out, prev_tokens=prompt).decode("utf-8", errors="ignore")
    return Decoded(
        text=text,
        prompt_tokens=len(prompt),
        completion_tokens=len(out),
        evaluated=len(prompt) - prefix,
        finish_reason=finish,
        full_passes=full,
    )
