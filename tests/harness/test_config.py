"""Bad configurations fail fast (< 5 s, no model load) with a message naming the problem."""
import json
import os
import subprocess
import sys
import time

import pytest

from harness_fixtures import DATA_DIR, ROOT, config

BAD = [
    (["task=nope"], "unknown task 'nope'"),               # unknown task
    (["sampling.max_token=64"], "max_token"),             # misspelled key
    (["budgt=2048"], "budgt"),                            # misspelled top-level key
    (["sampling.n=abc"], "sampling.n"),                   # wrong type
    (["task.limit=two"], "task.limit"),
    (["budget=100", "engine.device=cuda"],
     "budget=100 must be a positive multiple of engine.block_size=256"),
    (["engine.block_size=48", "budget=96"], "power of two"),
    (["task.name=nope"], "unknown task 'nope'"),          # name not in the task registry
    (["data_dir=/nonexistent"], "data_dir=/nonexistent"),
    # `+` used to let a typo through (issue 11, item 5); every one names the close match
    (["+budgte=1024"], "unknown key 'budgte' (did you mean 'budget'?)"),
    (["budgte=1024"], "unknown key 'budgte' (did you mean 'budget'?)"),
    (["+sampling.temprature=0.5"],
     "unknown key 'sampling.temprature' (did you mean 'sampling.temperature'?)"),
    (["+task.options.instrction=Answer."],
     "unknown option task.options.instrction for task amc23 (did you mean 'instruction'?)"),
    (["+task.options.thinking=maybe"], "task.options.thinking"),
    (["baseline.retime=true", "engine=fullkv"], "baseline.retime=true needs a budget run"),
    (["scoring.timeout_s=0"], "scoring.timeout_s=0"),      # the grader made it 1 s silently
    (["scoring.timeout_s=0.5"], "whole number of seconds"),  # signal.alarm counts whole seconds
    (["scoring.timeout_s=2.5"], "scoring.timeout_s=2.5"),
    (["scoring.workers=-1"], "scoring.workers=-1"),
]


@pytest.mark.parametrize("overrides,needle", BAD, ids=[" ".join(b[0]) for b in BAD])
def test_bad_config_fails_fast_and_leaves_no_folder(tmp_path, overrides, needle):
    cmd = [sys.executable, "run.py", *overrides, f"results_dir={tmp_path}/results"]
    if not any(o.startswith("data_dir") for o in overrides):
        cmd.append(f"data_dir={DATA_DIR}")
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60)
    elapsed = time.monotonic() - t0
    assert p.returncode != 0
    assert needle in p.stderr + p.stdout, p.stderr
    assert "Traceback" not in p.stderr
    assert elapsed < 5, f"took {elapsed:.1f}s"
    assert not os.path.exists(tmp_path / "results")  # no run folder: it is created after validation


def test_same_command_maps_to_same_run_dir(tmp_path):
    from tasks.identity import run_name
    from tasks.prepare import effective_config

    def name(*overrides):
        cfg = config(tmp_path, DATA_DIR, "task=gsm8k", "sampling=paper", "sampling.n=32",
                     "sampling.max_tokens=32768", *overrides)
        return run_name(effective_config(cfg, cpu=False)[0], "cuda")
    a, b = name("budget=1024", "seed=0"), name("seed=0", "budget=1024")
    assert a == b != name("budget=2048")
    assert a.startswith("gsm8k/smollm2-135m/zipage-b1024-n32-len32768-s0-")


def test_cpu_run_folder_is_named_after_what_ran(tmp_path, data_dir, engine, monkeypatch):
    """The README's CPU command, through run.py itself: clamped values name the folder."""
    import run
    monkeypatch.setattr(sys, "argv", [
        "run.py", "task=amc23", "budget=2048", f"data_dir={data_dir}",
        f"results_dir={tmp_path}/results", "engine.device=cpu", "use_tqdm=false"])
    run.cli()
    (folder,) = os.listdir(tmp_path / "results" / "amc23" / "smollm2-135m")
    assert folder.startswith("zipage-b128-n2-len256-lim4-s0-")
    summary = json.load(open(tmp_path / "results" / "amc23" / "smollm2-135m" / folder / "summary.json"))
    assert summary["n"] == 2 and summary["max_tokens"] == 256 and summary["budget"] == 128
    assert any("sampling.n 32 -> 2" in note for note in summary["cpu_clamps"])


