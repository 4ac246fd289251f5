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

The replies this project asks for copy their prompt: a summary's quote is passage text, a claim
often restates a passage sentence. :func:`decode_json` can therefore also propose the next few
tokens by prompt lookup and evaluate them in one batch, keeping each only while it is the pick
the model makes at its position. ``benchmarks/json_decoding.py`` replays real calls through
llama-cpp-python's sampler and through this decoder, with and without drafts, and compares.
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

__all__ = ["Decoded", "decode_json", "schema_grammar"]


@dataclass
class Decoded:
    """What one constrained greedy generation produced."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    evaluated: int  # prompt tokens actually run through the model (the rest came from the KV cache)
    finish_reason: str  # "stop" (end-of-generation token) or "length" (max_tokens reached)
    full_passes: int  # tokens where the greedy pick broke the grammar and the full pass ran
    drafted: int = 0  # tokens proposed by prompt lookup
    accepted: int = 0  # of those, tokens that were the model's own pick


@lru_cache(maxsize=64)
def _gbnf(schema_json: str) -> str:
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    return str(json_schema_to_gbnf(schema_json))


def schema_grammar(schema: JsonSchema) -> str:
    """The GBNF grammar llama-cpp-python would build for ``schema`` (cached by its JSON)."""
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
        self._one[0].id = token
        self._one[0].logit = logit
        self._one[0].p = 0.0
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


class _Lookup:
    """Prompt-lookup drafts: the tokens that followed the latest earlier occurrence of the
    context's last few tokens.

    A summary's quote, a claim restating a passage sentence and the JSON keys of a reply are
    copied from the prompt or from earlier in the reply, so the next tokens are often already
    written somewhere in the context. Each n-gram maps to the position after its latest
    occurrence, kept up to date as tokens are appended, so a draft costs a dict look-up.
    """

    def __init__(self, tokens: list[int], sizes: tuple[int, ...] = (3, 2)) -> None:
        self.tokens: list[int] = []
        self.sizes = sizes
        self._after: dict[tuple[int, ...], int] = {}
        for t in tokens:
            self.append(t)

    def append(self, token: int) -> None:
        # index the n-grams that ended *before* this token, so the latest entry never points at
        # the context's own end (which has no continuation yet)
        n = len(self.tokens)
        for size in self.sizes:
            if n >= size:
                self._after[tuple(self.tokens[n - size :])] = n
        self.tokens.append(token)

    def draft(self, k: int) -> list[int]:
        for size in self.sizes:
            if len(self.tokens) < size:
                continue
            at = self._after.get(tuple(self.tokens[-size:]))
            if at is not None:
                return self.tokens[at : at + k]
        return []


def _eval_rows(llama: Any, batch: list[int]) -> int:
    """Run ``batch`` after the KV cache's first ``llama.n_tokens`` positions with logits kept for
    every row; returns the position of the batch's first token. Rows are read with
    ``get_logits_ith(i)``; the caller moves ``llama.n_tokens`` back past any rejected draft."""
    n_past = int(llama.n_tokens)
    llama._ctx.kv_cache_seq_rm(-1, n_past, -1)
    llama._batch.set_batch(batch=batch, n_past=n_past, logits_all=True)
    llama._ctx.decode(llama._batch)
    llama.input_ids[n_past : n_past + len(batch)] = batch
    llama.n_tokens = n_past + len(batch)
    return n_past


def decode_json(llama: Any, prompt: list[int], gbnf: str, max_tokens: int, draft_tokens: int = 0) -> Decoded:
    """Greedy-generate after ``prompt`` under ``gbnf``, reusing the KV cache's shared prefix.

    With ``draft_tokens`` > 0, each step also proposes up to that many tokens by prompt lookup
    (:class:`_Lookup`) and evaluates them in the same batch; every proposed token is kept only
    while it is the model's own greedy, grammar-checked pick at its position, so the reply is the
    one plain greedy decoding writes, up to the rounding of a batched evaluation.

    Runs on the model's worker thread (llama.cpp is not re-entrant). The context limits are the
    ones ``Llama.create_completion`` applies, so a reply ends where it would have ended there.
    """
    import llama_cpp

    n_ctx = llama.n_ctx()
    if len(prompt) >= n_ctx:
        raise MalformedResponseError(f"prompt of {len(prompt)} tokens exceeds n_ctx={n_ctx}")
    budget = min(max_tokens, n_ctx - len(prompt)) if max_tokens > 0 else n_ctx - len(prompt)

    prefix = 0
    for a, b in zip(llama._input_ids.tolist(), prompt, strict=False):
        if a != b:
            break
        prefix += 1
    prefix = min(prefix, len(prompt) - 1)  # at least one token must run to refresh the logits
    llama.n_tokens = prefix
    llama.eval(prompt[prefix:])

    vocab = llama._model.vocab
    n_vocab = llama.n_vocab()
    grammar = _Grammar(llama, gbnf)
    lookup = _Lookup(prompt) if draft_tokens > 0 else None
    out: list[int] = []
    finish = "length"
    full = 0
    drafted = accepted = 0

    def pick(row: int) -> int:
        nonlocal full
        logits = np.ctypeslib.as_array(llama._ctx.get_logits_ith(row), shape=(n_vocab,))
        token = int(np.argmax(logits))
        if not grammar.allows(token, float(logits[token])):
            full += 1
            token = grammar.best_allowed(logits)
        return token

    def keep(token: int) -> None:
        grammar.accept(token)
        out.append(token)
        if lookup is not None:
            lookup.append(token)

    try:
        token = pick(-1)
        while True:
            if llama_cpp.llama_vocab_is_eog(vocab, token):
                finish = "stop"
                break
            keep(token)
            if len(out) >= budget:
                break
            draft = lookup.draft(min(draft_tokens, budget - len(out))) if lookup is not None else []
            if not draft:
                llama.eval([token])
                token = pick(-1)
                continue
            drafted += len(draft)
            n_past = _eval_rows(llama, [token, *draft])
            # row j predicts the token after batch[j]; draft[j] is right if it is that pick
            for j, proposed in enumerate(draft):
                token = pick(j)
                if token != proposed or llama_cpp.llama_vocab_is_eog(vocab, token):
                    llama.n_tokens = n_past + 1 + j  # batch[0..j] stay in the cache
                    break
                accepted += 1
                keep(token)
                if len(out) >= budget:
                    break
            else:
                token = pick(len(draft))
                continue
            if len(out) >= budget:
                break
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
        drafted=drafted,
        accepted=accepted,
    )
