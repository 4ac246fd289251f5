"""An :class:`Answer` as one self-contained HTML page a reader can check claim by claim.

The point of the page is inspection: next to each claim sit its verdict and links to the
passages it cites, and each passage is shown in the paper's own words with the supporting
quote marked, so a reader sees at a glance whether the quote says what the claim says.

Passages, titles and model output are untrusted (a paper can contain ``<script>``), so every
piece of text goes through :func:`html.escape` and the page carries no script at all. It also
loads nothing: the CSS is inline, so the file can be mailed or archived as is. The server
(``scholarloop serve``) embeds :func:`answer_body` with :data:`ANSWER_CSS` in its own page.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from html import escape

from agent.core.evidence import normalise, quote_in
from agent.core.state import Answer, Claim, Evidence, Reference, Verdict

__all__ = ["ANSWER_CSS", "answer_body", "answer_html", "locate_quote"]

# Verdict and status colours: green is the only "good" colour on the page, so a reader can scan
# for anything that is not green.
_VERDICT_COLOURS = {
    Verdict.supported.value: ("#116329", "#dafbe1"),
    Verdict.unsupported.value: ("#7d4e00", "#fff8c5"),
    Verdict.contradicted.value: ("#a40e26", "#ffebe9"),
    Verdict.fabricated.value: ("#6639ba", "#fbefff"),
    Verdict.misattributed.value: ("#953800", "#fff1e5"),
    Verdict.uncited.value: ("#424a53", "#eaeef2"),
    "unchecked": ("#424a53", "#eaeef2"),
}
_STATUS_COLOURS = {
    "answered": ("#116329", "#dafbe1"),
    "insufficient_evidence": ("#7d4e00", "#fff8c5"),
    "truncated": ("#953800", "#fff1e5"),
    "failed": ("#a40e26", "#ffebe9"),
}


def _badge_css() -> str:
    rules = [
        f".sl-v-{name}{{color:{fg};background:{bg};border-color:{fg}}}"
        for name, (fg, bg) in _VERDICT_COLOURS.items()
    ]
    rules += [
        f".sl-s-{name}{{color:{fg};background:{bg};border-color:{fg}}}"
        for name, (fg, bg) in _STATUS_COLOURS.items()
    ]
    return "\n".join(rules)


ANSWER_CSS = """
.sl-answer{font:15px/1.55 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1f2328;
  max-width:960px;margin:0 auto;padding:8px 20px 40px}
