"""One run plan (tasks/plan.py) decides a run's folder, identity and baseline; generation,
scoring and re-scoring read it (issue 30, item 3). Compressed runs' identity counts the
engine's resolved compression settings; Full-KV folder names stay as they were."""
import dataclasses
import json
import os

import pytest

from harness_fixtures import ROOT, config
from tasks import evaluate as runner
from tasks import plan as plan_mod


def names(*overrides, device="cuda"):
    """(run folder name, baseline folder relative to results_dir) as the plan names them."""
    from hydra import compose, initialize_config_dir
    from tasks.config import register_configs
    register_configs()
    with initialize_config_dir(config_dir=os.path.join(ROOT, "configs"), version_base=None):
        cfg = compose("config", overrides=["results_dir=results", *overrides])
    run, base = plan_mod.folder_names(cfg, device)
    return run, base and os.path.relpath(base, os.path.abspath("results"))


def test_full_kv_folder_names_are_unchanged():
    """Regression constants: these names were computed with the code before the run plan
    (commit a15cc64, tasks.identity.run_name and tasks.rundir.baseline_dir); existing
    Full-KV baselines must keep being found and reused."""
    assert names("engine=fullkv", "task=amc23")[0] == \
        "amc23/smollm2-135m/fullkv-n32-len32768-s0-5b3c497e"
    assert names("engine=fullkv", "task=gsm8k", "task.limit=2", "sampling.n=1",
                 "sampling.max_tokens=64", device="cpu")[0] == \
        "gsm8k/smollm2-135m/fullkv-n1-len64-lim2-s0-30c549df"
    assert names("task=aime24", "budget=1024", "sampling=greedy")[1] == \
        "_baselines/aime24/smollm2-135m/fullkv-n1-len32768-s0-6ae04e38"


def test_a_changed_compression_default_is_a_new_folder(monkeypatch):
    """A library default the config does not set (pooling_kernel_size) changes a budget
    run's folder, never its Full-KV baseline's."""
    from zipage.config import EngineConfig
    before = names("task=aime24", "budget=1024")
    real = EngineConfig.from_kwargs.__func__

    def new_default(cls, model, **kwargs):
        engine = real(cls, model, **kwargs)
        engine.compression = dataclasses.replace(engine.compression, pooling_kernel_size=9)
        return engine
    monkeypatch.setattr(EngineConfig, "from_kwargs", classmethod(new_default))
    after = names("task=aime24", "budget=1024")
    assert after[0] != before[0] and after[1] == before[1]
    assert after[0].rsplit("-", 1)[0] == before[0].rsplit("-", 1)[0]  # only the hash moved


def test_run_json_stores_the_resolved_compression(tmp_path, data_dir, engine):
    runner.evaluate(config(tmp_path, data_dir, "budget=512"), str(tmp_path / "run"))
    meta = json.load(open(tmp_path / "run" / "run.json"))
    assert meta["compression"]["redundancy_weight"] == 0.8  # the published default
    assert meta["compression"]["global_mode"] == "max"  # a default the config leaves out
    base = json.load(open(os.path.join(meta["baseline_dir"], "run.json")))
    assert base["compression"] is None  # Full KV has none


def test_a_folder_of_the_previous_default_never_gets_samples_of_the_new_one(tmp_path, data_dir,
                                                                         engine, capsys):
    """Issue 31: a folder made when engine=zipage meant attention + 4 sinks + the recent
    quarter; the same command after the default became the published score starts a new
    folder and names the compression settings that changed."""
    previous_default = ["engine.compression.use_global_score=false",
                        "engine.compression.use_pooling=false",
                        "engine.compression.redundancy=none",
                        "engine.compression.num_sink_tokens=4",
                        "engine.compression.recent_ratio=0.25"]
    first = runner.evaluate(config(tmp_path, data_dir, "budget=512", *previous_default))
    capsys.readouterr()
    second = runner.evaluate(config(tmp_path, data_dir, "budget=512"))
    out = capsys.readouterr().out
    assert second["run_dir"] != first["run_dir"]
    assert os.path.basename(first["run_dir"]).rsplit("-", 1)[0] == \
        os.path.basename(second["run_dir"]).rsplit("-", 1)[0]  # same command, new hash
    note = next(line for line in out.splitlines() if "holds this command's earlier run" in line)
    assert note.startswith(f"note: {first['run_dir']} holds this command's earlier run with "
                           f"compression num_sink_tokens=4, recent_ratio=0.25, "
                           f"redundancy=none, use_global_score=False, use_pooling=False "
                           f"(now 0, 0.0, lightning, True, True)")
    assert note.endswith("this run starts a new folder")
    first_rows = open(os.path.join(first["run_dir"], "samples.jsonl")).read()
    runner.evaluate(config(tmp_path, data_dir, "budget=512"))  # its folder exists: no note
    assert "holds this command's earlier run" not in capsys.readouterr().out
    assert open(os.path.join(first["run_dir"], "samples.jsonl")).read() == first_rows


