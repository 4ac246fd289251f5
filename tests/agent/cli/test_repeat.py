import json
from pathlib import Path

import pytest

from tests.agent.cli.conftest import HASH, invoke


@pytest.mark.usefixtures("scripted_models")
def test_bench_indexes_every_repeated_corpus(
    tmp_path: Path, two_corpora: tuple[Path, Path], question_set: Path
) -> None:
    a, b = two_corpora
    idx, out = tmp_path / "idx", tmp_path / "out"
    result = invoke(
        *HASH,
        "bench",
        str(question_set),
        "--corpus",
        str(a),
        "--corpus",
        str(b),
        "--index",
        str(idx),
        "--out",
        str(out),
        "--json",
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["sets"]["set"]["n"] == 1
    info = json.loads(invoke("index", "info", str(idx), "--json").stdout)
    assert info["papers"] == 2


@pytest.mark.usefixtures("scripted_models")
def test_several_files_after_one_corpus_is_a_usage_error_before_indexing(
    tmp_path: Path, two_corpora: tuple[Path, Path], question_set: Path
) -> None:
    a, b = two_corpora
    idx = tmp_path / "idx"
    result = invoke(
        *HASH, "bench", str(question_set), "--corpus", str(a), str(b), "--index", str(idx), "--out", "o"
    )
    assert result.exit_code == 2, result.output
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith(f"Error: {b} is not a question set: '{b}' follows '--corpus {a}'")
    assert f"repeat --corpus for each, e.g. --corpus {a} --corpus {b}" in line
    assert line.count("repeat --corpus") == 1
    assert not idx.exists()  # the sets are checked before the (long) index build


@pytest.mark.usefixtures("scripted_models")
def test_a_set_after_a_corpus_is_still_a_set(
    tmp_path: Path, two_corpora: tuple[Path, Path], question_set: Path
) -> None:
    a, _ = two_corpora
    args = ["bench", "--corpus", str(a), str(question_set), "--index", str(tmp_path / "i")]
    result = invoke(*HASH, *args, "--out", str(tmp_path / "o"), "-q")
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        (
            ["bench", "{set}", "--system", "scholarloop", "paperqa", "--out", "o"],
            "repeat --system for each, e.g. --system scholarloop --system paperqa",
        ),
        (
            ["ask", "q", "--option", "yes", "no", "maybe"],
            "repeat --option for each, e.g. --option yes --option no",
        ),
        (["--set", "a=1", "b=2", "config"], "repeat --set for each, e.g. --set a=1 --set b=2"),
        (
            ["search", "q", "--exclude", "d1", "d2"],
            "repeat --exclude for each, e.g. --exclude d1 --exclude d2",
        ),
    ],
)
def test_every_repeatable_option_explains_the_trap(question_set: Path, args: list[str], hint: str) -> None:
    result = invoke(*(a.format(set=question_set) for a in args))
    assert result.exit_code == 2, result.output
    assert hint in result.stderr and result.stderr.count("repeat --") == 1


def test_a_legitimate_subcommand_after_set_is_not_flagged() -> None:
    result = invoke("--set", "retrieval.top_k=3", "config", "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["retrieval"]["top_k"] == 3


def test_help_says_to_repeat_the_options() -> None:
    assert "repeat --corpus for each" in " ".join(invoke("bench", "--help").stdout.split())
    assert "repeat --system" in invoke("bench", "--help").stdout
    assert "repeat --option" in invoke("ask", "--help").stdout
    assert "repeat --set" in invoke("--help").stdout
