"""The docs cannot drift from the code.

* ``docs/configuration.md`` is regenerated in memory from the settings; a stale page fails.
* Every shell command in README.md, docs/*.md and benchmarks/README.md is checked: each
  ``scholarloop`` command line is parsed by the real click group with ``--help`` appended (so
  an unknown command or option fails, and nothing runs), and the few that need no model and no
  network (``--help``, ``config``, ``presets``, ``models``) are run for real. ``make`` targets
  must exist in the Makefile, ``pip install`` extras in pyproject.toml, and ``python
  script.py --option`` must name a script whose argparse declares the option.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import shlex
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import click
import pytest
from click.testing import CliRunner

from agent.cli.main import cli

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([ROOT / "README.md", ROOT / "benchmarks" / "README.md", *(ROOT / "docs").glob("*.md")])
SHELL_LANGS = {"bash", "sh", "shell", "console", ""}
CHECKED = ("scholarloop", "make", "pip", "python", "python3")
# Commands that need no model, no index and no network: these run for real.
RUNNABLE = {("config",), ("presets",), ("models",)}


# --- the configuration page -------------------------------------------------------------------


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_configuration", ROOT / "docs" / "gen_configuration.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_configuration_page_is_generated_from_the_settings() -> None:
    gen = _generator()
    page = gen.PAGE.read_text()
    assert "<!-- BEGIN GENERATED: settings -->" in page
    assert "<!-- BEGIN GENERATED: presets -->" in page
    assert gen.render(page) == page, "docs/configuration.md is stale: run python docs/gen_configuration.py"


def test_every_setting_and_preset_is_on_the_configuration_page() -> None:
    from agent.core.settings import available_presets

    gen = _generator()
    page = gen.PAGE.read_text()
    for path, _field in gen._walk(gen.Settings):
        assert f"| `{'.'.join(path)}` |" in page
    for name in available_presets():
        assert f"#### `{name}`" in page


def test_a_stale_configuration_page_is_caught() -> None:
    gen = _generator()
    page = gen.PAGE.read_text()
    stale = page.replace("| `llm.default` |", "| `llm.default_model` |")
    assert gen.render(stale) == page != stale


# --- extracting the commands ------------------------------------------------------------------


@dataclass
class Command:
    page: str
    line: int
    text: str
    env: dict[str, str] = field(default_factory=dict)
    argv: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {self.text}"


_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.DOTALL | re.MULTILINE)
_INLINE = re.compile(r"`([^`\n]+)`")
_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)


def _logical_lines(block: str, console: bool) -> Iterator[tuple[int, str]]:
    """(offset, line) of each command in a block: ``$ `` lines only in a console block."""
    lines = block.splitlines()
    i = 0
    while i < len(lines):
        start, line = i, lines[i]
        while line.endswith("\\") and i + 1 < len(lines):
            i += 1
            line = line[:-1] + " " + lines[i].strip()
        i += 1
        stripped = line.strip()
        if console:
            if stripped.startswith("$ "):
                yield start, stripped[2:]
        elif stripped and not stripped.startswith("#"):
            yield start, stripped


def _split(line: str) -> list[list[str]]:
    """Shell words of each simple command on a line (split at ``;``, ``&&``, ``||``, ``|``)."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    parts: list[list[str]] = [[]]
    for token in lexer:
        if token and set(token) <= set(";&|"):
            parts.append([])
        else:
            parts[-1].append(token)
    return [p for p in parts if p]


def _expand(words: list[str], variables: dict[str, str]) -> list[str]:
    out: list[str] = []
    for word in words:
        whole = re.fullmatch(r"\$\{?(\w+)\}?", word)
        if whole and whole.group(1) in variables:
            out += shlex.split(variables[whole.group(1)])  # unquoted: word splitting
            continue
        out.append(re.sub(r"\$\{?(\w+)\}?", lambda m: variables.get(m.group(1), m.group(0)), word))
    return out


