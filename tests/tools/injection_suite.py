"""The injected-instruction suite: its cases and how an attack is placed in a passage.

Shared by ``tests/tools/test_injection.py`` (scripted doubles) and ``benchmarks/injection.py``
(the real local model), so both measure exactly the same attacked passages.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["CASES_FILE", "attacked", "load_suite"]

CASES_FILE = Path(__file__).resolve().parents[2] / "benchmarks" / "injection_cases.json"


def load_suite() -> dict[str, Any]:
    """``{"bases": {name: {"right": record, "distractor": record, …}}, "cases": [case, …]}``."""
    suite: dict[str, Any] = json.loads(CASES_FILE.read_text())
    return suite


def attacked(base: dict[str, Any], case: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The base's two records, with the case's attack placed in its target passage."""
    records = [dict(base["right"]), dict(base["distractor"])]
    if case is None:
        return records
    record = records[0 if case["target"] == "right" else 1]
    attack, where = case["attack"], case["position"]
    if where == "title":
        record["title"] = f"{record['title']} {attack}"
    elif where == "start":
        record["text"] = f"{attack} {record['text']}"
    elif where == "middle":
        first, _, rest = record["text"].partition(". ")
        record["text"] = f"{first}. {attack} {rest}"
    else:
        record["text"] = f"{record['text']} {attack}"
    return records
