"""Hostile input for ``scholarloop index build``: each bad file reported with its reason, the rest
indexed, no hang, memory bounded.

A folder is generated in a temporary directory: good files (PDF, Markdown, text, HTML, JSONL
records) beside hostile ones: a truncated, an encrypted, a zero-byte, an image-only PDF, an
HTML page named ``.pdf``, 20,000 pages, a page count of 2**31-1, arrays and dictionaries
nested 100,000 deep, a page tree that loops, a 200 MB inflate bomb, a memory bomb (40 pages of
70 MB streams, ~2.8 GB held if read), a 35 KB page pypdf takes minutes over, a sparse 300 MB
text file, binary data named ``.txt``, Latin-1 and UTF-16 text, a JSONL file with bad lines, a
truncated ``.jsonl.gz``, symlinks out of the folder, broken and looping, and names with
``..``, backslashes, a newline, a tab and a byte that is not UTF-8. (A NUL cannot be in a file
name; ``tests/corpus/test_hostile.py`` passes one through the Python API.)

The real CLI (``scholarloop -q --json --set embedding.model=hash index build``) indexes the
folder, with the default per-file limits unless ``--file-timeout``/``--file-memory`` are
given. A file is *handled cleanly* when its outcome is the expected one (indexed, or reported
failed with a reason that says what is wrong) and the build exits 0 without a traceback. The
build's resident memory (the CLI plus its reading worker, sampled every 0.1 s from /proc) must
stay under the memory limit plus 1 GiB. Linux only (/proc).

    python benchmarks/hostile.py [--out FILE] [--file-timeout S] [--file-memory MIB] [--keep DIR]
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common import write_report  # benchmarks/common.py: scripts run from this folder

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the PDF makers live with the tests that use them

from agent.core.settings import IndexSettings  # noqa: E402
from corpus.store import Library  # noqa: E402
from tests.corpus import hostile_pdfs as hostile  # noqa: E402
from tests.corpus.pdfs import make_pdf  # noqa: E402

TEXT = "Zebrafish regenerate their fins within two weeks of amputation, as shown in 2019. " * 5


@dataclass
class Case:
    name: str  # as the build reports it: the file name, ``name:line`` for a JSONL line
    kind: str
    expect: str  # "failed", "indexed" or "either" (indexed, or failed for a clear reason)
    reason: str = ""  # regex the failure reason (or an indexed file's warning) must match


def _write(path: Path, data: bytes | str) -> None:
    if isinstance(data, str):
        path.write_text(data)
    else:
        path.write_bytes(data)


def make_corpus(root: Path) -> tuple[Path, list[Case]]:
    """The hostile folder under ``root`` and what should become of each thing in it."""
    papers = root / "papers"
    papers.mkdir()
    cases: list[Case] = []

    def add(name: str, kind: str, expect: str, reason: str, data: bytes | str | Callable[[], bytes]) -> None:
        _write(papers / name, data() if callable(data) else data)
        cases.append(Case(name, kind, expect, reason))

    # Good files.
    add("good.pdf", "good PDF", "indexed", "", make_pdf(["Kinase signalling in fins (2019).\n" + TEXT]))
    add("good.md", "good Markdown", "indexed", "", "# Fin regeneration\n\n" + TEXT)
    add("good.txt", "good text", "indexed", "", "Axolotl limbs regrow after loss (2020). " * 6)
    add("good.html", "good HTML", "indexed", "", f"<html><title>Fins</title><p>{TEXT}</p></html>")

    # Broken or misnamed PDFs.
    pdf = make_pdf(["A PDF about kinase signalling that is cut off half way through."])
    add("truncated.pdf", "truncated PDF", "failed", r"(corrupt|unreadable) PDF", pdf[: len(pdf) // 2])
    add(
        "encrypted.pdf",
        "encrypted PDF",
        "failed",
        r"^encrypted PDF \(needs a password\)$",
        hostile.encrypted_pdf,
    )
    add("zero-byte.pdf", "zero-byte file", "failed", r"^empty file \(0 bytes\)$", b"")
    add("zero-byte.md", "zero-byte file", "failed", r"^empty file \(0 bytes\)$", b"")
    add(
        "image-only.pdf",
        "image-only PDF",
        "failed",
        r"^no extractable text \(image-only",
        hostile.image_only_pdf,
    )
    add(
        "web-page.pdf",
        "HTML named .pdf",
        "failed",
        r"^not a PDF: no %PDF- header; it is an HTML page$",
        f"<html><p>{TEXT}</p></html>",
    )

    # Structures built to exhaust a parser.
    add("pages-20000.pdf", "20,000 pages", "either", r"^took longer than", hostile.many_pages_pdf)
    add("count-2147483647.pdf", "lying page count", "indexed", "", hostile.lying_count_pdf)
    add("nested-arrays.pdf", "arrays 100,000 deep", "failed", r"nested too deeply", hostile.nested_arrays_pdf)
    add(
        "nested-dicts.pdf",
        "dictionaries 100,000 deep",
        "either",
        r"nested too deeply",
        hostile.nested_dicts_pdf,
    )
    add(
        "page-tree-loop.pdf",
        "page tree loop",
        "failed",
        r"cyclic page references",
        hostile.page_tree_loop_pdf,
    )
    add(
        "inflate-bomb.pdf",
        "inflate bomb (200 MB from 190 KB)",
        "failed",
        r"^no extractable text .*LimitReachedError",
        lambda: hostile.flate_bomb_pdf(200),
    )
    add(
        "memory-bomb.pdf",
        "memory bomb (40 x 70 MB streams)",
        "failed",
        r"memory limit",
        hostile.memory_bomb_pdf,
    )
    add("slow-text.pdf", "quadratic text extraction", "failed", r"^took longer than", hostile.slow_text_pdf)
    add(
        "nested.html",
        "HTML nested 100,000 deep",
        "either",
        "",
        "<div>" * 100_000 + TEXT + " nested" + "</div>" * 100_000,
    )

    # Text that is not what it seems.
    with (papers / "huge.txt").open("wb") as fh:  # sparse: 300 MB on paper, nothing on disk
        fh.truncate(300 * 1024 * 1024)
    cases.append(Case("huge.txt", "300 MB file (sparse)", "failed", r"^file too large"))
    add("binary.txt", "binary data named .txt", "failed", r"^binary data", bytes(range(256)) * 16)
    add(
        "latin1.txt",
        "non-UTF-8 text",
        "indexed",
        r"not UTF-8",
        ("Café naïve T cells, 2017. " * 8).encode("latin-1"),
    )
    add("utf16.txt", "UTF-16 text", "indexed", "", ("Zebrafish fins regrow, 2016. " * 8).encode("utf-16"))

    # JSONL: one record a line; each bad line reported with its number.
    lines = [
        json.dumps({"doc_id": "r:1", "text": "Hydra never age, per a 2015 study about cells."}),
        "this line is not JSON",
        json.dumps({"doc_id": "r:3", "title": "No text field"}),
        json.dumps({"doc_id": "r:4", "text": "Authors given as a number.", "authors": 5}),
        "[1, 2, 3]",
        '{"doc_id": "r:6", "text": "A lone surrogate \\ud800 in a record on kinases (2019)."}',
        '{"doc_id": "r:7", "text": "cut off in the mid',
    ]
    (papers / "records.jsonl").write_text("\n".join(lines))
    cases += [
        Case("records.jsonl:1", "good JSONL line", "indexed"),
        Case("records.jsonl:2", "JSONL line not JSON", "failed", r"^not JSON"),
        Case("records.jsonl:3", "JSONL line without text", "failed", r"^no 'text' field$"),
        Case("records.jsonl:4", "JSONL field of the wrong type", "failed", r"^bad record: TypeError"),
        Case("records.jsonl:5", "JSONL line not an object", "failed", r"^no 'text' field$"),
        Case("records.jsonl:6", "JSONL lone surrogate", "indexed"),
        Case("records.jsonl:7", "JSONL truncated last line", "failed", r"^not JSON"),
    ]
    gz = gzip.compress(("\n".join(lines[:1]) + "\n").encode() * 200)
    add("cut.jsonl.gz", "truncated gzip", "failed", r"^unreadable corpus file", gz[: len(gz) // 2])

    # Links and names.
    secret = root / "private" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("PRIVATE KEY MATERIAL that must never be indexed from a papers folder. " * 3)
    os.symlink(secret, papers / "leak.txt")
    os.symlink(root / "nowhere.md", papers / "gone.md")
    os.symlink("loop.md", papers / "loop.md")
    cases += [
        Case("leak.txt", "symlink out of the folder", "failed", r"outside the scanned folder"),
        Case("gone.md", "broken symlink", "failed", r"^broken symlink"),
        Case("loop.md", "symlink loop", "failed", r"^symlink loop$"),
    ]
    for name, kind in [
        ("new\nline.md", "newline in the name"),
        ("tab\tname.txt", "tab in the name"),
        ("dots..in..name.md", "'..' in the name"),
        ("x..\\..\\windows-escape.md", "'..' and backslashes in the name"),
    ]:
        add(name, kind, "indexed", "", f"# {kind.capitalize()}\n\n{TEXT} {kind}")
    latin1_name = os.fsdecode(os.fsencode(papers) + b"/caf\xe9.md")
    Path(latin1_name).write_text("# Cafe study\n\n" + TEXT + " cafe")
    cases.append(Case("caf\\xe9.md", "name not UTF-8", "indexed", r"file name is not UTF-8"))
    return papers, cases


def _descendants(pid: int) -> list[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = [pid], [pid]
    while frontier:
        frontier = [c for c, p in parents.items() if p in frontier]
        found += frontier
    return found


def _rss_mib(pid: int) -> float:
    try:
        pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0.0
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


class PeakMemory(threading.Thread):
    """Samples the resident memory of a process and its descendants until it exits."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.total = 0.0
        self.largest = 0.0
        self.running = True

    def run(self) -> None:
        while self.running:
            sizes = [_rss_mib(p) for p in _descendants(self.pid)]
            self.total = max(self.total, sum(sizes))
            self.largest = max(self.largest, *sizes, 0.0)
            time.sleep(0.1)


