"""What every command shares: the output flags, error reporting, and progress display.

Users type ``--json``, ``-q`` and ``-v`` wherever feels natural (``scholarloop --json ask …`` or
``scholarloop ask … --json``), so the flags live on every command, not only on the group. The
values of all levels land in one :class:`Output` kept in the click context's ``meta`` (shared by
the whole command chain); click processes the group's flags first and then the subcommand's, so
a flag after the subcommand wins. ``-q`` and ``-v`` set one verbosity: the last one given counts.

:class:`ScholarloopGroup` attaches the flags to each command it is given, so a command added
later accepts them without doing anything. As the root group it also turns every failure into
one line on stderr (exit 1; ``-v`` adds the traceback) and adds a "repeat the option" hint to
usage errors caused by giving a repeatable option several values.
"""

from __future__ import annotations

import logging
import re
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from agent.core.errors import ScholarloopError

__all__ = [
    "Output",
    "ScholarloopGroup",
    "configure_logging",
    "console",
    "get_output",
    "output_options",
    "progress_bar",
    "repeat_hint",
    "spinner",
]

_OUTPUT = "scholarloop.output"
_RAW_ARGS = "scholarloop.raw_args"
QUIET, NORMAL, VERBOSE = -1, 0, 1

C = TypeVar("C", bound=click.Command)


@dataclass
class Output:
    """The output mode of one invocation, whichever level the flags were typed at."""

    as_json: bool = False
    verbosity: int = NORMAL

    @property
    def quiet(self) -> bool:
        return self.verbosity == QUIET

    @property
    def verbose(self) -> bool:
        return self.verbosity == VERBOSE

    @property
    def silent(self) -> bool:
        """No banner, progress or step lines: only the result (and errors) remain."""
        return self.quiet or self.as_json


def get_output(ctx: click.Context | None = None) -> Output:
    ctx = ctx or click.get_current_context()
    output: Output = ctx.meta.setdefault(_OUTPUT, Output())
    return output


def configure_logging(output: Output) -> None:
    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger().setLevel(logging.INFO if output.verbose else logging.WARNING)