def test_data_dir_from_env_and_missing_data_source(tmp_path):
    """No data_dir and no hub (offline, nothing cached): one line saying how to give data."""
    env = {k: v for k, v in os.environ.items() if k != "ZIPAGE_DATA_DIR"}
    env.update(HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(tmp_path / "hub"))
    cmd = [sys.executable, "run.py", f"results_dir={tmp_path}"]
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 2 and "could not be asked for math-ai/amc23's current commit" in p.stderr
    assert "pass data_dir=" in p.stderr and time.monotonic() - t0 < 10
    assert os.listdir(tmp_path) == []  # no folder
    env["ZIPAGE_DATA_DIR"] = "/nonexistent-env-dir"
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 2 and "data_dir=/nonexistent-env-dir" in p.stderr


def test_a_model_neither_cached_nor_reachable_fails_with_how_to_fetch_it(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "hub")}
    cmd = [sys.executable, "run.py", "model=qwen3-8b", "task=gsm8k", f"data_dir={DATA_DIR}",
           f"results_dir={tmp_path}/results"]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 2, p.stderr[-2000:]
    assert "error: model 'Qwen/Qwen3-8B' could not be fetched" in p.stderr
    assert "hf download Qwen/Qwen3-8B" in p.stderr and "Traceback" not in p.stderr


def test_engine_zipage_is_the_published_score():
    """engine=zipage (and its old name zipage_paper) runs CompressionConfig.paper() =
    CompressionConfig(); zipage_full the same terms at weight 0.2; zipage_attn_recent the
    tuned variant (attention + 4 sinks + recent quarter). Issue 31."""
    from hydra import compose, initialize_config_dir
    from tasks.config import register_configs
    from tasks.prepare import engine_kwargs
    from zipage.compression.config import CompressionConfig
    from zipage.config import EngineConfig
    register_configs()
    got = {}
    with initialize_config_dir(config_dir=os.path.join(ROOT, "configs"), version_base=None):
        for name in ("zipage", "zipage_paper", "zipage_full", "zipage_attn_recent"):
            cfg = compose("config", overrides=[f"engine={name}", "budget=1024"])
            got[name] = EngineConfig.from_kwargs("m", **engine_kwargs(cfg.engine)).compression
    assert got["zipage"] == got["zipage_paper"] == CompressionConfig.paper() == CompressionConfig()
    c = got["zipage"]
    assert (c.use_global_score, c.use_pooling, c.redundancy, c.redundancy_weight) == \
        (True, True, "lightning", 0.8)
    assert (c.num_sink_tokens, c.recent_ratio) == (0, 0.0)
    assert got["zipage_full"] == CompressionConfig.full_score()
    t = got["zipage_attn_recent"]
    assert (t.use_global_score, t.use_pooling, t.redundancy) == (False, False, "none")
    assert (t.num_sink_tokens, t.recent_ratio) == (4, 0.25)


@pytest.mark.parametrize("override,needle", [
    ("+budgte=1024", "'budgte' (did you mean 'budget'?)"),
    ("+sampling.temprature=0.5", "'sampling.temprature' (did you mean 'sampling.temperature'?)"),
    ("+engine.max_num_seq=4", "'engine.max_num_seqs'")])
def test_added_keys_the_schema_lacks_are_rejected(tmp_path, override, needle):
    """Composed in-process too (tests, notebooks): `+key` typos never reach a run."""
    from tasks.evaluate import ConfigError, evaluate
    with pytest.raises(ConfigError, match="unknown key") as err:
        evaluate(config(tmp_path, DATA_DIR, override))
    assert needle in str(err.value) and not os.path.exists(tmp_path / "results")


@pytest.mark.parametrize("name", ["zipage", "zipage_paper", "zipage_full", "zipage_attn_recent",
                                  "rkv", "gkv", "snapkv", "snapkv_decode", "streaming_llm",
                                  "h2o"])
def test_each_engine_preset_runs_its_constructor(name):
    """configs/engine/<name>.yaml gives the engine exactly CompressionConfig's preset."""
    from hydra import compose, initialize_config_dir
    from tasks.config import register_configs
    from tasks.prepare import engine_kwargs
    from zipage.compression.presets import preset
    from zipage.config import EngineConfig
    register_configs()
    with initialize_config_dir(config_dir=os.path.join(ROOT, "configs"), version_base=None):
        cfg = compose("config", overrides=[f"engine={name}", "budget=2048"])
    assert cfg.engine.name == name
    engine = EngineConfig.from_kwargs("m", **engine_kwargs(cfg.engine))
    assert engine.compression == preset(name) and engine.budget == 2048
