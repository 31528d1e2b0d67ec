"""Releasing an engine, for the job and its data-parallel replicas alike."""
from __future__ import annotations

import gc
import sys


def free_engine(llm) -> None:
    """Shut the engine down and free its memory now (before another engine loads)."""
    for name in ("shutdown", "close"):
        if callable(getattr(llm, name, None)):
            getattr(llm, name)()
            break
    del llm
    gc.collect()
    if "torch" in sys.modules and sys.modules["torch"].cuda.is_available():
        sys.modules["torch"].cuda.empty_cache()
