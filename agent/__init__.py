"""scholarloop: cited, citation-checked answers to scientific literature questions.

from agent import ask
answer = ask("Which inhibitor remains active against EGFR T790M?", papers="papers/")
print(answer.answer)

The package is layered (see ``docs/architecture.md``): ``agent.core`` and ``agent.llm`` are the
kernel, ``corpus`` and ``tools`` sit above it, and ``agent.api``/``agent.loop`` on top. This
``__init__`` imports nothing eagerly, so ``import corpus.store`` (which needs the kernel, and so
this package) never drags in the application above it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent.core.lazy import lazy_exports

if TYPE_CHECKING:
    from agent.api import Session, aask, aask_many, ask, ask_many
    from agent.core.errors import ScholarloopError
    from agent.core.settings import Settings, load_settings
    from agent.core.state import Answer, Claim, Evidence, Status, Verdict

__all__ = [
    "Answer",
    "Claim",
    "Evidence",
    "ScholarloopError",
    "Session",
    "Settings",
    "Status",
    "Verdict",
    "aask",
    "aask_many",
    "ask",
    "ask_many",
    "load_settings",
]

_HOME = {
    "Answer": "agent.core.state",
    "Claim": "agent.core.state",
    "Evidence": "agent.core.state",
    "Status": "agent.core.state",
    "Verdict": "agent.core.state",
    "ScholarloopError": "agent.core.errors",
    "Settings": "agent.core.settings",
    "load_settings": "agent.core.settings",
    "Session": "agent.api",
    "aask": "agent.api",
    "aask_many": "agent.api",
    "ask": "agent.api",
    "ask_many": "agent.api",
}


__getattr__, __dir__ = lazy_exports(__name__, globals(), _HOME)
