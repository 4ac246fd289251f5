"""The ``scholarloop`` command line.

Every command resolves settings the same way (``--config`` preset, ``SCHOLARLOOP_*``
environment, ``--set section.field=value``) and prints the resolved role models first, so a
run's output always says which models produced it. ``--json`` prints machine-readable output
only; ``--quiet`` drops the banner.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from agent.core.errors import ScholarloopError
from agent.core.settings import Settings, available_presets, load_settings

__all__ = ["main"]

# Wide enough for paths and model names when output goes to a file or CI log.
err = Console(stderr=True, width=None if sys.stderr.isatty() else 140)
out = Console(width=None if sys.stdout.isatty() else 140)


def _parse_sets(pairs: tuple[str, ...]) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint="--set")
        key, raw = pair.split("=", 1)
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        overrides[key.strip().replace(".", "__")] = value
    return overrides


class Context:
    def __init__(self, config: str | None, sets: tuple[str, ...], as_json: bool, quiet: bool):
        self.config = config
        self.sets = _parse_sets(sets)
        self.as_json = as_json
        self.quiet = quiet
        self._settings: Settings | None = None

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = load_settings(self.config, **self.sets)
            if not self.quiet and not self.as_json:
                models = ", ".join(f"{r}={m}" for r, m in self._settings.role_models().items())
                err.print(f"[dim]preset {self._settings.preset}; models: {models}[/dim]")
        return self._settings


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "-c", "--config", metavar="NAME", help=f"Preset ({', '.join(available_presets())}) or a .toml path."
)
@click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override a setting, e.g. llm.judge=local:smollm2-135m.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON only (for scripts).")
@click.option("-q", "--quiet", is_flag=True, help="No banner or progress output.")
@click.option("-v", "--verbose", is_flag=True, help="Log retries and provider details.")
@click.pass_context
def cli(
    ctx: click.Context, config: str | None, sets: tuple[str, ...], as_json: bool, quiet: bool, verbose: bool
) -> None:
    """scholarloop: cited, citation-checked answers to scientific literature questions."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    ctx.obj = Context(config, sets, as_json, quiet)


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
def presets() -> None:
    """List the presets in configs/."""
    for name in available_presets():
        click.echo(name)


@cli.command("models")
def models() -> None:
    """List the offline models this install knows."""
    from agent.llm.local_models import REGISTRY

    for spec in REGISTRY.values():
        click.echo(f"local:{spec.name}\t{spec.description}")


def _register() -> None:
    from agent.cli.ask import ask_command, batch_command
    from agent.cli.bench import bench_command
    from agent.cli.corpus import index_group, search_command

    cli.add_command(ask_command)
    cli.add_command(batch_command)
    cli.add_command(bench_command)
    cli.add_command(index_group)
    cli.add_command(search_command)


_register()


def main() -> None:
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        err.print("aborted")
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except ScholarloopError as exc:
        err.print(f"[red]error:[/red] {exc}", highlight=False)
        sys.exit(2)


if __name__ == "__main__":
    main()
