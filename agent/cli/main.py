"""The ``scholarloop`` command line.

Every command resolves settings the same way (``--config`` preset, ``SCHOLARLOOP_*``
environment, ``--set section.field=value``) and prints the resolved role models first, so a
run's output always says which models produced it. The output flags (``--json``, ``-q``, ``-v``)
are accepted before and after the subcommand; see :mod:`agent.cli.output` for them, for how
errors are reported and for the exit codes (0 done, 1 error, 2 usage error, 130 interrupted).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from agent.cli.output import Output, ScholarloopGroup, configure_logging, get_output, output_options
from agent.core.errors import ConfigError
from agent.core.settings import Settings, available_presets, load_settings

__all__ = ["Context", "cli", "main"]

# Wide enough for paths and model names when output goes to a file or CI log.
err = Console(stderr=True, width=None if sys.stderr.isatty() else 140)
out = Console(width=None if sys.stdout.isatty() else 140)


def _parse_sets(pairs: tuple[str, ...]) -> dict[str, Any]:
    """``--set section.field=value`` pairs as nested overrides, values read as JSON when they parse.

    Nested, not flat ``section__field`` keyword arguments: a flat keyword that is None means "not
    given" to :func:`load_settings`, so ``--set evidence.unnamed_papers=null`` would be dropped.
    Inside a section's dict, null sets the field to None, as the environment variable does.
    """
    overrides: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint="--set")
        key, raw = pair.split("=", 1)
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        *sections, field = [part.strip() for part in key.split(".")]
        node = overrides
        for part in sections:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise click.BadParameter(
                    f"{key!r} sets inside {part!r}, which is a value", param_hint="--set"
                )
            node = child
        node[field] = value
    return overrides


class Context:
    """What a command gets from the group: the settings (resolved on first use) and the output mode."""

    def __init__(self, config: str | None, sets: tuple[str, ...], output: Output):
        self.config = config
        self.sets = _parse_sets(sets)
        self.output = output
        self._settings: Settings | None = None

    # The output flags may still change after this object exists (a flag after the subcommand),
    # so these read the shared Output each time.
    @property
    def as_json(self) -> bool:
        return self.output.as_json

    @property
    def quiet(self) -> bool:
        return self.output.quiet

    @property
    def verbose(self) -> bool:
        return self.output.verbose

    @property
    def silent(self) -> bool:
        return self.output.silent

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = self._load()
            if not self.silent:
                models = ", ".join(f"{r}={m}" for r, m in self._settings.role_models().items())
                err.print(f"[dim]preset {self._settings.preset}; models: {models}[/dim]", highlight=False)
        return self._settings

    def _load(self) -> Settings:
        """Resolve settings; a bad ``--config`` or ``--set`` value is a usage error (exit 2).

        On failure the layers are retried without the command line's values, to blame the
        option that broke them; a bad environment variable stays a plain error (exit 1).
        """
        try:
            return load_settings(self.config, **self.sets)
        except ConfigError as exc:
            if self.sets and _loads(self.config):
                raise click.BadParameter(str(exc), param_hint="'--set'") from exc
            if self.config and _loads(None):
                raise click.BadParameter(str(exc), param_hint="'-c' / '--config'") from exc
            raise


def _loads(config: str | None) -> bool:
    try:
        load_settings(config)
    except ConfigError:
        return False
    return True


@output_options
@click.group(cls=ScholarloopGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "-c", "--config", metavar="NAME", help=f"Preset ({', '.join(available_presets())}) or a .toml path."
)
@click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override a setting, e.g. llm.judge=local:smollm2-135m; repeat --set for each.",
)
@click.pass_context
def cli(ctx: click.Context, config: str | None, sets: tuple[str, ...]) -> None:
    """scholarloop: cited, citation-checked answers to scientific literature questions.

    --json, -q and -v work before or after the command; the one after it wins.
    """
    output = get_output(ctx)
    configure_logging(output)
    ctx.obj = Context(config, sets, output)


@cli.command()
@click.option("--no-generate", is_flag=True, help="Skip the short local generation.")
@click.pass_obj
def doctor(obj: Context, no_generate: bool) -> None:
    """Show the resolved configuration and check every installed piece."""
    from agent.cli.doctor import checks_as_json, run_doctor

    settings = obj.settings
    checks = asyncio.run(run_doctor(settings, generate=not no_generate))
    failed = [c for c in checks if c.required and not c.ok]
    if obj.as_json:
        click.echo(
            json.dumps(
                {
                    "preset": settings.preset,
                    "models": settings.role_models(),
                    "settings": settings.model_dump(mode="json"),
                    "checks": checks_as_json(checks),
                    "ok": not failed,
                },
                indent=2,
            )
        )
    else:
        table = Table(title=f"scholarloop doctor (preset {settings.preset})")
        table.add_column("check")
        table.add_column("status")
        table.add_column("detail", overflow="fold")
        for c in checks:
            status = (
                "[green]ok[/green]"
                if c.ok
                else ("[red]FAIL[/red]" if c.required else "[yellow]missing[/yellow]")
            )
            table.add_row(c.name, status, c.detail)
        out.print(table)
        out.print(f"home: {settings.home}")
        out.print(
            "[green]all required checks passed[/green]"
            if not failed
            else f"[red]{len(failed)} required check(s) failed[/red]"
        )
    sys.exit(1 if failed else 0)


@cli.command("config")
@click.pass_obj
def show_config(obj: Context) -> None:
    """Print the fully resolved settings (no secrets live in settings)."""
    click.echo(json.dumps(obj.settings.model_dump(mode="json"), indent=2))


@cli.command("presets")
@click.pass_obj
def presets(obj: Context) -> None:
    """List the presets in configs/."""
    names = available_presets()
    click.echo(json.dumps(names) if obj.as_json else "\n".join(names))


@cli.command("models")
@click.pass_obj
def models(obj: Context) -> None:
    """List the offline models this install knows."""
    from agent.llm.local_models import REGISTRY

    specs = list(REGISTRY.values())
    if obj.as_json:
        click.echo(json.dumps([{"model": f"local:{s.name}", "description": s.description} for s in specs]))
        return
    for spec in specs:
        click.echo(f"local:{spec.name}\t{spec.description}")


def _register() -> None:
    from agent.cli.ask import ask_command, batch_command
    from agent.cli.bench import bench_command
    from agent.cli.corpus import index_group, search_command
    from agent.cli.serve import serve_command

    cli.add_command(ask_command)
    cli.add_command(batch_command)
    cli.add_command(bench_command)
    cli.add_command(index_group)
    cli.add_command(search_command)
    cli.add_command(serve_command)


_register()


def main() -> None:
    cli.main(prog_name="scholarloop")


if __name__ == "__main__":
    main()
