"""``scholarloop ask`` and ``scholarloop batch``: answers from the shell, with live steps."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.status import Status

from agent.cli.distributed import ray_options
from agent.cli.output import console, spinner

__all__ = ["StepDisplay", "ask_command", "batch_command"]


def _session(obj: Any, papers: Path | None, index: Path | None, online: bool) -> Any:
    from agent.api import Session

    settings = obj.settings  # before the spinner: it prints the banner
    # A first --papers run indexes the folder here, and local models load here: both take a while.
    what = f"indexing {papers}" if papers is not None else "opening the library"
    with spinner(console(silent=obj.silent), f"{what} and loading models…"):
        return Session(papers=papers, index=index, online=online, settings=settings)


class StepDisplay:
    """The agent's tool steps as they happen: a line per step, a spinner while it runs.

    Fed by the loop's ``on_event``; the spinner is stopped by the step's observation, and by
    :meth:`close` if the run ends without one (an error).
    """

    def __init__(self, out: Console) -> None:
        self.out = out
        self._status: Status | None = None

    def __call__(self, event: str, data: dict[str, Any]) -> None:
        if event == "step":
            self.close()
            # escaped: queries and observations are model text, and "[/x]" would be rich markup
            args = escape(", ".join(f"{k}={str(v)[:60]!r}" for k, v in data["arguments"].items()))
            reason = escape(str(data["reason"]))
            self.out.print(f"[bold cyan]→ {data['tool']}[/bold cyan]({args})  [dim]{reason}[/dim]")
            self._status = self.out.status(f"{data['tool']}…", spinner="dots")
            self._status.start()
        elif event == "observation":
            self.close()
            lines = data["observation"].splitlines() or [""]
            first = escape(lines[0][:150])
            self.out.print(f"  [dim]{first} ({data['seconds']:.1f}s)[/dim]", highlight=False)
            for note in (line for line in lines[1:] if line.startswith("Note: ")):
                self.out.print(f"  [yellow]{escape(note[6:])}[/yellow]", highlight=False)

    def close(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None


@click.command("ask")
@click.argument("question")
@click.option(
    "--papers", type=click.Path(path_type=Path, exists=True), help="Folder of papers to answer from."
)
@click.option(
    "--index", type=click.Path(path_type=Path, file_okay=False), help="Index built with `index build`."
)
@click.option("--online", is_flag=True, help="Also search Semantic Scholar and Crossref.")
@click.option(
    "--option",
    "options",
    multiple=True,
    metavar="TEXT",
    help="A multiple-choice option; repeat --option for each.",
)
@click.option(
    "--html",
    "html_out",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Also write the answer as a self-contained HTML page to inspect its citations.",
)
@click.pass_obj
def ask_command(
    obj: Any,
    question: str,
    papers: Path | None,
    index: Path | None,
    online: bool,
    options: tuple[str, ...],
    html_out: Path | None,
) -> None:
    """Answer QUESTION with cited, citation-checked claims."""
    import asyncio

    session = _session(obj, papers, index, online)
    err = console(silent=obj.silent)
    info = session.library.info()
    err.print(f"[dim]library {info['path']}: {info['papers']} papers, {info['chunks']} chunks[/dim]")
    steps = StepDisplay(err)
    try:
        answer = asyncio.run(session.ask(question, options=list(options) or None, on_event=steps))
    finally:
        steps.close()
    if html_out is not None:
        from corpus.store import write_atomic

        write_atomic(html_out, answer.to_html().encode("utf-8"))
        err.print(f"[dim]answer page written to {html_out}[/dim]")
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
@click.option(
    "--concurrency",
    default=1,
    show_default=True,
    help="Questions in flight at once (on each worker, with --ray).",
)
@click.option(
    "--papers", type=click.Path(path_type=Path, exists=True), help="Folder of papers to answer from."
)
@click.option(
    "--index", type=click.Path(path_type=Path, file_okay=False), help="Index built with `index build`."
)
@click.option("--online", is_flag=True, help="Also search Semantic Scholar and Crossref.")
@ray_options
@click.pass_obj
def batch_command(
    obj: Any,
    questions: Path,
    out: Path,
    concurrency: int,
    papers: Path | None,
    index: Path | None,
    online: bool,
    ray_address: str | None,
    workers: int,
) -> None:
    """Answer every question in a .txt (one a line) or .jsonl file (gzipped too); rerun to resume.

    A .jsonl line is an object with "question" and optionally "id" and "options".
    """
    from agent.api import ask_many, load_questions

    load_questions(questions)  # a malformed file fails here, before models load
    if ray_address is not None:  # each worker opens the library and loads the models itself
        if papers is not None and index is None:  # indexed here, once, not by every worker
            from agent.api import library_for_papers

            settings = obj.settings
            with spinner(console(silent=obj.silent), f"indexing {papers}…"):
                index = library_for_papers(papers, settings)
        answers = ask_many(
            questions,
            index=index,
            online=online,
            settings=obj.settings,
            out=out,
            concurrency=concurrency,
            progress=not obj.silent,
            ray=ray_address,
            workers=workers,
        )
    else:
        session = _session(obj, papers, index, online)
        answers = ask_many(
            questions, session=session, out=out, concurrency=concurrency, progress=not obj.silent
        )
    counts: dict[str, int] = {}
    for a in answers:
        counts[a.status.value] = counts.get(a.status.value, 0) + 1
    summary = {"answers": len(answers), "out": str(out), "status": counts}
    click.echo(json.dumps(summary) if obj.as_json else f"{len(answers)} answers → {out} ({counts})")
