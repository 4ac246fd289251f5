"""Writes ``docs/cli.md`` from the ``--help`` of every command, so the reference cannot drift.

Run ``python -m agent.cli.docs`` (or ``make docs-cli``) after changing a command or an option;
``tests/agent/cli/test_docs.py`` fails while the file differs from what this renders. Help is
rendered at a fixed width, so the file does not depend on the terminal it was made in.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import click

from agent.cli.main import cli

__all__ = ["CLI_DOCS", "WIDTH", "render", "walk"]

WIDTH = 100
CLI_DOCS = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
PROG = "scholarloop"

HEADER = """\
# Command reference

The `--help` of every `scholarloop` command. This page is generated: after changing a command,
run `make docs-cli` (`python -m agent.cli.docs`) instead of editing it by hand.

Conventions every command follows:

- `--json`, `-q/--quiet` and `-v/--verbose` are accepted before and after the command
  (`scholarloop --json ask …` or `scholarloop ask … --json`); the flag after the command wins.
  `-q` and `-v` set one verbosity, and the last one given counts.
- `--json` prints only JSON on stdout; `--json` and `-q` silence the banner, progress bars and
  step lines. Progress and step lines go to stderr, results to stdout.
- An option takes one value: repeat it for several (`--corpus A --corpus B`, `--set a=1 --set b=2`).
- Errors are one line on stderr (`Error: …`), with the traceback only under `-v`.
- Exit codes: 0 done, 1 error (bad input file, missing model or key, a failed run), 2 usage
  error (unknown option, bad option value), 130 interrupted.
"""


def walk(command: click.Command, ctx: click.Context) -> Iterator[tuple[str, click.Command, click.Context]]:
    """Each command under ``command`` (itself first), depth first, in ``--help`` order."""
    yield ctx.command_path, command, ctx
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                yield from walk(sub, sub.make_context(name, [], parent=ctx, resilient_parsing=True))


def render() -> str:
    """The whole ``docs/cli.md``."""
    # make_context, not a bare Context: it applies each command's context_settings (-h as help)
    root = cli.make_context(PROG, [], resilient_parsing=True, terminal_width=WIDTH, max_content_width=WIDTH)
    parts = [HEADER]
    for path, command, ctx in walk(cli, root):
        parts.append(f"\n## `{path}`\n\n```text\n{command.get_help(ctx).rstrip()}\n```\n")
    return "".join(parts)


def main() -> None:
    CLI_DOCS.parent.mkdir(parents=True, exist_ok=True)
    CLI_DOCS.write_text(render())
    sys.stdout.write(f"wrote {CLI_DOCS}\n")


if __name__ == "__main__":
    main()
