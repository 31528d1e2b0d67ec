import pytest

from tests.engine.tiny_models import tiny_checkpoint


@pytest.fixture(scope="session")
def tiny_folder():
    """One tiny random Qwen3 checkpoint for the simulator tests."""
    return tiny_checkpoint("qwen3")[0]
