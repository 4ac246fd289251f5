import json
from pathlib import Path

import click
import pytest

from agent.cli.docs import walk
from agent.cli.main import cli
from tests.agent.cli.conftest import HASH, invoke

FLAGS = {"--json", "-q", "--quiet", "-v", "--verbose"}


def test_every_command_and_group_takes_the_output_flags() -> None:
    root = cli.make_context("scholarloop", [], resilient_parsing=True)
    seen = []
    for path, command, _ctx in walk(cli, root):
        opts = {o for p in command.params if isinstance(p, click.Option) for o in p.opts}
        assert opts >= FLAGS, f"{path} lacks {sorted(FLAGS - opts)}"
        seen.append(path)
    assert {"scholarloop ask", "scholarloop bench", "scholarloop index build"} <= set(seen)


def test_a_command_added_later_gets_the_flags_too() -> None:
    @click.command("later")
    def later() -> None:
        click.echo("ran")

    group = type(cli)("g")
    group.add_command(later)
    assert {o for p in later.params for o in getattr(p, "opts", [])} >= FLAGS


@pytest.mark.parametrize(
    "args",
    [
        ["--json", "index", "info", "{idx}"],
        ["index", "info", "{idx}", "--json"],
        ["index", "--json", "info", "{idx}"],
        ["-q", "index", "info", "{idx}", "--json"],
    ],
)
def test_json_works_before_and_after_the_subcommand(index_dir: Path, args: list[str]) -> None:
    result = invoke(*(a.format(idx=index_dir) for a in args))
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["papers"] == 3
    assert result.stderr == ""


@pytest.mark.usefixtures("scripted_models")
def test_ask_takes_json_after_the_question(index_dir: Path) -> None:
    result = invoke(
        *HASH, "ask", "Which inhibitor remains active against T790M?", "--index", str(index_dir), "--json"
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["status"] == "answered"
    assert result.stderr == ""  # no banner, library line or steps


def test_quiet_after_the_subcommand_drops_the_banner() -> None:
    loud = invoke("config")
    assert "preset default; models:" in loud.stderr
    for args in (["config", "-q"], ["-q", "config"], ["config", "--quiet"]):
        result = invoke(*args)
        assert result.exit_code == 0 and result.stderr == "", args


@pytest.mark.parametrize(
    ("args", "traceback"),
    [
        (["-q", "search", "x", "--index", "{missing}", "-v"], True),
        (["-v", "search", "x", "--index", "{missing}", "-q"], False),
        (["search", "x", "-q", "--index", "{missing}", "--verbose"], True),
        (["search", "x", "-v", "--index", "{missing}", "-q"], False),
    ],
)
def test_the_verbosity_typed_last_wins(tmp_path: Path, args: list[str], traceback: bool) -> None:
    result = invoke(*(a.format(missing=tmp_path / "none") for a in args))
    assert result.exit_code == 1
    assert ("Traceback" in result.stderr) is traceback
    assert result.stderr.splitlines()[-1].startswith("Error: no index at")


def test_listing_commands_print_json_under_json() -> None:
    assert "default" in json.loads(invoke("presets", "--json").stdout)
    models = json.loads(invoke("--json", "models").stdout)
    assert {"model", "description"} <= set(models[0]) and models[0]["model"].startswith("local:")
