"""Shared harness test fixtures and helpers (re-exported by conftest.py)."""
import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:  # run.py and tasks/ live at the repo root
    sys.path.insert(0, ROOT)
DATA_DIR = os.environ.get("ZIPAGE_DATA_DIR", os.path.join(os.path.dirname(ROOT), "shared", "datasets"))
# As in .ci/run: a config without data_dir reads it here, never the hub (tests/harness/test_hub.py
# clears it where the hub path is under test).
os.environ.setdefault("ZIPAGE_DATA_DIR", DATA_DIR)

import fake_engine  # noqa: E402
from tasks import evaluate as runner  # noqa: E402
from tasks import generate  # noqa: E402


def write_problems(path, ks=(1, 2, 3, 4, 99), extra=()):
    """amc23-style rows p<k>; problem q99 makes the fake engine return an error."""
    with open(path, "w") as f:
        for k in ks:
            row = {"id": f"p{k}", "problem": f"q{k}: twice {k}?", "answer": str(2 * k)}
            f.write(json.dumps(row) + "\n")
        for line in extra:
            f.write(line + "\n")


@pytest.fixture
def data_dir(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    write_problems(d / "amc23.jsonl")
    return str(d)


class EngineKnobs:
    """What the next engine(s) built by the harness will do (see fake_engine.FakeLLM)."""

    def __init__(self):
        self.clock = fake_engine.FakeClock()
        self.crash_after = self.interrupt_at_step = self.on_step = self.tokenizer = None
        self.report_interrupted = True


@pytest.fixture
def engine(monkeypatch):
    """Patch the engine factory and the segment clock; set knobs on the returned object
    (`crash_after`, `interrupt_at_step` apply to the next engine only)."""
    knobs = EngineKnobs()
    fake_engine.FakeLLM.instances = []

    def make(model_id, kwargs):
        llm = fake_engine.FakeLLM(model_id, clock=knobs.clock, crash_after=knobs.crash_after,
                                  interrupt_at_step=knobs.interrupt_at_step,
                                  report_interrupted=knobs.report_interrupted,
                                  on_step=knobs.on_step, tokenizer=knobs.tokenizer, **kwargs)
        knobs.crash_after = knobs.interrupt_at_step = None
        return llm, fake_engine.FakeSamplingParams
    monkeypatch.setattr(runner, "make_engine", make)
    monkeypatch.setattr(generate, "clock", knobs.clock, raising=False)  # raising: old code
    return knobs


def config(tmp_path, data_dir, *overrides):
    from hydra import compose, initialize_config_dir
    from tasks.config import register_configs
    register_configs()
    with initialize_config_dir(config_dir=os.path.join(ROOT, "configs"), version_base=None):
        return compose("config", overrides=[
            f"data_dir={data_dir}", f"results_dir={tmp_path}/results", "engine.device=cpu",
            "cpu.enabled=false", "sampling.n=3", "sampling.max_tokens=64", "use_tqdm=false",
            "scoring.workers=2", *overrides])


def read_rows(run_dir, name="samples.jsonl"):
    with open(os.path.join(run_dir, name)) as f:
        return {(r["problem_id"], r["sample_index"]): r for r in map(json.loads, f)}