def test_folder_identity_and_baseline_come_from_the_plan(tmp_path, data_dir, engine,
                                                         monkeypatch):
    """evaluate files the run, its identity and its baseline exactly where the plan says."""
    real = plan_mod.make_plan
    made = []

    def moved(*args, **kwargs):
        plan = real(*args, **kwargs)
        base = dataclasses.replace(plan.baseline, run_dir=str(tmp_path / "elsewhere" / "base"))
        plan = dataclasses.replace(plan, run_dir=str(tmp_path / "elsewhere" / "run"),
                                   identity={**plan.identity, "settings": "from-the-plan"},
                                   baseline=base)
        made.append(plan)
        return plan
    monkeypatch.setattr(runner, "make_plan", moved)
    s = runner.evaluate(config(tmp_path, data_dir, "budget=512"))
    (plan,) = made
    assert s["run_dir"] == plan.run_dir and s["baseline"]["run_dir"] == plan.baseline.run_dir
    assert os.path.exists(os.path.join(plan.baseline.run_dir, "samples.jsonl"))
    meta = json.load(open(os.path.join(plan.run_dir, "run.json")))
    assert meta["identity"]["settings"] == "from-the-plan"
    assert meta["baseline_dir"] == plan.baseline.run_dir
    assert not os.path.exists(tmp_path / "results" / "amc23")  # nothing derived it again


def test_rescoring_rebuilds_the_plan_from_the_stored_config(tmp_path, data_dir, engine,
                                                            monkeypatch):
    from tasks.score import rescore
    run = str(tmp_path / "run")
    first = runner.evaluate(config(tmp_path, data_dir, "budget=512"), run)
    calls = []
    real = plan_mod.make_plan

    def spy(cfg, *args, **kwargs):
        calls.append((cfg, kwargs))
        return real(cfg, *args, **kwargs)
    monkeypatch.setattr(plan_mod, "make_plan", spy)
    again = rescore(run)
    ((cfg, kwargs),) = calls
    assert kwargs["stored"] == json.load(open(os.path.join(run, "run.json")))
    assert cfg.engine.budget == 512 and cfg.scoring.timeout_s == 5.0
    assert again["pass@1"] == first["pass@1"]
    assert again["baseline"]["run_dir"] == first["baseline"]["run_dir"]
    assert again["scoring_identity"] == first["scoring_identity"]


def test_the_plan_is_read_only(tmp_path, data_dir):
    plan = plan_mod.make_plan(config(tmp_path, data_dir, "budget=512"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.run_dir = "/elsewhere"
    with pytest.raises(Exception, match="read-only"):
        plan.cfg.seed = 3


def test_a_bad_engine_value_is_named_before_the_data_is_read(tmp_path, data_dir):
    """The engine's own check is cheap; a malformed data file (or a slow hub download) must
    not hide it."""
    from tasks.prepare import ConfigError
    with open(os.path.join(data_dir, "amc23.jsonl"), "a") as f:
        f.write("{not json\n")
    with pytest.raises(ConfigError, match="kv_cache_dtype must be 'auto' or 'fp8'"):
        plan_mod.make_plan(config(tmp_path, data_dir, "budget=512", "engine.kv_cache_dtype=fp9"))
