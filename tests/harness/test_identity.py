"""A rerun never mixes samples of different prompts or data (issue 11, item 1)."""
import hashlib
import json
import os

import pytest

import fake_engine
from harness_fixtures import config, read_rows
from tasks import evaluate as runner


def edit_problem(data_dir, pid, text):
    path = os.path.join(data_dir, "amc23.jsonl")
    rows = [json.loads(line) for line in open(path)]
    for r in rows:
        if r["id"] == pid:
            r["problem"] = text
    with open(path, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)


def test_rerun_after_a_data_row_changed_is_refused(tmp_path, data_dir, engine):
    cfg = config(tmp_path, data_dir, "engine=fullkv")
    runner.evaluate(cfg, str(tmp_path / "run"))
    before = open(tmp_path / "run" / "samples.jsonl", "rb").read()
    edit_problem(data_dir, "p2", "q2: three times 2?")
    with pytest.raises(runner.ConfigError) as err:
        runner.evaluate(config(tmp_path, data_dir, "engine=fullkv"), str(tmp_path / "run"))
    msg = str(err.value)
    assert "problems' text" in msg and f"rm -r {tmp_path / 'run'}" in msg
    assert open(tmp_path / "run" / "samples.jsonl", "rb").read() == before


def test_partial_run_with_another_chat_template_is_refused(tmp_path, data_dir, engine):
    cfg = config(tmp_path, data_dir, "engine=fullkv")
    engine.crash_after = 5
    with pytest.raises(RuntimeError, match="simulated crash"):
        runner.evaluate(cfg, str(tmp_path / "run"))
    engine.tokenizer = fake_engine.OtherTemplateTokenizer()
    with pytest.raises(runner.ConfigError, match="prompt token ids"):
        runner.evaluate(cfg, str(tmp_path / "run"))
    assert len(read_rows(tmp_path / "run")) == 5          # nothing appended, nothing mixed
    assert fake_engine.FakeLLM.instances[-1].generated == 0


def test_every_sample_carries_its_prompt_hash(tmp_path, data_dir, engine):
    runner.evaluate(config(tmp_path, data_dir, "engine=fullkv"), str(tmp_path / "run"))
    tok = fake_engine.FakeTokenizer()
    for (pid, _), row in read_rows(tmp_path / "run").items():
        k = pid[1:]
        text = tok.apply_chat_template([{"role": "user", "content": f"q{k}: twice {k}?\nPlease "
                                         "reason step by step, and put your final answer within "
                                         "\\boxed{}."}])
        ids = tok(text)["input_ids"]
        assert row["prompt_hash"] == hashlib.sha256(json.dumps(ids).encode()).hexdigest()[:16]
    meta = json.load(open(tmp_path / "run" / "run.json"))
    assert set(meta["identity"]) == {"settings", "task_version", "problems", "prompts", "tokenizer"}


def test_cached_baseline_of_other_data_is_refused(tmp_path, data_dir, engine):
    runner.evaluate(config(tmp_path, data_dir, "budget=512"), str(tmp_path / "b512"))
    edit_problem(data_dir, "p3", "q3: half of 6?")
    with pytest.raises(runner.ConfigError) as err:
        runner.evaluate(config(tmp_path, data_dir, "budget=1024"), str(tmp_path / "b1024"))
    assert "_baselines" in str(err.value) and "problems' text" in str(err.value)


def test_cached_baseline_of_other_prompts_is_refused(tmp_path, data_dir, engine):
    runner.evaluate(config(tmp_path, data_dir, "budget=512"), str(tmp_path / "b512"))
    engine.tokenizer = fake_engine.OtherTemplateTokenizer()  # a new chat template
    with pytest.raises(runner.ConfigError) as err:
        runner.evaluate(config(tmp_path, data_dir, "budget=1024"), str(tmp_path / "b1024"))
    assert "Full-KV baseline" in str(err.value) and "prompt token ids" in str(err.value)
    assert [e.kwargs["budget"] for e in fake_engine.FakeLLM.instances] == [512, None, 1024]


def test_a_new_task_version_is_refused(tmp_path, data_dir, engine, monkeypatch):
    from tasks.base import REGISTRY
    runner.evaluate(config(tmp_path, data_dir, "engine=fullkv"), str(tmp_path / "run"))
    monkeypatch.setattr(REGISTRY["amc23"], "version", 2)
    with pytest.raises(runner.ConfigError, match=r"task version .*\(1 -> 2\)"):
        runner.evaluate(config(tmp_path, data_dir, "engine=fullkv"), str(tmp_path / "run"))


def test_folder_name_follows_output_settings_only(tmp_path):
    from tasks.identity import run_name
    from tasks.prepare import effective_config

    def name(*overrides):
        eff, _ = effective_config(config(tmp_path, "/tmp", "budget=512", *overrides), cpu=False)
        return run_name(eff, "cuda")
    base = name()
    assert name("engine.gpu_memory_utilization=0.5") == base     # scheduling only: resumes
    assert name("engine.max_num_seqs=8") == base
    assert name("engine.observation_window=32") != base          # changes the outputs
    assert name("+engine.extra.kv_cache_dtype=fp8") != base      # a new engine setting joins
    assert name("engine.kv_cache_dtype=auto") == base            # the default: same key as before
    assert "-b512-fp8-" in name("engine.kv_cache_dtype=fp8") != base
    fp8 = name("engine.kv_cache_dtype=fp8")  # its key rotation is on by default, resolved:
    assert name("engine.kv_cache_dtype=fp8", "engine.fp8_key_rotation=true") == fp8
    assert name("engine.kv_cache_dtype=fp8", "engine.fp8_key_rotation=false") != fp8
    assert name("engine.kv_cache_dtype=fp8", "engine.fp8_decode=f16") == fp8  # the default
    assert name("engine.kv_cache_dtype=fp8", "engine.fp8_decode=e4m3") != fp8
    assert name("+task.options.instruction=Answer.") != base


def test_fp8_run_and_its_baseline_never_share_a_bf16_folder(tmp_path, data_dir, engine):
    auto = runner.evaluate(config(tmp_path, data_dir, "budget=512"), str(tmp_path / "auto"))
    fp8 = runner.evaluate(config(tmp_path, data_dir, "budget=512", "engine.kv_cache_dtype=fp8"),
                          str(tmp_path / "fp8"))
    assert (auto["kv_cache_dtype"], fp8["kv_cache_dtype"]) == ("auto", "fp8")
    assert fp8["baseline"]["run_dir"] != auto["baseline"]["run_dir"]
    assert "fullkv-fp8-" in fp8["baseline"]["run_dir"]
    kinds = [(e.kwargs["budget"], e.kwargs.get("kv_cache_dtype")) for e in
             fake_engine.FakeLLM.instances]
    assert kinds == [(512, None), (None, None), (512, "fp8"), (None, "fp8")]  # fp8 baseline
