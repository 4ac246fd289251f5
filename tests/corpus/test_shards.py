"""Sharded index builds: equal to a serial build, resumable shard by shard, and one writer at a time.

The corpus is generated: a JSONL file with duplicates, blank and broken lines, records that
compete for one citation key, plus text files with the same text or DOI as each other. The
shards are small (a few records, two files), so every test crosses many shard boundaries.
"""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from agent.core.errors import CorpusError
from agent.core.settings import Settings
from corpus import shard_worker, shards
from corpus.build import BuildReport, build_index, iter_sources
from corpus.shard_worker import ShardJob, plan_shards, temporary_name
from corpus.shards import SHARDS_DIR, build_sharded
from corpus.store import Library

REPO = Path(__file__).resolve().parents[2]
SMALL = {"shard_records": 5, "shard_files": 2, "batch_docs": 4}


def _corpus(root: Path) -> list[Path]:
    root.mkdir()
    rows: list[str] = []
    for i in range(23):
        row = {
            "doc_id": f"pubmed:{100 + i}",
            "title": f"Kinase study {i % 4}",
            "authors": ["Lo, Kyle"] if i % 3 else [],
            "year": 2020,
            "text": f"Record {i} measures kinase {i % 5} inhibition in cell line {i}. " * (1 + i % 4),
        }
        rows.append(json.dumps(row))
    rows[7] = rows[3]  # the same record twice
    rows.insert(10, "")  # a blank line
    rows.insert(12, "{not json")  # a broken line, reported with its line number
    rows.append(json.dumps({"doc_id": "pubmed:999", "text": "   "}))  # no text
    (root / "records.jsonl").write_text("\n".join(rows) + "\n")
    papers = root / "papers"
    papers.mkdir()
    for i in range(5):
        (papers / f"p{i}.txt").write_text(f"Paper {i} about EGFR T790M and osimertinib, 2019. " * (2 + i))
    (papers / "copy.txt").write_text((papers / "p1.txt").read_text())  # same text, other name
    (papers / "doi-a.txt").write_text("A study, doi:10.1000/xyz, of TP53. " * 3)
    (papers / "doi-b.txt").write_text("Another text, doi:10.1000/xyz, on p53 loss. " * 3)
    (papers / "empty.txt").write_text("")
    return [root / "records.jsonl", papers]


def _same_as_serial(sharded_root: Path, serial_root: Path, a: BuildReport, b: BuildReport) -> None:
    for name in ("papers.jsonl", "chunks.jsonl"):
        assert (sharded_root / name).read_bytes() == (serial_root / name).read_bytes(), name
    x, y = Library.open(sharded_root), Library.open(serial_root)
    np.testing.assert_allclose(x.vectors, y.vectors, atol=1e-6)
    assert x.index().ntotal == len(x.chunks)
    assert (a.indexed, a.chunks) == (b.indexed, b.chunks)
    assert sorted((i.source, i.reason) for i in a.skipped) == sorted((i.source, i.reason) for i in b.skipped)
    assert sorted((i.source, i.reason) for i in a.failed) == sorted((i.source, i.reason) for i in b.failed)
    assert not (sharded_root / SHARDS_DIR).exists()  # merged shards are removed


@pytest.fixture
def sources(tmp_path: Path) -> list[Path]:
    return list(iter_sources(_corpus(tmp_path / "in")))


@pytest.fixture
def serial(sources: list[Path], tmp_path: Path, settings: Settings) -> tuple[Path, BuildReport]:
    root = tmp_path / "serial"
    return root, build_index(sources, root, settings, batch_docs=4)


