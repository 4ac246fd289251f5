"""Regenerate the generated parts of ``docs/configuration.md`` from the settings themselves.

    python docs/gen_configuration.py          # rewrite the page in place
    python docs/gen_configuration.py --check  # exit 1 if the page is stale

The settings table comes from the pydantic ``Field`` descriptions in
``agent/core/settings.py``, and the preset list from ``configs/*.toml`` (each file's leading
comment and the fields it overrides), so neither can drift from the code. Everything outside the
``<!-- BEGIN GENERATED: name -->`` / ``<!-- END GENERATED: name -->`` markers is written by hand
and left alone. ``tests/test_docs.py`` regenerates the page in memory and fails if it differs.
"""

from __future__ import annotations

import re
import sys
import tomllib
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "configuration.md"
if str(ROOT) not in sys.path:  # run as a script from anywhere, without an install
    sys.path.insert(0, str(ROOT))

from agent.core.settings import ENV_PREFIX, Settings, configs_dir  # noqa: E402

# Fields whose value does not come from the usual SCHOLARLOOP_SECTION__FIELD variable.
SPECIAL_ENV = {"home": "SCHOLARLOOP_HOME", "preset": "SCHOLARLOOP_CONFIG"}
SPECIAL_DEFAULT = {"home": "`~/.cache/scholarloop`", "preset": '`"default"`'}


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return " \\| ".join(f'`"{v}"`' for v in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(_type_name(a) for a in typing.get_args(annotation))
    if annotation is type(None):
        return "none"
    if isinstance(annotation, type):
        return "path" if issubclass(annotation, Path) else annotation.__name__
    return str(annotation)


def _value(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return f'`"{value}"`'
    if isinstance(value, int) and value >= 10_000:
        return f"`{value:,}`"
    return f"`{value}`"


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _walk(
    model: type[BaseModel], prefix: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], FieldInfo]]:
    """Every leaf setting as (path, field), sections in declaration order, depth first."""
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from _walk(annotation, (*prefix, name))
        else:
            yield (*prefix, name), field


def _lookup(data: dict[str, Any], path: tuple[str, ...]) -> Any:
    for part in path:
        if not isinstance(data, dict) or part not in data:
            return PydanticUndefined
        data = data[part]
    return data


def _preset(name: str) -> dict[str, Any]:
    with (configs_dir() / f"{name}.toml").open("rb") as fh:
        return tomllib.load(fh)


def settings_tables() -> str:
    """One table per section: setting, type, code default, the default preset's value, variable."""
    default_preset = _preset("default")
    sections: dict[str, list[str]] = {}
    for path, field in _walk(Settings):
        dotted = ".".join(path)
        section = ".".join(path[:-1]) or "top level"
        if field.default_factory is not None:
            default = SPECIAL_DEFAULT.get(dotted, "computed")
        else:
            default = SPECIAL_DEFAULT.get(dotted, _value(field.default))
        preset = _lookup(default_preset, path)
        env = SPECIAL_ENV.get(dotted, ENV_PREFIX + "__".join(path).upper())
        row = (
            f"| `{dotted}` | {_type_name(field.annotation)} | {default} | "
            f"{'' if preset is PydanticUndefined else _value(preset)} | `{env}` | "
            f"{_cell(field.description or '')} |"
        )
        sections.setdefault(section, []).append(row)
    out: list[str] = []
    for section, rows in sections.items():
        out += [
            f"### {section}",
            "",
            "| setting | type | code default | `default` preset | environment variable | description |",
            "|---|---|---|---|---|---|",
            *rows,
            "",
        ]
    return "\n".join(out).rstrip() + "\n"


def _leading_comment(path: Path) -> str:
    lines = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("#").strip())
    return " ".join(lines)


def _overrides(data: dict[str, Any], prefix: str = "") -> list[str]:
    out: list[str] = []
    for key, value in data.items():
        if isinstance(value, dict):
            out += _overrides(value, f"{prefix}{key}.")
        else:
            out.append(f"`{prefix}{key} = {_toml(value)}`")
    return out


def presets_list() -> str:
    """Each preset in ``configs/``: its own description and the settings it sets."""
    out = []
    for path in sorted(configs_dir().glob("*.toml")):
        with path.open("rb") as fh:
            data = tomllib.load(fh)
        out += [
            f"#### `{path.stem}`",
            "",
            _leading_comment(path),
            "",
            "Sets " + ", ".join(_overrides(data)) + ".",
            "",
        ]
    return "\n".join(out).rstrip() + "\n"


GENERATORS = {"settings": settings_tables, "presets": presets_list}
_REGION = re.compile(
    r"(<!-- BEGIN GENERATED: (?P<name>\w+) -->\n).*?(<!-- END GENERATED: (?P=name) -->)", re.DOTALL
)


def render(page: str) -> str:
    """``page`` with every generated region replaced by a fresh rendering."""

    def fill(match: re.Match[str]) -> str:
        name = match.group("name")
        if name not in GENERATORS:
            raise KeyError(f"no generator for region {name!r} in {PAGE}")
        return f"{match.group(1)}\n{GENERATORS[name]()}\n{match.group(3)}"

    return _REGION.sub(fill, page)


def main(argv: list[str]) -> int:
    current = PAGE.read_text()
    fresh = render(current)
    if "--check" in argv:
        if fresh != current:
            print(f"{PAGE.relative_to(ROOT)} is stale: run python docs/gen_configuration.py", file=sys.stderr)
            return 1
        return 0
    if fresh != current:
        PAGE.write_text(fresh)
        print(f"rewrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
