import json
from pathlib import Path

from click.testing import CliRunner

from agent.cli.main import cli

HASH = [
    "--set",
    "embedding.model=hash",
    "--set",
    "chunking.chunk_chars=400",
    "--set",
    "chunking.overlap_chars=50",
]


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def test_index_build_info_and_search(tmp_path: Path, papers_dir: Path) -> None:
    idx = tmp_path / "idx"
    bad = tmp_path / "broken.pdf"
    bad.write_bytes(b"%PDF-1.4 nonsense")
    code, out = run("--json", *HASH, "index", "build", str(papers_dir), str(bad), "--index", str(idx))
    assert code == 0, out
    report = json.loads(out)
    assert report["indexed"] == 4
    assert report["failed"][0]["source"] == str(bad) and "corrupt PDF" in report["failed"][0]["reason"]

    code, out = run("--json", "index", "info", str(idx))
    info = json.loads(out)
    assert info["papers"] == 4 and info["embedder"] == "hash-256" and info["size_bytes"] > 0

    code, out = run("--json", *HASH, "search", "T790M osimertinib", "--index", str(idx), "-k", "3")
    hits = json.loads(out)
    assert hits[0]["citation"].startswith("Osimertinib") and "T790M" in hits[0]["text"]
    egfr = hits[0]["doc_id"]

    code, out = run("--json", *HASH, "search", "T790M osimertinib", "--index", str(idx), "--exclude", egfr)
    assert egfr not in {h["doc_id"] for h in json.loads(out)}

    code, out = run(
        "--json", *HASH, "search", "mutation", "--index", str(idx), "--papers", "--year", "2019-2021"
    )
    assert {h["year"] for h in json.loads(out)} <= {2019, 2021}


def test_human_output_and_bad_year(tmp_path: Path, papers_dir: Path) -> None:
    idx = tmp_path / "idx"
    code, out = run("-q", *HASH, "index", "build", str(papers_dir), "--index", str(idx))
    assert code == 0 and "indexed 4 documents" in out
    code, out = run("-q", *HASH, "search", "kelch13 artemisinin", "--index", str(idx), "-k", "1")
    assert code == 0 and out.startswith(" 1. [") and "Artemisinin" in out
    code, out = run("-q", *HASH, "search", "x", "--index", str(idx), "--year", "twenty")
    assert code != 0 and "year range" in out


def test_index_build_reports_a_symlink_leading_out_of_the_folder(tmp_path: Path, papers_dir: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("Private notes that are not a paper. " * 5)
    (papers_dir / "leak.txt").symlink_to(secret)
    code, out = run("--json", *HASH, "index", "build", str(papers_dir), "--index", str(tmp_path / "idx"))
    assert code == 0, out
    report = json.loads(out)
    assert report["indexed"] == 4
    (leak,) = [f for f in report["failed"] if f["source"].endswith("leak.txt")]
    assert "outside" in leak["reason"]