def test_the_plan_cuts_jsonl_into_line_runs_and_groups_files(
    sources: list[Path], tmp_path: Path, settings: Settings
) -> None:
    jobs = plan_shards(sources, settings, tmp_path / "s", shard_records=5, shard_files=2)
    jsonl = [j.parts[0] for j in jobs if j.parts[0].path.endswith(".jsonl")]
    assert [p.lineno for p in jsonl] == [1, 6, 11, 16, 21, 26]  # 26 physical lines in runs of 5
    assert [p.lines for p in jsonl] == [5, 5, 5, 5, 5, None]  # the last runs to the end
    assert all(len(j.parts) <= 2 for j in jobs)
    again = plan_shards(sources, settings, tmp_path / "s", shard_records=5, shard_files=2)
    assert [j.name for j in again] == [j.name for j in jobs]  # same input, same shard names
    other = settings.model_copy(
        update={"chunking": settings.chunking.model_copy(update={"chunk_chars": 500})}
    )
    assert plan_shards(sources, other, tmp_path / "s", shard_records=5)[0].name != jobs[0].name


def test_a_sharded_build_on_two_workers_equals_a_serial_build(
    sources: list[Path], serial: tuple[Path, BuildReport], tmp_path: Path, settings: Settings
) -> None:
    root = tmp_path / "sharded"
    calls: list[tuple[int, int]] = []
    report = build_sharded(
        sources, root, settings, workers=2, progress=lambda d, c: calls.append((d, c)), **SMALL
    )
    _same_as_serial(root, serial[0], report, serial[1])
    assert sum(d for d, _ in calls) == 25 + 9  # every non-blank JSONL line and every file
    assert any(i.source.endswith("records.jsonl:13") and "not JSON" in i.reason for i in report.failed)
    keys = [p.key for p in Library.open(root).papers]
    assert len(keys) == len(set(keys)) and "Lo2020b" in keys  # keys allocated in build order


