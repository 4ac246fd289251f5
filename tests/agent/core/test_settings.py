from pathlib import Path

import pytest

from agent.core.errors import ConfigError
from agent.core.settings import Settings, available_presets, configs_dir, load_settings
from tests.conftest import REPO

PRESETS = sorted(p.stem for p in (REPO / "configs").glob("*.toml"))


def test_every_config_file_is_a_preset() -> None:
    assert available_presets() == PRESETS
    assert {"default", "local", "anthropic", "fast", "high_quality", "litqa2"} <= set(PRESETS)


@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_loads_and_validates(preset: str) -> None:
    settings = load_settings(preset, environ={})
    assert isinstance(settings, Settings)
    assert settings.preset == preset


@pytest.mark.parametrize("preset", [p for p in PRESETS if p != "default"])
def test_presets_are_partial_overrides_that_change_something(preset: str) -> None:
    assert load_settings(preset, environ={}) != load_settings("default", environ={}).model_copy(
        update={"preset": preset}
    )


def test_default_is_offline_and_never_a_paid_provider() -> None:
    settings = load_settings(environ={})
    assert set(settings.role_models().values()) == {"local:qwen2.5-coder-1.5b"}
    assert settings.online.enabled is False


def test_every_field_has_a_description() -> None:
    def walk(model: type) -> None:
        for name, field in model.model_fields.items():  # type: ignore[attr-defined]
            annotation = field.annotation
            if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
                walk(annotation)
            else:
                assert field.description, f"{model.__name__}.{name} has no description"

    walk(Settings)


def test_precedence_defaults_preset_env_kwargs() -> None:
    assert load_settings(environ={}).retrieval.top_k == 10  # default
    assert load_settings("fast", environ={}).retrieval.top_k == 6  # preset beats default
    env = {"SCHOLARLOOP_RETRIEVAL__TOP_K": "7"}
    assert load_settings("fast", environ=env).retrieval.top_k == 7  # env beats preset
    assert load_settings("fast", environ=env, retrieval__top_k=9).retrieval.top_k == 9  # kwargs win
    nested = load_settings("fast", environ=env, retrieval={"top_k": 11})
    assert nested.retrieval.top_k == 11
    assert nested.retrieval.hybrid_weight == 0.5  # a nested override keeps sibling fields


def test_env_selects_preset_and_sets_role_model() -> None:
    env = {"SCHOLARLOOP_CONFIG": "high_quality", "SCHOLARLOOP_LLM__JUDGE": "local:smollm2-135m"}
    settings = load_settings(environ=env)
    assert settings.preset == "high_quality"
    assert settings.evidence.min_papers == 2
    assert settings.role_models()["judge"] == "local:smollm2-135m"
    assert settings.role_models()["answer"] == "local:qwen2.5-coder-1.5b"


def test_env_values_are_parsed_as_json_when_possible() -> None:
    env = {"SCHOLARLOOP_ONLINE__ENABLED": "true", "SCHOLARLOOP_EVIDENCE__JUDGE_THRESHOLD": "0.7"}
    settings = load_settings(environ=env)
    assert settings.online.enabled is True
    assert settings.evidence.judge_threshold == 0.7


def test_unknown_preset_names_the_choices() -> None:
    with pytest.raises(ConfigError, match="unknown preset 'nope'.*default"):
        load_settings("nope", environ={})


def test_bad_value_names_the_field() -> None:
    with pytest.raises(ConfigError, match=r"retrieval\.top_k"):
        load_settings(environ={}, retrieval__top_k=0)


def test_typo_in_a_setting_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"llm\.defualt"):
        load_settings(environ={"SCHOLARLOOP_LLM__DEFUALT": "x"})


def test_preset_may_be_a_path(tmp_path: Path) -> None:
    custom = tmp_path / "mine.toml"
    custom.write_text('[llm]\njudge = "local:smollm2-135m"\n')
    settings = load_settings(str(custom), environ={})
    assert settings.preset == "mine"
    assert settings.llm.judge == "local:smollm2-135m"


def test_broken_toml_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[llm\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(str(bad), environ={})


def test_home_from_environment(tmp_path: Path) -> None:
    settings = load_settings(environ={"SCHOLARLOOP_HOME": str(tmp_path)})
    assert settings.home == tmp_path
    assert settings.models_dir == tmp_path / "models"


def test_configs_dir_is_the_repo_folder() -> None:
    assert configs_dir() == REPO / "configs"