def _set_json(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        get_output(ctx).as_json = True


def _set_verbosity(level: int) -> Callable[[click.Context, click.Parameter, bool], None]:
    def callback(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
        if value:
            output = get_output(ctx)
            output.verbosity = level
            configure_logging(output)

    return callback


OUTPUT_PARAMS = ("output_json", "output_quiet", "output_verbose")


def _output_params() -> list[click.Option]:
    return [
        click.Option(
            ["--json", "output_json"],
            is_flag=True,
            expose_value=False,
            callback=_set_json,
            help="Print JSON only (for scripts); no banner or progress.",
        ),
        click.Option(
            ["-q", "--quiet", "output_quiet"],
            is_flag=True,
            expose_value=False,
            callback=_set_verbosity(QUIET),
            help="No banner, progress or step lines.",
        ),
        click.Option(
            ["-v", "--verbose", "output_verbose"],
            is_flag=True,
            expose_value=False,
            callback=_set_verbosity(VERBOSE),
            help="Log retries and provider details; show the traceback of an error.",
        ),
    ]


def output_options(command: C) -> C:
    """Add ``--json``, ``-q/--quiet`` and ``-v/--verbose`` to a command; put it above ``@click.command``.

    Idempotent: a :class:`ScholarloopGroup` applies it to every command added to it anyway.
    """
    if not any(p.name in OUTPUT_PARAMS for p in command.params):
        command.params.extend(_output_params())
    return command


def console(*, silent: bool = False) -> Console:
    """A stderr console, so progress and step lines never mix into stdout's result or JSON."""
    return Console(stderr=True, quiet=silent, width=None if sys.stderr.isatty() else 140)


def progress_bar(*fields: ProgressColumn, silent: bool) -> Progress:
    """The one progress bar look: spinner, label, bar, done/total, extra fields, elapsed time."""
    return Progress(
        SpinnerColumn(),
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        *fields,
        TimeElapsedColumn(),
        console=console(silent=silent),
        disable=silent,
    )


@contextmanager
def spinner(out: Console, text: str) -> Iterator[None]:
    """A status line for a step whose length is unknown (loading models, a tool call)."""
    with out.status(text, spinner="dots"):
        yield


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _report(exc: BaseException, output: Output, *, expected: bool) -> None:
    if output.verbose:
        click.echo(traceback.format_exc().rstrip(), err=True)
    message = _one_line(str(exc))
    if expected:
        click.echo(f"Error: {message or type(exc).__name__}", err=True)
    else:
        detail = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
        hint = "" if output.verbose else " (run with -v for the traceback)"
        click.echo(f"Error: {detail}{hint}", err=True)


def _repeatable_options(ctx: click.Context) -> dict[str, str]:
    """Every name of a ``multiple=True`` option on the command chain -> its display name."""
    names: dict[str, str] = {}
    chain: click.Context | None = ctx
    while chain is not None:
        for param in chain.command.params:
            if isinstance(param, click.Option) and param.multiple and not param.is_flag:
                for name in param.opts:
                    names[name] = max(param.opts, key=len)
        chain = chain.parent
    return names


def _command_names(ctx: click.Context) -> set[str]:
    names: set[str] = set()
    chain: click.Context | None = ctx
    while chain is not None:
        if isinstance(chain.command, click.Group):
            names |= set(chain.command.commands)
        chain = chain.parent
    return names


def _trailing(ctx: click.Context) -> Iterator[tuple[str, str, str]]:
    """``(option, value, token)`` for each bare token right after a repeatable option's value.

    ``--corpus A B C`` gives B and C: click options take one value each, so B and C silently
    become positional arguments (or an error) instead of more corpora.
    """
    raw: list[str] = ctx.meta.get(_RAW_ARGS, [])
    options = _repeatable_options(ctx)
    commands = _command_names(ctx)
    i = 0
    while i < len(raw):
        name, eq, value = raw[i].partition("=")
        if name in options and (eq or i + 1 < len(raw)):
            if not eq:
                i += 1
                value = raw[i]
            i += 1
            while i < len(raw) and not raw[i].startswith("-") and raw[i] not in commands:
                yield options[name], value, raw[i]
                i += 1
        else:
            i += 1


def repeat_hint(ctx: click.Context, token: str) -> str | None:
    """The "repeat the option" advice when ``token`` came right after a repeatable option's value."""
    for option, value, got in _trailing(ctx):
        if got == token or Path(got) == Path(token):
            return (
                f"'{got}' follows '{option} {value}', but an option takes one value: "
                f"repeat {option} for each, e.g. {option} {value} {option} {got}"
            )
    return None


def _usage_hint(ctx: click.Context, exc: click.UsageError) -> str | None:
    where = exc.ctx or ctx
    for _option, _value, token in _trailing(where):
        if re.search(rf"(?<![\w./-]){re.escape(token)}(?![\w./-])", exc.message):
            return repeat_hint(where, token)
    return None


class ScholarloopGroup(click.Group):
    """A group whose commands all take the output flags; as the root, it reports errors.

    Errors: click's usage errors keep their format and exit 2; a :class:`ScholarloopError`
    (something the user can fix) and any unexpected exception print one ``Error: …`` line and
    exit 1, with the traceback only under ``-v``; Ctrl-C exits 130.
    """

    group_class = type  # nested groups made with @group.group() are ScholarloopGroups too

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        output_options(cmd)
        super().add_command(cmd, name)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if ctx.parent is None:
            ctx.meta[_RAW_ARGS] = list(args)
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        if ctx.parent is not None:
            return super().invoke(ctx)
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            hint = _usage_hint(ctx, exc)
            if hint and hint not in exc.message:
                raise click.UsageError(f"{exc.format_message()} ({hint})", exc.ctx) from exc
            raise
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except KeyboardInterrupt:
            click.echo("aborted", err=True)
            raise click.exceptions.Exit(130) from None
        except ScholarloopError as exc:
            _report(exc, get_output(ctx), expected=True)
            raise click.exceptions.Exit(1) from None
        except Exception as exc:
            _report(exc, get_output(ctx), expected=False)
            raise click.exceptions.Exit(1) from None