def test_a_rerun_adds_only_new_documents_and_embeds_nothing_twice(
    sources: list[Path], tmp_path: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "idx"
    first = build_sharded(sources[:1], root, settings, workers=1, **SMALL)  # the JSONL records
    second = build_sharded(sources, root, settings, workers=1, **SMALL)  # and the files
    serial = build_index(sources, tmp_path / "serial", settings)
    assert first.indexed + second.indexed == serial.indexed
    for name in ("papers.jsonl", "chunks.jsonl"):
        assert (root / name).read_bytes() == (tmp_path / "serial" / name).read_bytes()
    embedded: list[int] = []
    real = shards.embed_in_batches

    def counting(embedder: object, texts: list[str], batch_size: int) -> np.ndarray:
        embedded.append(len(texts))
        return real(embedder, texts, batch_size)  # type: ignore[arg-type]

    monkeypatch.setattr(shards, "embed_in_batches", counting)
    monkeypatch.setattr(shard_worker, "embed_in_batches", counting)
    again = build_sharded(sources, root, settings, workers=1, **SMALL)
    assert again.indexed == 0 and sum(embedded) == 0  # read and chunked again, embedded never


def test_an_interrupted_build_resumes_from_its_finished_shards(
    sources: list[Path],
    serial: tuple[Path, BuildReport],
    tmp_path: Path,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = tmp_path / "sharded"
    jobs = plan_shards(sources, settings, root / SHARDS_DIR, shard_records=5, shard_files=2)
    real = shards.build_shard
    built: list[str] = []

    def crash_on_the_fourth(job: ShardJob, known: frozenset[str] = frozenset()) -> object:
        if len(built) == 3:
            raise KeyboardInterrupt
        built.append(job.name)
        return real(job, known)

    monkeypatch.setattr(shards, "build_shard", crash_on_the_fourth)
    with pytest.raises(KeyboardInterrupt):
        build_sharded(sources, root, settings, workers=1, **SMALL)
    assert Library.open(root).manifest.n_papers == 0  # nothing merged
    # a worker killed while writing shard 5 left its temporary folder; shard 6 is damaged
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    half = root / SHARDS_DIR / temporary_name(jobs[4].name, int(dead.stdout))
    half.mkdir()
    (half / "records.jsonl").write_text('{"paper": {"doc_id": "half')
    damaged = root / SHARDS_DIR / jobs[5].name
    damaged.mkdir()
    (damaged / "records.jsonl").write_text("")
    built.clear()
    monkeypatch.setattr(
        shards, "build_shard", lambda job, known=frozenset(): built.append(job.name) or real(job, known)
    )
    report = build_sharded(sources, root, settings, workers=1, **SMALL)
    assert built == [job.name for job in jobs[3:]]  # the first three were not redone
    assert not half.exists()
    _same_as_serial(root, serial[0], report, serial[1])


HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from corpus.store import write_lock

    with write_lock(Path(sys.argv[1])):
        print("held", flush=True)
        time.sleep(600)
    """
)


def test_the_merge_waits_for_another_writer_and_gives_up_after_the_timeout(
    sources: list[Path], serial: tuple[Path, BuildReport], tmp_path: Path, settings: Settings
) -> None:
    root = tmp_path / "sharded"
    build_index([], root, settings)  # the index exists, so only the merge needs the lock
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(root)], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        impatient = settings.model_copy(
            update={"retrieval": settings.retrieval.model_copy(update={"index_lock_timeout_s": 0.3})}
        )
        with pytest.raises(CorpusError, match="another process .* is writing the index"):
            build_sharded(sources, root, impatient, workers=1, **SMALL)
        finished = list((root / SHARDS_DIR).iterdir())
        assert finished and Library.open(root).manifest.n_papers == 0  # shards kept, nothing merged
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    report = build_sharded(sources, root, settings, workers=1, **SMALL)
    _same_as_serial(root, serial[0], report, serial[1])


def test_shards_run_as_ray_tasks(
    sources: list[Path],
    serial: tuple[Path, BuildReport],
    tmp_path: Path,
    settings: Settings,
) -> None:
    ray = pytest.importorskip("ray")
    import logging

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
    try:
        root = tmp_path / "sharded"
        report = build_sharded(sources, root, settings, workers=2, ray=True, **SMALL)
    finally:
        ray.shutdown()
    _same_as_serial(root, serial[0], report, serial[1])


def test_index_build_workers_from_the_command_line(sources: list[Path], tmp_path: Path) -> None:
    from click.testing import CliRunner

    from agent.cli.main import cli

    small = [
        "--set",
        "embedding.model=hash",
        "--set",
        "chunking.chunk_chars=400",
        "--set",
        "chunking.overlap_chars=50",
    ]
    args = [str(s) for s in sources]
    one = CliRunner().invoke(
        cli, ["--json", *small, "index", "build", *args, "--index", str(tmp_path / "one")]
    )
    two = CliRunner().invoke(
        cli, ["--json", *small, "index", "build", *args, "--index", str(tmp_path / "two"), "--workers", "2"]
    )
    assert one.exit_code == two.exit_code == 0, two.output
    assert json.loads(one.output)["indexed"] == json.loads(two.output)["indexed"] > 0
    for name in ("papers.jsonl", "chunks.jsonl"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()
    wrong = CliRunner().invoke(cli, ["index", "build", "--ray", args[1], "--index", str(tmp_path / "x")])
    assert wrong.exit_code == 2 and "taken as the Ray address" in wrong.output


def test_paper_overrides_reach_the_workers(sources: list[Path], tmp_path: Path, settings: Settings) -> None:
    target = next(p for p in iter_sources(sources) if p.name == "p2.txt")
    overrides = {str(target): {"doi": "10.5/override", "venue": "Online source"}}
    serial = build_index(sources, tmp_path / "serial", settings, paper_overrides=overrides)
    sharded = build_sharded(
        sources, tmp_path / "sharded", settings, workers=1, paper_overrides=overrides, **SMALL
    )
    assert serial.indexed == sharded.indexed
    papers = (tmp_path / "sharded" / "papers.jsonl").read_bytes()
    assert papers == (tmp_path / "serial" / "papers.jsonl").read_bytes() and b"10.5/override" in papers
