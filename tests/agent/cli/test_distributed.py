"""``--ray [ADDRESS]`` and ``--workers`` on ``batch`` and ``bench``: how the options reach the runs.

What a Ray run does is tested on a real local instance in ``tests/agent/test_distributed.py``;
these tests stop at the call into it, so they need neither Ray nor a model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent.core.state import Answer, Status
from tests.agent.cli.conftest import HASH, invoke


@pytest.fixture
def questions(tmp_path: Path) -> Path:
    path = tmp_path / "q.txt"
    path.write_text("Which inhibitor works on T790M?\n")
    return path


@pytest.fixture
def batch_calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []

    def fake_ask_many(questions: Path, **kw: Any) -> list[Answer]:
        calls.append(kw)
        return [Answer(question="q", status=Status.answered, answer="a")]

    monkeypatch.setattr("agent.api.ask_many", fake_ask_many)
    return calls


@pytest.mark.parametrize(
    ("args", "address", "workers"),
    [
        (["--ray"], "local", 2),  # alone: a Ray instance on this machine
        (["--ray", "ray://head:10001", "--workers", "4"], "ray://head:10001", 4),
        (["--ray=auto"], "auto", 2),
    ],
)
def test_batch_passes_the_address_and_workers(
    questions: Path,
    index_dir: Path,
    tmp_path: Path,
    batch_calls: list[dict[str, Any]],
    args: list[str],
    address: str,
    workers: int,
) -> None:
    out = tmp_path / "a.jsonl"
    result = invoke(*HASH, "batch", str(questions), "-o", str(out), "--index", str(index_dir), *args)
    assert result.exit_code == 0, result.output
    [call] = batch_calls
    assert (call["ray"], call["workers"], call["index"]) == (address, workers, index_dir)
    assert "session" not in call  # each worker builds its own: no models load in the driver


def test_without_ray_the_batch_runs_here(
    questions: Path, index_dir: Path, tmp_path: Path, batch_calls: list[dict[str, Any]], scripted_models: None
) -> None:
    result = invoke(
        *HASH, "batch", str(questions), "-o", str(tmp_path / "a.jsonl"), "--index", str(index_dir)
    )
    assert result.exit_code == 0, result.output
    assert "ray" not in batch_calls[0] and batch_calls[0]["session"] is not None


def test_a_file_after_ray_is_not_taken_for_an_address(questions: Path, index_dir: Path) -> None:
    result = invoke("batch", "--ray", str(questions), "--index", str(index_dir))
    assert result.exit_code == 2
    assert "put --ray after it, or write --ray=ADDRESS" in result.stderr


def test_bench_on_ray_runs_scholarloop_only(question_set: Path, index_dir: Path, tmp_path: Path) -> None:
    result = invoke(
        "bench", str(question_set), "--index", str(index_dir), "--out", str(tmp_path / "o"), "--system",
        "paperqa", "--ray",
    )  # fmt: skip
    assert result.exit_code == 2
    assert "--ray runs the scholarloop system only" in result.stderr


def test_bench_passes_the_address_and_workers(
    question_set: Path, index_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[dict[str, Any]] = []

    async def fake_run(sets: list[Path], recipe: Any, out: Path, **kw: Any) -> dict[str, Any]:
        calls.append({"recipe": recipe, **kw})
        return {"sets": {}, "systems": {}}

    monkeypatch.setattr("agent.cli.distributed.run_bench_on_ray", fake_run)
    out = tmp_path / "o"
    result = invoke(
        "--json", *HASH, "bench", str(question_set), "--index", str(index_dir), "--out", str(out),
        "--ray", "--workers", "3",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    [call] = calls
    assert (call["address"], call["workers"]) == ("local", 3)
    assert call["recipe"].index == index_dir.resolve()
