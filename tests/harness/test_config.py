"""Bad configurations fail fast (< 5 s, no model load) with a message naming the problem."""
import os
import subprocess
import sys
import time

import pytest

from conftest import ROOT

BAD = [
    (["task=nope"], "task/nope"),                         # unknown task
    (["sampling.max_token=64"], "max_token"),             # misspelled key
    (["budgt=2048"], "budgt"),                            # misspelled top-level key
    (["sampling.n=abc"], "sampling.n"),                   # wrong type
    (["task.limit=two"], "task.limit"),
    (["budget=100"], "budget=100 must be a positive multiple of engine.block_size=256"),
    (["engine.block_size=48", "budget=96"], "power of two"),
    (["task.name=nope"], "unknown task 'nope'"),          # name not in the task registry
    (["data_dir=/nonexistent"], "data_dir=/nonexistent"),
]


@pytest.mark.parametrize("overrides,needle", BAD, ids=[" ".join(b[0]) for b in BAD])
def test_bad_config_fails_fast(tmp_path, overrides, needle):
    cmd = [sys.executable, "run.py", *overrides, f"hydra.run.dir={tmp_path}/run",
           f"results_dir={tmp_path}"]
    if not any(o.startswith("data_dir") for o in overrides):
        cmd.append("data_dir=../shared/datasets")
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60)
    elapsed = time.monotonic() - t0
    assert p.returncode != 0
    assert needle in p.stderr + p.stdout, p.stderr
    assert elapsed < 5, f"took {elapsed:.1f}s"


def test_same_command_maps_to_same_run_dir():
    from hydra import compose, initialize_config_dir
    from tasks.config import register_configs
    register_configs()
    with initialize_config_dir(config_dir=os.path.join(ROOT, "configs"), version_base=None):
        a = compose("config", overrides=["task=gsm8k", "budget=1024"], return_hydra_config=True)
        b = compose("config", overrides=["budget=1024", "task=gsm8k"], return_hydra_config=True)
        c = compose("config", overrides=["task=gsm8k", "budget=2048"], return_hydra_config=True)
    assert a.hydra.run.dir == b.hydra.run.dir != c.hydra.run.dir
    assert a.hydra.run.dir.startswith("results/gsm8k/smollm2-135m/zipage-b1024-n32-len32768-s0-")
    assert a.engine.budget == 1024 and a.sampling.temperature == 0.6


def test_data_dir_from_env_and_missing_data_source(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "ZIPAGE_DATA_DIR"}
    cmd = [sys.executable, "run.py", f"hydra.run.dir={tmp_path}/run", f"results_dir={tmp_path}"]
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 2 and "pass data_dir=" in p.stderr and time.monotonic() - t0 < 5
    env["ZIPAGE_DATA_DIR"] = "/nonexistent-env-dir"
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 2 and "data_dir=/nonexistent-env-dir" in p.stderr


def test_engine_presets_our_full_score_and_the_paper_weight():
    from hydra import compose, initialize_config_dir
    from tasks.config import register_configs
    from tasks.evaluate import engine_kwargs
    from zipage.config import EngineConfig
    register_configs()
    with initialize_config_dir(config_dir=os.path.join(ROOT, "configs"), version_base=None):
        ours = compose("config", overrides=["budget=1024"])
        paper = compose("config", overrides=["engine=zipage_paper", "budget=1024"])
    weights = {}
    for cfg in (ours, paper):
        kw = engine_kwargs(cfg.engine)
        engine = EngineConfig.from_kwargs("m", **kw)  # the engine accepts every key
        weights[cfg.engine.name] = engine.compression.redundancy_weight
        assert engine.compression.redundancy == "lightning" and engine.compression.use_pooling
    assert weights == {"zipage": 0.2, "zipage_paper": 0.8}