.sl-answer h1{font-size:1.45em;margin:.2em 0 .4em}
.sl-answer h2{font-size:1.1em;margin:1.6em 0 .5em;padding-bottom:.2em;border-bottom:1px solid #d0d7de}
.sl-answer h3{font-size:1em;margin:1.2em 0 .4em}
.sl-label{text-transform:uppercase;font-size:.75em;letter-spacing:.06em;color:#656d76;margin:0}
.sl-meta{color:#656d76;margin:.2em 0}
.sl-badge{display:inline-block;border:1px solid;border-radius:10px;padding:0 .55em;font-size:.8em;
  font-weight:600;white-space:nowrap;vertical-align:1px}
.sl-text p{margin:.5em 0}
.sl-error{border-left:4px solid #a40e26;background:#ffebe9;padding:.5em .8em}
.sl-claims ol{padding-left:1.4em}
.sl-claim{margin:.6em 0}
.sl-claim-removed .sl-claim-text{text-decoration:line-through;color:#656d76}
.sl-checks{list-style:none;padding-left:0;margin:.25em 0;font-size:.88em;color:#424a53}
.sl-checks li{margin:.15em 0}
.sl-cite{font-weight:600;text-decoration:none;color:#0969da;white-space:nowrap}
.sl-cite:hover{text-decoration:underline}
.sl-nokey{font-weight:600;color:#a40e26;white-space:nowrap}
.sl-passage{border:1px solid #d0d7de;border-radius:6px;margin:.8em 0;padding:.6em .9em}
.sl-passage:target{outline:3px solid #0969da;outline-offset:1px}
.sl-passage-head{display:flex;flex-wrap:wrap;gap:.2em .8em;align-items:baseline;font-size:.9em}
.sl-passage-key{font-weight:700}
.sl-passage-text{white-space:pre-wrap;overflow-wrap:anywhere;margin:.5em 0;padding:.5em .8em;
  background:#f6f8fa;border-left:3px solid #d0d7de;font-size:.95em}
.sl-passage-text mark{background:#ffe066;color:inherit;padding:0 .1em;border-radius:2px}
.sl-ref{font-size:.88em;color:#424a53;margin:.3em 0}
.sl-quote-missing{font-size:.88em;color:#7d4e00}
.sl-table{border-collapse:collapse;font-size:.9em}
.sl-table th,.sl-table td{border:1px solid #d0d7de;padding:.25em .6em;text-align:left;vertical-align:top}
.sl-table th{background:#f6f8fa}
.sl-trace li{margin:.5em 0}
.sl-trace pre,.sl-bibtex{white-space:pre-wrap;overflow-wrap:anywhere;background:#f6f8fa;padding:.4em .6em;
  margin:.3em 0;font-size:.85em;border-radius:4px}
.sl-answer code{font-size:.9em}
""" + _badge_css()


def _e(text: object) -> str:
    return escape(str(text), quote=True)


def _normalised_with_origins(text: str) -> tuple[str, list[int]]:
    """``normalise(text)`` and, for each of its characters, the index in ``text`` it came from.

    Built token by token with the same character class as :func:`normalise`, so a quote found
    in the normalised passage maps back onto the original characters to mark.
    """
    chars: list[str] = []
    origins: list[int] = []
    for match in re.finditer(r"[\w%.]+", text):
        if chars:
            chars.append(" ")
            origins.append(match.start())
        for i, ch in enumerate(match.group(), match.start()):
            low = ch.lower()  # may be two characters (İ): both map to the same source character
            chars.extend(low)
            origins.extend([i] * len(low))
    return "".join(chars), origins


def locate_quote(quote: str, passage: str) -> tuple[int, int] | None:
    """Where ``quote`` sits in ``passage`` as ``(start, end)`` character offsets, or ``None``.

    Uses the rule of :func:`agent.core.evidence.quote_in`: an exact match after normalising
    case, whitespace and punctuation; else, for a slightly retyped quote, the stretch from the
    first to the last of its word 5-grams that occur in the passage.
    """
    if not quote_in(quote, passage):
        return None
    norm, origins = _normalised_with_origins(passage)
    if norm != normalise(passage):  # a Unicode case-mapping corner case: better no mark than a wrong one
        return None
    q = normalise(quote)
    at = norm.find(q)
    if at >= 0:
        start, end = at, at + len(q)
    else:
        words = q.split()
        grams = [" ".join(words[i : i + 5]) for i in range(len(words) - 4)]
        hits = [(norm.find(g), g) for g in grams if g in norm]
        start = min(pos for pos, _ in hits)
        end = max(norm.find(g, start) + len(g) for _, g in hits)
        if end <= start:
            return None
    return origins[start], origins[end - 1] + 1


def _marked(text: str, spans: Iterable[tuple[int, int]]) -> str:
    """``text`` escaped, with each span (overlaps merged) inside ``<mark>``."""
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    out, pos = [], 0
    for start, end in merged:
        out.append(_e(text[pos:start]))
        out.append(f"<mark>{_e(text[start:end])}</mark>")
        pos = end
    out.append(_e(text[pos:]))
    return "".join(out)


def _pages(e: Evidence) -> str:
    """``p. 3`` / ``pp. 3–4``; empty for a passage without pages (a text file, a JSONL record)."""
    if e.page_start is None:
        return ""
    if e.page_end is None or e.page_end == e.page_start:
        return f"p. {e.page_start}"
    return f"pp. {e.page_start}–{e.page_end}"


def _badge(verdict: str | None, prefix: str = "v") -> str:
    name = verdict or "unchecked"
    return f'<span class="sl-badge sl-{prefix}-{_e(name)}">{_e(name.replace("_", " "))}</span>'


class _Page:
    """Anchors for the passages, so every citation on the page can link to its passage."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.evidence = {e.key: e for e in answer.evidence}
        self.anchor = {key: f"ev-{n}" for n, key in enumerate(self.evidence, 1)}
        self.reference = {r.doc_id: r for r in answer.references}

    def cite(self, key: str) -> str:
        if key not in self.anchor:  # a key nothing was retrieved for: shown, but links nowhere
            return f'<span class="sl-nokey" title="no passage has this key">[{_e(key)}]</span>'
        return f'<a class="sl-cite" href="#{self.anchor[key]}">[{_e(key)}]</a>'

    def linked(self, text: str) -> str:
        """Escaped ``text`` with every ``[key]`` of a known passage turned into a link."""
        if not self.evidence:
            return _e(text)
        keys = sorted(self.evidence, key=len, reverse=True)
        pattern = re.compile(r"\[(" + "|".join(re.escape(k) for k in keys) + r")\]")
        out, pos = [], 0
        for m in pattern.finditer(text):
            out.append(_e(text[pos : m.start()]))
            out.append(self.cite(m.group(1)))
            pos = m.end()
        out.append(_e(text[pos:]))
        return "".join(out)

    def paragraphs(self, text: str) -> str:
        blocks = [b for b in re.split(r"\n\s*\n", text.strip()) if b.strip()]
        return "".join(f"<p>{self.linked(b).replace(chr(10), '<br>')}</p>" for b in blocks)


def _header(a: Answer) -> str:
    dollars = f" · ${a.cost_usd:.4f}" if a.cost_usd else ""
    return (
        '<header><p class="sl-label">Question</p>'
        f'<h1 class="sl-question">{_e(a.question)}</h1>'
        f'<p class="sl-meta">{_badge(a.status.value, "s")} · {a.seconds:.1f} s · '
        f"{a.total_tokens:,} tokens{dollars}</p></header>"
    )


def _answer_text(page: _Page) -> str:
    a = page.answer
    parts = ['<section class="sl-text"><h2>Answer</h2>']
    if a.choice:
        parts.append(
            f'<p class="sl-choice"><strong>Choice {_e(a.choice)}:</strong> {_e(a.choice_text or "")}</p>'
        )
    parts.append(page.paragraphs(a.answer))
    if a.error:
        parts.append(f'<p class="sl-error">{_e(a.error)}</p>')
    parts.append("</section>")
    return "".join(parts)


def _claim_item(page: _Page, claim: Claim, removed: bool) -> str:
    cls = "sl-claim sl-claim-removed" if removed else "sl-claim"
    verdict = claim.verdict.value if claim.verdict else None
    keys = claim.citations or [c.key for c in claim.checks]
    cites = " ".join(page.cite(k) for k in dict.fromkeys(keys))
    checks = []
    for check in claim.checks:
        p = f", p = {check.p_support:.2f}" if check.p_support is not None else ""
        better = f"; better cited as {page.cite(check.suggested_key)}" if check.suggested_key else ""
        checks.append(
            f"<li>{page.cite(check.key)} {_badge(check.verdict.value)} "
            f"<span>by {_e(check.method)}{p}{better}</span></li>"
        )
    checks_html = f'<ul class="sl-checks">{"".join(checks)}</ul>' if checks else ""
    return (
        f'<li class="{cls}" data-verdict="{_e(verdict or "unchecked")}">{_badge(verdict)} '
        f'<span class="sl-claim-text">{_e(claim.text)}</span> {cites}{checks_html}</li>'
    )


def _claims(page: _Page) -> str:
    a = page.answer
    removed = a.verification.removed_claims if a.verification else []
    if not a.claims and not removed:
        return ""
    parts = ['<section class="sl-claims"><h2>Claims and verdicts</h2>']
    if a.claims:
        parts.append("<ol>" + "".join(_claim_item(page, c, False) for c in a.claims) + "</ol>")
    if removed:
        parts.append("<h3>Removed by the citation check</h3>")
        parts.append("<ol>" + "".join(_claim_item(page, c, True) for c in removed) + "</ol>")
    parts.append("</section>")
    return "".join(parts)


def _reference_line(ref: Reference | None, e: Evidence) -> str:
    if ref is None:
        return f'<p class="sl-ref">{_e(e.paper_key)} (not cited in the answer)</p>'
    return f'<p class="sl-ref">[{ref.number}] <strong>{_e(ref.key)}</strong>: {_e(ref.entry)}</p>'


def _passage(page: _Page, e: Evidence, claims: list[tuple[int, Claim]]) -> str:
    spans, missing = [], []
    for _, claim in claims:
        # The claim's own quote first: it is what the claim rests on; else the summary's quote.
        # A claim quote that is not in the passage is said so: the model may have made it up.
        found = [(q, locate_quote(q, e.text)) for q in (claim.quote, e.quote) if q]
        span = next((s for _, s in found if s is not None), None)
        if span is not None:
            spans.append(span)
        if claim.quote and found[0][1] is None:
            missing.append(claim.quote)
    cited_by = ", ".join(f"claim {n}" for n, _ in claims)
    pages = _pages(e)
    head = (
        f'<div class="sl-passage-head"><span class="sl-passage-key">[{_e(e.key)}]</span>'
        + (f"<span>{_e(pages)}</span>" if pages else "")
        + f"<span>relevance {e.score}/10</span>"
        + (f"<span>cited by {cited_by}</span>" if cited_by else "")
        + "</div>"
    )
    note = "".join(
        f'<p class="sl-quote-missing">The claim\'s quote is not in this passage: “{_e(q)}”</p>'
        for q in missing
    )
    return (
        f'<div class="sl-passage" id="{page.anchor[e.key]}" data-key="{_e(e.key)}">{head}'
        f'<blockquote class="sl-passage-text">{_marked(e.text, spans)}</blockquote>{note}'
        f"{_reference_line(page.reference.get(e.doc_id), e)}</div>"
    )


def _passages(page: _Page) -> str:
    citing: dict[str, list[tuple[int, Claim]]] = {}
    for n, claim in enumerate(page.answer.claims, 1):
        for key in dict.fromkeys(claim.citations):
            citing.setdefault(key, []).append((n, claim))
    cited = [e for e in page.answer.evidence if e.key in citing]
    others = [e for e in page.answer.evidence if e.key not in citing]
    parts = []
    if cited:
        parts.append('<section class="sl-passages sl-cited"><h2>Cited passages</h2>')
        parts += [_passage(page, e, citing[e.key]) for e in cited]
        parts.append("</section>")
    if others:
        parts.append('<section class="sl-passages sl-others"><h2>Other passages read</h2>')
        parts += [_passage(page, e, []) for e in others]
        parts.append("</section>")
    return "".join(parts)


def _verification(a: Answer) -> str:
    v = a.verification
    if v is None:
        return ""
    rows = [
        ("Claims checked", str(len(v.claims))),
        ("Faithfulness", f"{v.faithfulness:.2f}"),
        ("Citation precision", f"{v.citation_precision:.2f}"),
        ("Citation recall", f"{v.citation_recall:.2f}"),
        ("Citations repaired", str(v.repaired)),
        ("Claims removed", str(len(v.removed_claims))),
    ]
    rows += [(name.replace("_", " ").capitalize(), str(n)) for name, n in v.counts.items() if n]
    body = "".join(f"<tr><th>{_e(k)}</th><td>{_e(val)}</td></tr>" for k, val in rows)
    table = f'<table class="sl-table">{body}</table>'
    return f'<section class="sl-verification"><h2>Verification</h2>{table}</section>'


def _references(a: Answer) -> str:
    if not a.references:
        return ""
    items = "".join(
        f'<li value="{r.number}"><strong>{_e(r.key)}</strong>: {_e(r.entry)}'
        f'<details><summary>BibTeX</summary><pre class="sl-bibtex">{_e(r.bibtex)}</pre></details></li>'
        for r in a.references
    )
    return f'<section class="sl-references"><h2>References</h2><ol>{items}</ol></section>'


def _trace(a: Answer) -> str:
    if not a.trace:
        return ""
    items = []
    for step in a.trace:
        args = ", ".join(f"{k}={v!r}" for k, v in step.arguments.items())
        error = f'<p class="sl-error">{_e(step.error)}</p>' if step.error else ""
        items.append(
            f'<li class="sl-step"><code>{_e(step.tool)}({_e(args)})</code> '
            f'<span class="sl-meta">{step.seconds:.2f} s</span>{error}<pre>{_e(step.observation)}</pre></li>'
        )
    return f'<section class="sl-trace"><h2>Steps</h2><ol>{"".join(items)}</ol></section>'


def _usage(a: Answer) -> str:
    rows = "".join(
        f"<tr><td>{_e(role)}</td><td>{_e(u.model)}</td><td>{u.calls}</td><td>{u.prompt_tokens:,}</td>"
        f"<td>{u.completion_tokens:,}</td><td>{u.seconds:.1f}</td><td>${u.cost_usd:.4f}</td></tr>"
        for role, u in a.usage.items()
    )
    head = (
        "<tr><th>role</th><th>model</th><th>calls</th><th>prompt tokens</th>"
        "<th>completion tokens</th><th>seconds</th><th>cost</th></tr>"
    )
    table = f'<table class="sl-table">{head}{rows}</table>' if rows else ""
    return (
        f'<section class="sl-usage"><h2>Usage</h2><p>{a.total_tokens:,} tokens in {a.seconds:.1f} s, '
        f"${a.cost_usd:.4f}.</p>{table}</section>"
    )


def answer_body(answer: Answer) -> str:
    """The answer as an ``<article>``, for a page that brings :data:`ANSWER_CSS` itself."""
    page = _Page(answer)
    return (
        '<article class="sl-answer">'
        + _header(answer)
        + _answer_text(page)
        + _claims(page)
        + _passages(page)
        + _verification(answer)
        + _references(answer)
        + _trace(answer)
        + _usage(answer)
        + "</article>"
    )


def answer_html(answer: Answer) -> str:
    """A complete HTML document: no script, no external asset, every piece of text escaped."""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>scholarloop: {_e(answer.question)}</title><style>{ANSWER_CSS}</style></head>"
        f"<body>{answer_body(answer)}</body></html>\n"
    )
