"""Benchmark reports: metrics per system, set, tag and repeat; report.json, report.md and plots.

The report is always recomputed from ``questions.jsonl``, never accumulated in memory, so a
resumed or extended run (another set, another system, more repeats) yields the same report as
one uninterrupted run would. Repeats are summarised as mean ± sample standard deviation of each
per-repeat metric: with temperature 0 the variation comes from the option order (each repeat
shuffles the options with its own seed), which is exactly the noise a single run hides.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent.bench.grading import Graded, metrics
from corpus.store import write_atomic

__all__ = ["build_report", "free_text_table", "side_by_side", "write_report"]

# The numbers a reader compares first, in table order.
HEADLINE = ("accuracy", "precision", "coverage", "abstention_accuracy", "faithfulness")
# The free-form answer checks (agent.bench.freetext), present only in free-text runs.
FREE_TEXT = (
    "token_f1",
    "token_f1_answered",
    "containment",
    "containment_answered",
    "right_paper_cited",
)
_SPREAD = (
    *HEADLINE,
    *FREE_TEXT,
    "abstention_rate",
    "median_seconds",
    "median_tokens",
    "fabricated_citations",
)


def _recall(m: dict[str, Any]) -> float | None:
    values = list((m.get("recall_at_k") or {}).values())
    return values[0] if values else None


def _spread(per_repeat: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Mean and sd across repeats for each headline number present in every repeat."""
    out: dict[str, dict[str, float]] = {}
    for name in (*_SPREAD, "recall_at_k"):
        values = [_recall(m) if name == "recall_at_k" else m.get(name) for m in per_repeat]
        nums = [float(v) for v in values if isinstance(v, int | float)]
        if len(nums) == len(per_repeat) and nums:
            out[name] = {
                "mean": statistics.mean(nums),
                "sd": statistics.stdev(nums) if len(nums) > 1 else 0.0,
            }
    return out


def set_metrics(rows: Sequence[Graded]) -> dict[str, Any]:
    """One set of one system: pooled metrics, per tag, and per repeat with mean ± sd."""
    m = metrics(rows)
    by_repeat: dict[int, list[Graded]] = defaultdict(list)
    by_tag: dict[str, list[Graded]] = defaultdict(list)
    for r in rows:
        by_repeat[r.repeat].append(r)
        by_tag[r.tag].append(r)
    m["by_tag"] = {tag: metrics(group) for tag, group in sorted(by_tag.items())}
    m["repeats"] = len(by_repeat)
    if len(by_repeat) > 1:
        per_repeat = [metrics(group) for _, group in sorted(by_repeat.items())]
        m["per_repeat"] = per_repeat
        m["mean_sd"] = _spread(per_repeat)
    return m


