from pathlib import Path

import pytest

from agent.core.errors import CorpusError
from tests.agent.cli.conftest import invoke


def test_a_scholarloop_error_is_one_line_and_exits_1(tmp_path: Path) -> None:
    result = invoke("--json", "search", "x", "--index", str(tmp_path / "none"))
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("Error: no index at ")
    assert "Traceback" not in result.stderr and "-v" not in result.stderr


def test_verbose_adds_the_traceback_before_the_line(tmp_path: Path) -> None:
    result = invoke("search", "x", "--index", str(tmp_path / "none"), "-v")
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert "Traceback (most recent call last):" in lines and "CorpusError" in result.stderr
    assert lines.index("Traceback (most recent call last):") < len(lines) - 1
    assert lines[-1].startswith("Error: no index at ")


def test_an_unexpected_exception_is_one_line_with_its_type(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom() -> list[str]:
        raise RuntimeError("boom\n  on two lines")

    monkeypatch.setattr("agent.cli.main.available_presets", boom)
    result = invoke("presets")
    assert result.exit_code == 1
    assert result.stderr == "Error: RuntimeError: boom on two lines (run with -v for the traceback)\n"
    verbose = invoke("presets", "-v")
    assert (
        verbose.exit_code == 1
        and "Traceback" in verbose.stderr
        and 'raise RuntimeError("boom' in verbose.stderr
    )
    assert verbose.stderr.splitlines()[-1] == "Error: RuntimeError: boom on two lines"


def test_a_scholarloop_error_with_several_lines_is_still_one(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> list[str]:
        raise CorpusError("first\nsecond")

    monkeypatch.setattr("agent.cli.main.available_presets", broken)
    result = invoke("presets")
    assert (result.exit_code, result.stderr) == (1, "Error: first second\n")


def test_ctrl_c_exits_130(monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted() -> list[str]:
        raise KeyboardInterrupt

    monkeypatch.setattr("agent.cli.main.available_presets", interrupted)
    result = invoke("presets")
    assert (result.exit_code, result.stderr) == (130, "aborted\n")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["ask", "q", "--no-such-flag"], "No such option"),
        (["-c", "nope", "config"], "Invalid value for '-c' / '--config': unknown preset 'nope'"),
        (["--set", "retrieval.top_k=many", "config"], "Invalid value for '--set'"),
        (["--set", "novalue", "config"], "'novalue' is not KEY=VALUE"),
        (["frobnicate"], "No such command 'frobnicate'"),
    ],
)
def test_usage_errors_exit_2(args: list[str], says: str) -> None:
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert says in result.stderr and "Traceback" not in result.stderr


def test_a_bad_environment_value_is_an_error_not_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCHOLARLOOP_RETRIEVAL__TOP_K", "many")
    result = invoke("config")
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: invalid settings") and result.stderr.count("\n") == 1
