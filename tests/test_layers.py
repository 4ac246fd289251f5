"""The import graph points one way: kernel ← corpus ← tools ← orchestration ← cli/bench.

The rule is checked on the sources with :mod:`ast`, so a back-edge fails here even when it hides
inside a function (a lazy import is still an edge: it only moves the cycle to run time). Imports
under ``if TYPE_CHECKING:`` are annotations, not edges, and are skipped.
"""

from __future__ import annotations

import ast
import importlib
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("agent", "tools", "corpus")
# One module per agent tool: they share rules through the kernel, never through each other.
TOOL_MODULES = {
    "tools.paper_search",
    "tools.gather_evidence",
    "tools.generate_answer",
    "tools.verify_citations",
}


def layer(module: str) -> tuple[int, str]:
    """The layer a module belongs to: a higher number may import a lower one, never the reverse."""
    if module == "agent":
        return 5, "facade"  # the package's lazy public face
    for prefix, rank, name in (
        ("agent.core", 0, "kernel"),
        ("agent.llm", 0, "kernel"),
        ("corpus", 1, "corpus"),
        ("tools", 2, "tools"),
        ("agent.cli", 4, "cli/bench"),
        ("agent.bench", 4, "cli/bench"),
        ("agent", 3, "orchestration"),
    ):
        if module == prefix or module.startswith(prefix + "."):
            return rank, name
    raise ValueError(f"no layer for {module}")


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking_lines(tree: ast.Module) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                skip.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return skip


def imports_of(path: Path, module: str) -> list[tuple[int, str]]:
    """Every project module ``path`` imports, with the line (relative imports resolved)."""
    tree = ast.parse(path.read_text(), str(path))
    skip = _type_checking_lines(tree)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Import | ast.ImportFrom) or node.lineno in skip:
            continue
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.append((node.lineno, base))
            # `from agent.core import errors` imports the submodule agent.core.errors
            found += [(node.lineno, f"{base}.{a.name}") for a in node.names]
    return [(line, name) for line, name in found if name.split(".")[0] in PACKAGES]


def violations(root: Path) -> list[str]:
    """Each import that goes against the layers, as ``file:line: a (layer) imports b (layer)``."""
    known = {module_name(p, root) for pkg in PACKAGES for p in (root / pkg).rglob("*.py")}
    out = []
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            me = module_name(path, root)
            my_rank, my_layer = layer(me)
            for line, target in imports_of(path, me):
                if target not in known:
                    continue  # `from x import name` also yields x.name; keep real modules only
                rank, their_layer = layer(target)
                where = f"{path.relative_to(root)}:{line}"
                if rank > my_rank:
                    out.append(f"{where}: {me} ({my_layer}) imports {target} ({their_layer})")
                elif me in TOOL_MODULES and target in TOOL_MODULES and target != me:
                    out.append(f"{where}: tool {me} imports tool {target}")
    return out


def test_no_import_goes_against_the_layers() -> None:
    assert violations(ROOT) == []


def test_a_planted_back_edge_is_caught(tmp_path: Path) -> None:
    for pkg in PACKAGES:
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / "agent" / "core").mkdir()
    (tmp_path / "agent" / "core" / "__init__.py").write_text("")
    (tmp_path / "agent" / "loop.py").write_text("X = 1\n")
    (tmp_path / "corpus" / "store.py").write_text("def f():\n    from agent.loop import X\n    return X\n")
    (tmp_path / "tools" / "paper_search.py").write_text("")
    (tmp_path / "tools" / "gather_evidence.py").write_text("from . import paper_search\n")
    (tmp_path / "agent" / "core" / "state.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from tools import paper_search\n"
    )
    found = sorted(violations(tmp_path))
    assert found == [
        "corpus/store.py:2: corpus.store (corpus) imports agent.loop (orchestration)",
        "tools/gather_evidence.py:1: tool tools.gather_evidence imports tool tools.paper_search",
    ]


def test_every_layer_name_is_known() -> None:
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            layer(module_name(path, ROOT))  # raises for a module outside the drawn layers


def _all_modules() -> list[str]:
    return sorted(module_name(p, ROOT) for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def test_every_module_imports_first_in_a_fresh_interpreter() -> None:
    """``import corpus.store`` must work as the first line of a program, for every module."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONWARNINGS": "ignore"}

    def first_import(module: str) -> tuple[str, str]:
        proc = subprocess.run(
            [sys.executable, "-c", f"import {module}"], cwd=ROOT, env=env, capture_output=True, text=True
        )
        return module, proc.stderr.strip().splitlines()[-1] if proc.returncode else ""

    with ThreadPoolExecutor(max_workers=4) as pool:
        failures = {m: err for m, err in pool.map(first_import, _all_modules()) if err}
    assert failures == {}


@pytest.mark.parametrize(
    ("package", "expected"),
    [
        (
            "agent",
            {
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
            },
        ),
        (
            "tools",
            {
                "Tool",
                "ToolContext",
                "ToolRetry",
                "gather_evidence",
                "generate_answer",
                "paper_search",
                "tool",
                "verify_citations",
            },
        ),
        (
            "corpus",
            {
                "BuildReport",
                "Embedder",
                "Filters",
                "Library",
                "LocalSearch",
                "build_index",
                "make_embedder",
                "read_path",
            },
        ),
    ],
)
def test_public_surface_is_exactly(package: str, expected: set[str]) -> None:
    mod = importlib.import_module(package)
    assert set(mod.__all__) == expected
    for name in expected:
        assert getattr(mod, name) is not None
    assert set(dir(mod)) >= expected
    with pytest.raises(AttributeError, match="no attribute"):
        _ = mod.not_exported