def build_report(rows: Sequence[Graded], meta: dict[str, Any]) -> dict[str, Any]:
    """``sets`` holds the first system's sets (the usual single-system case); ``systems`` all."""
    grouped: dict[str, dict[str, list[Graded]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        grouped[r.system][r.set_name].append(r)
    systems = {
        system: {name: set_metrics(group) for name, group in sets.items()} for system, sets in grouped.items()
    }
    first = next(iter(systems.values()), {})
    return {**meta, "sets": first, "systems": systems}


def _fmt(value: Any, pct: bool = True) -> str:
    if value is None:
        return "–"
    if isinstance(value, dict) and "mean" in value:
        if pct:
            return f"{100 * value['mean']:.0f} ± {100 * value['sd']:.0f}%"
        return f"{value['mean']:.0f} ± {value['sd']:.0f}"
    if isinstance(value, float) and pct:
        return f"{100 * value:.0f}%"
    if isinstance(value, float):
        return f"{value:,.0f}"
    return str(value)


def side_by_side(report: dict[str, Any]) -> str:
    """A markdown table: one row per (set, system), the numbers the systems are compared on."""
    head = (
        "| set | system | n | accuracy | precision | coverage | abstention | recall@k | "
        "faithfulness | fabricated | median s | p90 s | median tokens |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for system, sets in report.get("systems", {}).items():
        for name, m in sets.items():
            spread = m.get("mean_sd", {})

            def cell(key: str, pct: bool = True, m: dict[str, Any] = m, spread: Any = spread) -> str:
                return _fmt(spread.get(key, m.get(key)), pct)

            recall = spread.get("recall_at_k", _recall(m))
            lines.append(
                f"| {name} | {system} | {m['n']} | {cell('accuracy')} | {cell('precision')} | "
                f"{cell('coverage')} | {cell('abstention_accuracy')} | {_fmt(recall)} | "
                f"{cell('faithfulness')} | {m.get('fabricated_citations', 0)} | "
                f"{cell('median_seconds', False)} | {_fmt(m.get('p90_seconds'), False)} | "
                f"{cell('median_tokens', False)} |"
            )
    if any("token_f1" in m for sets in report.get("systems", {}).values() for m in sets.values()):
        lines += ["", free_text_table(report)]
    return "\n".join(lines)


def free_text_table(report: dict[str, Any]) -> str:
    """The free-form answers against their reference spans: one row per (set, system).

    "judge correct" is correct / answered (the run's precision); F1 and containment are shown
    over all answerable questions, then over the answers given.
    """
    head = (
        "| set | system | n | coverage | judge correct (of answered) | token F1 | F1 answered | "
        "containment | containment answered | right paper cited | abstention rate | abstention accuracy | "
        "median s | median tokens |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for system, sets in report.get("systems", {}).items():
        for name, m in sets.items():
            if "token_f1" not in m:
                continue
            spread = m.get("mean_sd", {})

            def cell(key: str, pct: bool = True, m: dict[str, Any] = m, spread: Any = spread) -> str:
                return _fmt(spread.get(key, m.get(key)), pct)

            lines.append(
                f"| {name} | {system} | {m['n']} | {cell('coverage')} | {cell('precision')} | "
                f"{cell('token_f1')} | {cell('token_f1_answered')} | {cell('containment')} | "
                f"{cell('containment_answered')} | {cell('right_paper_cited')} | "
                f"{cell('abstention_rate')} | {cell('abstention_accuracy')} | "
                f"{cell('median_seconds', False)} | {cell('median_tokens', False)} |"
            )
    return "\n".join(lines)


def _markdown(report: dict[str, Any], plots: list[str]) -> str:
    parts = [
        "# Benchmark report",
        "",
        f"seed {report.get('seed')}, repeats {report.get('repeats', 1)}, "
        f"withhold sources: {report.get('withhold_sources', False)}, settings: {report.get('settings')}",
        "",
        side_by_side(report),
        "",
    ]
    for system, sets in report.get("systems", {}).items():
        for name, m in sets.items():
            tags = m.get("by_tag", {})
            if len(tags) > 1:
                parts += [f"## {system} · {name} by tag", "", "| tag | n | accuracy | precision | coverage |"]
                parts.append("|---|---|---|---|---|")
                for tag, t in tags.items():
                    parts.append(
                        f"| {tag} | {t['n']} | {_fmt(t['accuracy'])} | {_fmt(t['precision'])} | "
                        f"{_fmt(t['coverage'])} |"
                    )
                parts.append("")
            if m.get("withheld_answered"):
                parts += [
                    f"{system} · {name}: sources withheld, {m['withheld_answered']} answered; "
                    f"{m.get('withheld_answered_stating_reference', 0)} of them state the withheld "
                    "paper's reference (found in another paper), the rest something else.",
                    "",
                ]
            if m.get("ragas"):
                parts += [f"## {system} · {name}: RAGAS (own judge and embedder)", ""]
                parts += [f"- {k}: {_fmt(v)}" for k, v in m["ragas"].items()] + [""]
    parts += [f"![{p}]({p})" for p in plots]
    return "\n".join(parts) + "\n"


def _plots(out: Path, rows: Sequence[Graded], report: dict[str, Any]) -> list[str]:
    """metrics.png (headline metrics per set and system) and latency.png (seconds per question)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # plots are optional: the [bench] extra installs matplotlib
        return []
    groups = [(s, n, m) for s, sets in report["systems"].items() for n, m in sets.items()]
    if not groups:
        return []
    names = ("accuracy", "precision", "coverage", "faithfulness")
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(groups) + 2), 4))
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        values = [m.get(name) or 0.0 for _, _, m in groups]
        ax.bar([g + i * width for g in range(len(groups))], values, width, label=name)
    ax.set_xticks([g + 0.4 - width / 2 for g in range(len(groups))])
    ax.set_xticklabels([f"{n}\n{s}" for s, n, _ in groups], fontsize=8)
    ax.set_ylim(0, 1)
    ax.legend(fontsize=8)
    ax.set_title("Metrics per set and system")
    fig.tight_layout()
    fig.savefig(out / "metrics.png", dpi=100)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(groups) + 2), 4))
    data = [[r.seconds for r in rows if r.system == s and r.set_name == n] for s, n, _ in groups]
    ax.boxplot(data)
    ax.set_xticks(range(1, len(groups) + 1))
    ax.set_xticklabels([f"{n}\n{s}" for s, n, _ in groups], fontsize=8)
    ax.set_ylabel("seconds per question")
    ax.set_title("Latency distribution")
    fig.tight_layout()
    fig.savefig(out / "latency.png", dpi=100)
    plt.close(fig)
    return ["metrics.png", "latency.png"]


def write_report(out: Path, rows: Sequence[Graded], meta: dict[str, Any]) -> dict[str, Any]:
    """Write report.json, report.md and the plots into ``out``; returns the report."""
    report = build_report(rows, meta)
    write_atomic(out / "report.json", json.dumps(report, indent=2).encode())
    plots = _plots(out, rows, report)
    write_atomic(out / "report.md", _markdown(report, plots).encode())
    return report