def _commands_of(page: Path) -> Iterator[Command]:
    text = page.read_text()
    name = str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else page.name
    variables: dict[str, str] = {}

    def emit(line_no: int, line: str) -> Iterator[Command]:
        for words in _split(line):
            env: dict[str, str] = {}
            while words and (m := _ASSIGN.match(words[0])):
                env[m.group(1)] = m.group(2)
                words = words[1:]
            if not words:  # a bare assignment: remember it for $NAME later on the page
                variables.update(env)
                continue
            if words[0] == "export" and len(words) > 1 and (m := _ASSIGN.match(words[1])):
                variables[m.group(1)] = m.group(2)
                continue
            if words[0] in CHECKED:
                yield Command(name, line_no, line, env, _expand(words, variables))

    prose: list[tuple[int, str]] = []
    last = 0
    for fence in _FENCE.finditer(text):
        prose.append((last, text[last : fence.start()]))
        last = fence.end()
        lang = fence.group(1).lower()
        if lang not in SHELL_LANGS:
            continue
        first = text.count("\n", 0, fence.start(2)) + 1
        console = lang in {"console", ""}
        for offset, line in _logical_lines(fence.group(2), console):
            yield from emit(first + offset, line)
    prose.append((last, text[last:]))
    for start, chunk in prose:
        for span in _INLINE.finditer(chunk):
            code = span.group(1)
            if code.split(" ", 1)[0] in ("scholarloop", "make") and " " in code:
                yield from emit(text.count("\n", 0, start + span.start()) + 1, code)


ALL = [c for page in PAGES for c in _commands_of(page)]


def _of(program: str) -> list[Command]:
    return [c for c in ALL if c.argv[0] == program]


def test_the_pages_hold_commands_to_check() -> None:
    assert len(_of("scholarloop")) >= 30
    assert {c.page for c in _of("scholarloop")} >= {"README.md", "docs/usage.md", "benchmarks/README.md"}
    assert _of("make") and _of("python")


def test_the_extractor_reads_console_continuations_variables_and_comments(tmp_path: Path) -> None:
    page = tmp_path / "probe.md"
    page.write_text(
        "```bash\nV=--json\nscholarloop ask q \\\n  --index i/ $V  # a comment\nexport K=1\n```\n"
        "```console\n$ make test && scholarloop presets\noutput line\n```\n"
        "```python\nscholarloop = 1\n```\n"
        "Run `scholarloop doctor --no-generate` or `make`.\n"
    )
    got = [c.argv for c in _commands_of(page)]
    assert got == [
        ["scholarloop", "ask", "q", "--index", "i/", "--json"],
        ["make", "test"],
        ["scholarloop", "presets"],
        ["scholarloop", "doctor", "--no-generate"],
    ]


# --- scholarloop ------------------------------------------------------------------------------


def _invoke(argv: list[str], env: dict[str, str], home: Path) -> Any:
    runner = CliRunner()
    return runner.invoke(cli, argv, env={**env, "SCHOLARLOOP_HOME": str(home)}, catch_exceptions=False)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    import os

    for key in list(os.environ):
        if key.startswith("SCHOLARLOOP_") and key != "SCHOLARLOOP_ALLOW_MODEL_REQUESTS":
            monkeypatch.delenv(key)
    return tmp_path


@pytest.mark.parametrize("command", _of("scholarloop"), ids=str)
def test_each_documented_scholarloop_command_parses(command: Command, clean_env: Path) -> None:
    """The real click group parses the line; ``--help`` (eager) stops it before anything runs."""
    result = _invoke([*command.argv[1:], "--help"], command.env, clean_env)
    assert result.exit_code == 0, f"{command}\n{result.output}"
    assert "Usage:" in result.output


def test_an_unknown_option_or_command_fails_the_parse(clean_env: Path) -> None:
    assert _invoke(["ask", "q", "--index", "i/", "--json", "--help"], {}, clean_env).exit_code == 0
    assert _invoke(["ask", "q", "--no-such-option", "--help"], {}, clean_env).exit_code == 2
    assert _invoke(["--set", "a=1", "no-such-command", "--help"], {}, clean_env).exit_code == 2
    assert _invoke(["index", "info", "--index", "--help"], {}, clean_env).exit_code == 2


