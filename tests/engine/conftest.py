"""The engine tests' default model: `folder`, the tiny random Qwen3 saved once per module.
A module that needs another model (test_api's Llama, test_engine_properties' tokenizer)
defines its own `folder`, which takes precedence."""
import pytest

from tests.engine.tiny_models import tiny_checkpoint


@pytest.fixture(scope="module")
def folder():
    return tiny_checkpoint("qwen3")[0]
