"""Tasks for tests/test_timebox.py (imported by spawned worker processes)."""
import os
import time


def write_after(path: str, seconds: float) -> str:
    time.sleep(seconds)
    with open(path, "w") as f:
        f.write("done")
    return path


def fail() -> None:
    raise RuntimeError("engine died")


def die() -> None:
    os._exit(3)
