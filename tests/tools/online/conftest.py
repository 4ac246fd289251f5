"""Replay the real recorded Semantic Scholar / Crossref responses in ../shared/data/api with respx."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import SHARED_DATA

API = SHARED_DATA / "api"


def recorded(name: str) -> dict[str, Any]:
    if not API.is_dir():
        pytest.skip(f"recorded API responses not found at {API}")
    return json.loads((API / f"{name}.json").read_text())


def replay(name: str, **changes: Any) -> httpx.Response:
    """A response built from a recording; ``changes`` patch the parsed JSON body's top level."""
    rec = recorded(name)
    headers = {k: v for k, v in rec["headers"].items() if k in {"content-type", "retry-after"}}
    body = rec["body"]
    if isinstance(body, str):
        return httpx.Response(rec["status"], text=body, headers=headers)
    if changes:
        body = {**body, **changes}
    return httpx.Response(rec["status"], json=body, headers=headers)


def pdf_bytes() -> bytes:
    from tests.corpus.pdfs import make_pdf

    return make_pdf(
        ["Open access full text about hypoxia and collagen cross-linking in engineered tissues."],
        title="Developing functional musculoskeletal tissues",
    )


__all__ = ["Path", "pdf_bytes", "recorded", "replay"]
