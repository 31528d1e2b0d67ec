"""Harness tests: no model needed (a fake engine stands in for zipage.LLM). The fixtures
live in harness_fixtures.py (a unique module name: tests/livecodebench has a conftest too)."""
from harness_fixtures import DATA_DIR, ROOT, config, data_dir, engine  # noqa: F401
