from agent.cli.docs import CLI_DOCS, WIDTH, render
from tests.agent.cli.conftest import invoke


def test_docs_cli_md_matches_every_commands_help() -> None:
    expected = render()
    assert CLI_DOCS.exists(), "docs/cli.md is missing: run `make docs-cli` (python -m agent.cli.docs)"
    assert CLI_DOCS.read_text() == expected, (
        "docs/cli.md differs from the commands' --help: run `make docs-cli` (python -m agent.cli.docs)"
    )


def test_the_reference_covers_every_command_at_a_fixed_width() -> None:
    text = render()
    for path in ("scholarloop", "scholarloop ask", "scholarloop bench", "scholarloop index build"):
        assert f"\n## `{path}`\n" in text
    blocks = text.split("```text\n")[1:]
    help_lines = [line for block in blocks for line in block.split("```")[0].splitlines()]
    assert len(blocks) >= 10 and max(map(len, help_lines)) <= WIDTH
    # the help a user gets at the shell is the help the page shows
    assert invoke("index", "build", "--help").stdout.splitlines()[0] in text
