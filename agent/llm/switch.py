"""The global switch that forbids real model requests.

``tests/conftest.py`` turns it off for the whole test session, so a test that forgets to use a
test double fails loudly instead of calling a paid API or loading a 1 GB model. Tests that do
mean to run a real (local, offline) model or a mocked HTTP provider opt back in with
:func:`allow_model_requests`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

__all__ = ["ALLOW_MODEL_REQUESTS", "allow_model_requests", "model_requests_allowed"]

ALLOW_MODEL_REQUESTS: bool = os.environ.get("SCHOLARLOOP_ALLOW_MODEL_REQUESTS", "1") != "0"


def model_requests_allowed() -> bool:
    return ALLOW_MODEL_REQUESTS


@contextlib.contextmanager
def allow_model_requests(allow: bool = True) -> Iterator[None]:
    """Temporarily set the switch (tests use it around mocked-HTTP and SmolLM2 calls)."""
    global ALLOW_MODEL_REQUESTS
    old = ALLOW_MODEL_REQUESTS
    ALLOW_MODEL_REQUESTS = allow
    try:
        yield
    finally:
        ALLOW_MODEL_REQUESTS = old
