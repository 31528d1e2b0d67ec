"""LiveCodeBench + sandbox tests (CPU only). Hostile programs are bounded: <= 300 forks,
<= 12 GB of allocation attempts, <= 2 GB of output attempts, timeouts of a few seconds."""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:  # tasks/ lives at the repo root
    sys.path.insert(0, ROOT)

DATA_DIR = os.environ.get("ZIPAGE_DATA_DIR",
                          os.path.join(os.path.dirname(ROOT), "shared", "datasets"))
LCB_FILE = os.path.join(DATA_DIR, "livecodebench", "livecodebench.jsonl")


@pytest.fixture(scope="session")
def data_dir():
    if not os.path.isfile(LCB_FILE):
        pytest.skip(f"local LiveCodeBench copy not found at {LCB_FILE}")
    return DATA_DIR


@pytest.fixture(scope="session")
def isolation():
    """What this machine gives the sandbox (network/pid namespaces, uid drop, ro fs)."""
    from tasks.sandbox import probe
    return probe()
