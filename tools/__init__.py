"""The four tools the scholarloop agent can call, and what a tool is.

``paper_search``, ``gather_evidence``, ``generate_answer`` and ``verify_citations``: one module
each, sharing rules only through the kernel (:mod:`agent.core`). Loaded on first access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent.core.lazy import lazy_exports

if TYPE_CHECKING:
    from tools.base import Tool, ToolContext, ToolRetry, tool
    from tools.gather_evidence import gather_evidence
    from tools.generate_answer import generate_answer
    from tools.paper_search import paper_search
    from tools.verify_citations import verify_citations

__all__ = [
    "Tool",
    "ToolContext",
    "ToolRetry",
    "gather_evidence",
    "generate_answer",
    "paper_search",
    "tool",
    "verify_citations",
]

_HOME = {
    "Tool": "tools.base",
    "ToolContext": "tools.base",
    "ToolRetry": "tools.base",
    "tool": "tools.base",
    "gather_evidence": "tools.gather_evidence",
    "generate_answer": "tools.generate_answer",
    "paper_search": "tools.paper_search",
    "verify_citations": "tools.verify_citations",
}

__getattr__, __dir__ = lazy_exports(__name__, globals(), _HOME)
