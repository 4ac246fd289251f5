import pytest

from agent.core.settings import Settings, load_settings


@pytest.fixture
def settings() -> Settings:
    return load_settings(
        environ={}, embedding__model="hash", chunking__chunk_chars=400, chunking__overlap_chars=50
    )
