import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from agent.cli.ask import StepDisplay
from tests.agent.cli.conftest import HASH, invoke


@pytest.fixture
def long_steps(tmp_path: Path, index_dir: Path, question_set: Path) -> dict[str, list[str]]:
    """Every command with a long step, ready to run on scripted models."""
    questions = tmp_path / "questions.txt"
    questions.write_text("Which inhibitor works on T790M?\nWhat does TP53 encode?\n")
    return {
        "index build": [
            "index",
            "build",
            str(index_dir.parent / "papers"),
            "--index",
            str(tmp_path / "built"),
        ],
        "ask": ["ask", "Which inhibitor remains active against T790M?", "--index", str(index_dir)],
        "batch": ["batch", str(questions), "--index", str(index_dir), "-o", str(tmp_path / "answers.jsonl")],
        "bench": ["bench", str(question_set), "--index", str(index_dir), "--out", str(tmp_path / "bench")],
    }


@pytest.mark.usefixtures("scripted_models")
@pytest.mark.parametrize("command", ["index build", "ask", "batch", "bench"])
@pytest.mark.parametrize("flag", ["--json", "-q"])
def test_long_steps_are_silent_with_quiet_or_json(
    long_steps: dict[str, list[str]], command: str, flag: str
) -> None:
    result = invoke(*HASH, *long_steps[command], flag)
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    if flag == "--json":
        json.loads(result.stdout)  # nothing but the JSON result on stdout
    else:
        assert len(result.stdout.strip().splitlines()) >= 1


@pytest.mark.usefixtures("scripted_models")
def test_progress_goes_to_stderr_by_default(long_steps: dict[str, list[str]]) -> None:
    built = invoke(*HASH, *long_steps["index build"])
    assert built.exit_code == 0, built.output
    assert "indexing" in built.stderr and "3/3" in built.stderr and "indexed 3 documents" in built.stdout
    bench = invoke(*HASH, *long_steps["bench"])
    assert bench.exit_code == 0, bench.output
    assert "set acc scholarloop" in bench.stderr and "1/1" in bench.stderr
    ask = invoke(*HASH, *long_steps["ask"])
    assert "→ paper_search" in ask.stderr and "→ paper_search" not in ask.stdout
    assert "References" in ask.stdout


def test_step_display_shows_a_spinner_only_while_a_step_runs() -> None:
    buffer = io.StringIO()
    steps = StepDisplay(Console(file=buffer, force_terminal=True, color_system=None, width=100))
    steps("step", {"tool": "paper_search", "arguments": {"query": "T790M"}, "reason": "start"})
    assert steps._status is not None  # the step is running
    steps(
        "observation",
        {"tool": "paper_search", "observation": "Found 2 papers\nNote: one retracted", "seconds": 1.5},
    )
    assert steps._status is None
    steps("step", {"tool": "gather_evidence", "arguments": {"q": "[/b] odd"}, "reason": "[red"})
    steps.close()  # a run that fails mid-step still stops the spinner
    assert steps._status is None
    text = buffer.getvalue()
    assert "paper_search" in text and "Found 2 papers (1.5s)" in text and "one retracted" in text
    assert "[/b] odd" in text and "[red" in text  # model text is shown, not read as markup
