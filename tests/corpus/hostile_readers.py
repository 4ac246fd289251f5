"""Readers that misbehave on purpose, for :mod:`corpus.isolate` tests.

The worker imports this module by name, so it imports nothing heavy: a worker starts in ~0.1 s.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path


def sleepy(path: Path) -> None:
    """Never finishes (as a PDF whose text extraction is quadratic)."""
    time.sleep(60)


def hungry(path: Path) -> None:
    """Allocates 8 MiB at a time, touching every page, until the address space runs out."""
    held = []
    while True:
        held.append(bytearray(8 * 1024 * 1024))


def segfault(path: Path) -> None:
    os.kill(os.getpid(), signal.SIGSEGV)


def exits(path: Path) -> None:
    os._exit(3)


def raises(path: Path) -> None:
    raise RuntimeError(f"cannot cope with {path.name}")


def echo(path: Path) -> str:
    return path.name