def scholarloop() -> list[str]:
    exe = Path(sys.executable).with_name("scholarloop")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "agent.cli.main"]


def judge(
    case: Case,
    failed: dict[str, str],
    skipped: dict[str, str],
    warnings: dict[str, list[str]],
    indexed: set[str],
) -> dict[str, Any]:
    """The outcome of one case and whether it is the expected one ("skipped": a duplicate)."""
    reason = failed.get(case.name) or skipped.get(case.name)
    outcome = (
        "failed"
        if case.name in failed
        else "skipped"
        if case.name in skipped
        else "indexed"
        if case.name in indexed
        else "missing"
    )
    ok = outcome == case.expect or (case.expect == "either" and outcome != "missing")
    if ok and outcome == "failed" and case.reason:
        ok = re.search(case.reason, reason or "") is not None
    if ok and case.expect == "indexed" and case.reason:  # an indexed file that must carry a warning
        ok = any(re.search(case.reason, w) for w in warnings.get(case.name, []))
    row: dict[str, Any] = {"file": case.name, "kind": case.kind, "expected": case.expect, "outcome": outcome}
    if reason is not None:
        row["reason"] = reason
    if warnings.get(case.name):
        row["warnings"] = warnings[case.name]
    row["ok"] = ok
    return row


def _short(source: str, papers: Path) -> str:
    """A reported source as the case names it: the path below the folder, ``:N`` kept."""
    prefix = str(papers) + os.sep
    return source[len(prefix) :] if source.startswith(prefix) else Path(source).name


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    papers, cases = make_corpus(work)
    defaults = IndexSettings()
    timeout_s = args.file_timeout or defaults.file_timeout_s
    memory_mb = args.file_memory or defaults.file_memory_mb
    cmd = [*scholarloop(), "-q", "--json", "--set", "embedding.model=hash"]
    if args.file_timeout:
        cmd += ["--set", f"index.file_timeout_s={args.file_timeout}"]
    if args.file_memory:
        cmd += ["--set", f"index.file_memory_mb={args.file_memory}"]
    cmd += ["index", "build", str(papers), "--index", str(work / "idx")]
    n_pdfs = sum(1 for c in cases if c.name.endswith(".pdf"))
    deadline = n_pdfs * (timeout_s or 600) + 300  # past this the build hangs
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    started = time.perf_counter()
    with (work / "stdout").open("wb") as out, (work / "stderr").open("wb") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
        peak = PeakMemory(proc.pid)
        peak.start()
        try:
            code = proc.wait(deadline)
            hung = False
        except subprocess.TimeoutExpired:
            proc.kill()
            code, hung = proc.wait(), True
        peak.running = False
        peak.join()
    seconds = time.perf_counter() - started
    stderr = (work / "stderr").read_text(errors="replace")
    report = json.loads((work / "stdout").read_text()) if code == 0 else {}
    failed = {_short(i["source"], papers): i["reason"] for i in report.get("failed", [])}
    skipped = {_short(i["source"].split(" [")[0], papers): i["reason"] for i in report.get("skipped", [])}
    warnings: dict[str, list[str]] = {}
    for w in report.get("warnings", []):
        warnings.setdefault(_short(w["source"], papers), []).append(w["reason"])
    indexed: set[str] = set()
    if code == 0:
        for paper in Library.open(work / "idx").papers:
            name = _short(paper.source, papers)
            indexed.add(
                f"records.jsonl:{paper.doc_id.split(':')[1]}" if paper.doc_id.startswith("r:") else name
            )
    rows = [judge(c, failed, skipped, warnings, indexed) for c in cases]
    good = [r for r in rows if r["kind"].startswith("good")]
    bad = [r for r in rows if not r["kind"].startswith("good")]
    unexpected = sorted(set(failed) - {c.name for c in cases})
    bound = (memory_mb or 0) + 1024
    return {
        "date": dt.date.today().isoformat(),
        "command": " ".join(cmd[len(scholarloop()) :]),
        "limits": {"file_timeout_s": timeout_s, "file_memory_mb": memory_mb},
        "exit_code": code,
        "hung": hung,
        "traceback": "Traceback" in stderr,
        "seconds": round(seconds, 1),
        "peak_rss_mib": {"build_and_children": round(peak.total), "largest_process": round(peak.largest)},
        "memory_bound_mib": bound,
        "memory_bounded": bool(memory_mb) and peak.total <= bound,
        "files_tried": len(rows),
        "handled_cleanly": sum(r["ok"] for r in rows),
        "hostile_tried": len(bad),
        "hostile_handled_cleanly": sum(r["ok"] for r in bad),
        "good_tried": len(good),
        "good_indexed": sum(r["ok"] for r in good),
        "unexpected_failures": unexpected,
        "private_file_indexed": any("PRIVATE KEY" in c.text for c in Library.open(work / "idx").chunks)
        if code == 0
        else None,
        "build": {k: report.get(k) for k in ("indexed", "chunks", "seconds")} if report else {},
        "cases": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="Write the JSON report here too.")
    parser.add_argument("--file-timeout", type=float, help="index.file_timeout_s (default: the setting's).")
    parser.add_argument("--file-memory", type=int, help="index.file_memory_mb (default: the setting's).")
    parser.add_argument("--keep", type=Path, help="Build in this folder (emptied first) and keep it.")
    args = parser.parse_args()
    if args.keep:
        shutil.rmtree(args.keep, ignore_errors=True)
        args.keep.mkdir(parents=True)
        result = run(args, args.keep.resolve())
    else:
        with tempfile.TemporaryDirectory(prefix="hostile-") as tmp:
            result = run(args, Path(tmp))
    write_report(result, args.out)
    clean = (
        result["handled_cleanly"] == result["files_tried"]
        and result["exit_code"] == 0
        and not result["hung"]
        and not result["traceback"]
        and result["memory_bounded"]
        and not result["unexpected_failures"]
        and not result["private_file_indexed"]
    )
    print(
        f"{result['handled_cleanly']}/{result['files_tried']} handled cleanly "
        f"({result['hostile_handled_cleanly']}/{result['hostile_tried']} hostile), "
        f"{result['seconds']} s, peak {result['peak_rss_mib']['build_and_children']} MiB",
        file=sys.stderr,
    )
    sys.exit(0 if clean else 1)


if __name__ == "__main__":
    main()