def _path(argv: list[str]) -> tuple[str, ...]:
    """The command path of a command line (``("index", "build")``), skipping the options before it."""
    command: click.Command = cli
    path: list[str] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        if word.startswith("-"):
            option = next((p for p in command.params if word.split("=", 1)[0] in p.opts), None)
            takes_value = isinstance(option, click.Option) and not option.is_flag and option.nargs != 0
            i += 2 if takes_value and "=" not in word else 1
            continue
        if isinstance(command, click.Group) and word in command.commands:
            command = command.commands[word]
            path.append(word)
            i += 1
            continue
        break
    return tuple(path)


RUNS = [c for c in _of("scholarloop") if _path(c.argv[1:]) in RUNNABLE or "--help" in c.argv]


@pytest.mark.parametrize("command", RUNS, ids=str)
def test_documented_commands_that_need_no_model_run(command: Command, clean_env: Path) -> None:
    result = _invoke(command.argv[1:], command.env, clean_env)
    assert result.exit_code == 0, f"{command}\n{result.output}"
    if _path(command.argv[1:]) == ("config",):
        # the documented precedence: what the line sets is what `config` shows
        settings = json.loads(result.stdout)
        wanted = {tuple(k[len("SCHOLARLOOP_") :].lower().split("__")): v for k, v in command.env.items()}
        args = command.argv
        wanted |= {
            tuple(a.split("=", 1)[0].split(".")): a.split("=", 1)[1]
            for a in (args[i + 1] for i, w in enumerate(args[:-1]) if w == "--set")
        }
        for path, raw in wanted.items():
            value: Any = settings
            for part in path:
                value = value[part]
            assert str(value) == raw or json.dumps(value) == raw, f"{command}: {'.'.join(path)} = {value}"


def test_the_documented_precedence_example_runs() -> None:
    assert any(_path(c.argv[1:]) == ("config",) and c.env for c in RUNS)


# --- make, pip, python ------------------------------------------------------------------------


def _make_targets() -> set[str]:
    targets: set[str] = set()
    for line in (ROOT / "Makefile").read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+(?:\s+[A-Za-z0-9_.-]+)*)\s*:(?!=)", line)
        if m and not line.startswith("\t"):
            targets.update(m.group(1).split())
    return targets


@pytest.mark.parametrize("command", _of("make"), ids=str)
def test_documented_make_targets_exist(command: Command) -> None:
    targets = [w for w in command.argv[1:] if not w.startswith("-") and "=" not in w]
    assert set(targets) <= _make_targets(), f"{command}: no such target in the Makefile"


def test_the_documented_extras_exist() -> None:
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    for command in _of("pip"):
        for word in command.argv:
            m = re.fullmatch(r"(?:-e\s*)?\.\[([\w,-]+)\]", word)
            if m:
                assert set(m.group(1).split(",")) <= extras, f"{command}: unknown extra"


def _argparse_options(script: Path) -> set[str]:
    """The options ``script`` declares, with those of the shared ``common.py`` it imports
    (benchmarks/common.py declares the covidqa-dev split options several gates take)."""
    options = {"-h", "--help"}
    sources = [script.read_text()]
    common = script.with_name("common.py")
    if "from common import" in sources[0] and common.is_file():
        sources.append(common.read_text())
    for node in (n for source in sources for n in ast.walk(ast.parse(source))):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            options |= {
                a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
            }
    return {o for o in options if o.startswith("-")}


SCRIPTS = [c for c in _of("python") + _of("python3") if len(c.argv) > 1 and c.argv[1].endswith(".py")]


@pytest.mark.parametrize("command", SCRIPTS, ids=str)
def test_documented_scripts_exist_and_take_their_options(command: Command) -> None:
    script = ROOT / command.argv[1]
    assert script.is_file(), f"{command}: no such script"
    options = {w.split("=", 1)[0] for w in command.argv[2:] if w.startswith("-")}
    if "argparse" in script.read_text():
        assert options <= _argparse_options(script), f"{command}: unknown option(s)"
