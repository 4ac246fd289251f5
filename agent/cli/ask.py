"""``scholarloop ask`` and ``scholarloop batch``: answers from the shell, with live steps."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.console import Console

__all__ = ["ask_command", "batch_command"]


def _session(obj: Any, papers: Path | None, index: Path | None, online: bool) -> Any:
    from agent.api import Session

    return Session(papers=papers, index=index, online=online, settings=obj.settings)


@click.command("ask")
@click.argument("question")
@click.option(
    "--papers", type=click.Path(path_type=Path, exists=True), help="Folder of papers to answer from."
)
@click.option(
    "--index", type=click.Path(path_type=Path, file_okay=False), help="Index built with `index build`."
)
@click.option("--online", is_flag=True, help="Also search Semantic Scholar and Crossref.")
@click.option("--option", "options", multiple=True, help="Multiple-choice option (repeat for each).")
@click.pass_obj
def ask_command(
    obj: Any, question: str, papers: Path | None, index: Path | None, online: bool, options: tuple[str, ...]
) -> None:
    """Answer QUESTION with cited, citation-checked claims."""
    import asyncio

    err = Console(stderr=True, quiet=obj.quiet or obj.as_json)
    session = _session(obj, papers, index, online)
    info = session.library.info()
    err.print(f"[dim]library {info['path']}: {info['papers']} papers, {info['chunks']} chunks[/dim]")

    def on_event(event: str, data: dict[str, Any]) -> None:
        if event == "step":
            args = ", ".join(f"{k}={str(v)[:60]!r}" for k, v in data["arguments"].items())
            err.print(f"[bold cyan]→ {data['tool']}[/bold cyan]({args})  [dim]{data['reason']}[/dim]")
        elif event == "observation":
            lines = data["observation"].splitlines() or [""]
            err.print(f"  [dim]{lines[0][:150]} ({data['seconds']:.1f}s)[/dim]")
            for note in (line for line in lines[1:] if line.startswith("Note: ")):
                err.print(f"  [yellow]{note[6:]}[/yellow]")

    answer = asyncio.run(session.ask(question, options=list(options) or None, on_event=on_event))
    if obj.as_json:
        click.echo(answer.model_dump_json(indent=2))
        return
    out = Console()
    out.print()
    out.print(answer.answer, highlight=False)
    if answer.references:
        out.print("\n[bold]References[/bold]")
        for ref in answer.references:
            out.print(f"{ref.number}. [{ref.key}] {ref.entry}", highlight=False)
    v = answer.verification
    if v is not None and v.claims:
        out.print(
            f"\n[bold]Verification[/bold]: {len(v.claims)} claim(s) checked — "
            + ", ".join(f"{k} {n}" for k, n in v.counts.items() if n)
            + f"; faithfulness {v.faithfulness:.2f}, citation precision {v.citation_precision:.2f}",
            highlight=False,
        )
    out.print(
        f"[dim]status {answer.status.value}; {answer.seconds:.1f} s; {answer.total_tokens} tokens; "
        f"${answer.cost_usd:.4f}[/dim]"
    )
    if answer.error:
        out.print(f"[yellow]{answer.error}[/yellow]")


@click.command("batch")
@click.argument("questions", type=click.Path(path_type=Path, exists=True, dir_okay=False))
@click.option(
    "-o",
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    default=Path("answers.jsonl"),
    show_default=True,
)
@click.option("--concurrency", default=1, show_default=True, help="Questions in flight at once.")
@click.option(
    "--papers", type=click.Path(path_type=Path, exists=True), help="Folder of papers to answer from."
)
@click.option(
    "--index", type=click.Path(path_type=Path, file_okay=False), help="Index built with `index build`."
)
@click.option("--online", is_flag=True, help="Also search Semantic Scholar and Crossref.")
@click.pass_obj
def batch_command(
    obj: Any,
    questions: Path,
    out: Path,
    concurrency: int,
    papers: Path | None,
    index: Path | None,
    online: bool,
) -> None:
    """Answer every question in a .txt (one a line) or .jsonl file; rerun to resume."""
    from agent.api import ask_many

    session = _session(obj, papers, index, online)
    answers = ask_many(
        questions, session=session, out=out, concurrency=concurrency, progress=not (obj.quiet or obj.as_json)
    )
    counts: dict[str, int] = {}
    for a in answers:
        counts[a.status.value] = counts.get(a.status.value, 0) + 1
    summary = {"answers": len(answers), "out": str(out), "status": counts}
    click.echo(json.dumps(summary) if obj.as_json else f"{len(answers)} answers → {out} ({counts})")
