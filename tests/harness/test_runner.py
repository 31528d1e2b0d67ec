"""Resume, Full-KV baseline reuse, data validation and re-scoring, with a fake engine."""
import json
import os
import subprocess
import sys

import pytest

import fake_engine
from harness_fixtures import ROOT, config, data_dir, engine, read_rows  # noqa: F401 (fixtures, shared)
from tasks import evaluate as runner
from tasks.base import DataError

VOLATILE = {"run_dir", "generation_segments", "generation_wall_time_s", "output_tokens_per_s",
            "time_to_finish_s", "correct_per_hour", "baseline", "timed_output_tokens",
            "peak_running", "mean_running", "interrupted_segments", "throughput_lower_bound",
            "throughput_lower_bound_reasons", "died_segments"}


def samples(run_dir):
    return read_rows(run_dir)


def test_resume_after_crash_equals_uninterrupted_run(tmp_path, data_dir, engine):
    cfg = config(tmp_path, data_dir, "budget=512")
    full = runner.evaluate(cfg, str(tmp_path / "a"))
    assert len(fake_engine.FakeLLM.instances) == 2  # zipage + Full-KV baseline

    engine.crash_after = 5
    with pytest.raises(RuntimeError, match="simulated crash"):
        runner.evaluate(cfg, str(tmp_path / "b"))
    assert len(samples(tmp_path / "b")) == 5            # nothing finished was lost
    out = subprocess.run([sys.executable, "-m", "tasks.score", str(tmp_path / "b")], cwd=ROOT,
                         check=True, capture_output=True, text=True).stdout  # partial runs score too
    partial = json.load(open(tmp_path / "b" / "summary.json"))
    assert partial["num_samples"] == 5 and not partial["complete"] and "PARTIAL" in out

    resumed = runner.evaluate(cfg, str(tmp_path / "b"))
    zipage_engines = [e for e in fake_engine.FakeLLM.instances if e.kwargs["budget"] is not None]
    assert zipage_engines[-1].generated == 15 - 5 - 3   # only missing samples (q99 errors: 3)
    assert {k: v for k, v in full.items() if k not in VOLATILE} == \
           {k: v for k, v in resumed.items() if k not in VOLATILE}
    a, b = samples(tmp_path / "a"), samples(tmp_path / "b")
    assert a.keys() == b.keys() and len(a) == 15
    assert all(a[k]["completion"] == b[k]["completion"] and a[k]["seed"] == b[k]["seed"] for k in a)
    assert len(fake_engine.FakeLLM.instances) == 4       # the baseline was not rebuilt


def test_summary_has_required_keys_and_failed_problem_is_recorded(tmp_path, data_dir, engine):
    s = runner.evaluate(config(tmp_path, data_dir, "budget=512"), str(tmp_path / "run"))
    for key in ["pass@1", "pass@1_stderr", "output_tokens_per_s", "num_problems", "num_samples",
                "truncation_rate", "boxed_rate", "p95_output_tokens", "mean_running"]:
        assert key in s
    assert s["num_problems"] == 5 and s["num_samples"] == 15 and s["complete"]
    b = s["baseline"]
    assert b["output_tokens_per_s"] and b["pass@1"] is not None
    assert b["speedup"] == pytest.approx(s["output_tokens_per_s"] / b["output_tokens_per_s"])
    rows, scores = samples(tmp_path / "run"), read_rows(tmp_path / "run", "scores.jsonl")
    assert rows[("p99", 0)]["error"] == "prompt too long" and scores[("p99", 0)]["correct"] is False
    assert rows.keys() == scores.keys()
    for k, r in rows.items():
        assert {"problem_id", "sample_index", "prompt_tokens", "prompt_hash", "completion",
                "completion_tokens", "finish_reason"} <= r.keys()
        assert {"correct", "extracted_answer", "line"} <= scores[k].keys()
    assert os.path.exists(tmp_path / "run" / "config.yaml")
    on_disk = json.load(open(tmp_path / "run" / "summary.json"))
    assert on_disk["pass@1"] == s["pass@1"]


def test_baseline_is_computed_once_for_a_budget_sweep(tmp_path, data_dir, engine):
    s1 = runner.evaluate(config(tmp_path, data_dir, "budget=512"), str(tmp_path / "b512"))
    s2 = runner.evaluate(config(tmp_path, data_dir, "budget=1024"), str(tmp_path / "b1024"))
    budgets = [e.kwargs["budget"] for e in fake_engine.FakeLLM.instances]
    assert budgets == [512, None, 1024]
    assert s1["baseline"]["run_dir"] == s2["baseline"]["run_dir"]
    runner.evaluate(config(tmp_path, data_dir, "budget=512", "seed=1"), str(tmp_path / "s1"))
    assert [e.kwargs["budget"] for e in fake_engine.FakeLLM.instances][3:] == [512, None]


def test_fullkv_run_is_its_own_baseline(tmp_path, data_dir, engine):
    s = runner.evaluate(config(tmp_path, data_dir, "engine=fullkv"), str(tmp_path / "f"))
    assert [e.kwargs["budget"] for e in fake_engine.FakeLLM.instances] == [None]
    assert s["baseline"]["speedup"] == 1.0


def test_cpu_clamps_are_applied_and_reported(tmp_path, data_dir, engine):
    cfg = config(tmp_path, data_dir, "cpu.enabled=true", "sampling.max_tokens=32768", "budget=2048")
    s = runner.evaluate(cfg, str(tmp_path / "c"))
    kw = fake_engine.FakeLLM.instances[0].kwargs
    assert kw["budget"] == 128 and kw["block_size"] == 16
    assert s["max_tokens"] == 256 and any("sampling.max_tokens 32768 -> 256" in n for n in s["cpu_clamps"])


def test_a_max_tokens_beyond_the_model_context_is_said(tmp_path, data_dir, engine, capsys):
    """On a GPU nothing is clamped: max_tokens 32768 with a 4096-token model ends samples at
    the context, and the output says so (the fake engine's max_model_len is 4096)."""
    runner.evaluate(config(tmp_path, data_dir, "sampling.max_tokens=32768"), str(tmp_path / "m"))
    out = capsys.readouterr().out
    assert "sampling.max_tokens=32768 exceeds the model's context (4096 tokens" in out
    runner.evaluate(config(tmp_path, data_dir, "sampling.max_tokens=64"), str(tmp_path / "n"))
    assert "exceeds the model's context" not in capsys.readouterr().out


def test_a_different_run_in_the_same_folder_is_refused(tmp_path, data_dir, engine):
    runner.evaluate(config(tmp_path, data_dir, "engine=fullkv"), str(tmp_path / "x"))
    with pytest.raises(runner.ConfigError, match=r"holds samples of a different run; since "
                       r"they were generated, the engine/sampling/model/task settings \(seed 0 "
                       r"-> 3, sampling.max_tokens 64 -> 32\) changed"):
        runner.evaluate(config(tmp_path, data_dir, "engine=fullkv", "seed=3",
                               "sampling.max_tokens=32"), str(tmp_path / "x"))
    with pytest.raises(runner.ConfigError, match=r"settings \(sampling.max_tokens 64 -> 32\) "
                       r"changed"):  # kv_cache_dtype auto is the default (null): not a change
        runner.evaluate(config(tmp_path, data_dir, "engine=fullkv", "engine.kv_cache_dtype=auto",
                               "sampling.max_tokens=32"), str(tmp_path / "x"))
    with pytest.raises(runner.ConfigError, match=r"settings \(engine.budget None -> 512, "
                       r"engine.name fullkv -> zipage, .*, and \d+ more\) changed"):
        runner.evaluate(config(tmp_path, data_dir, "budget=512"), str(tmp_path / "x"))


def test_malformed_row_reports_its_line(tmp_path, data_dir, engine):
    with open(os.path.join(data_dir, "amc23.jsonl"), "a") as f:
        f.write('{"id": "bad", "problem": "q7: x"}\n')
    with pytest.raises(DataError, match=r"amc23.jsonl:6: missing field\(s\) answer"):
        runner.evaluate(config(tmp_path, data_dir, "engine=fullkv"), str(tmp_path / "m"))
    with open(os.path.join(data_dir, "amc23.jsonl"), "w") as f:
        f.write('{"id": "a", "problem": "q1", "answer": "2"}\n{not json\n')
    with pytest.raises(DataError, match=r"amc23.jsonl:2: invalid JSON"):
        runner.evaluate(config(tmp_path, data_dir, "engine=fullkv"), str(tmp_path / "m"))
    assert fake_engine.FakeLLM.instances == []


def test_task_limit_takes_first_problems(tmp_path, data_dir, engine):
    s = runner.evaluate(config(tmp_path, data_dir, "engine=fullkv", "task.limit=2"), str(tmp_path / "l"))
    assert s["num_problems_expected"] == 2 and set(k[0] for k in samples(tmp_path / "l")) == {"p1", "p2"}


def test_baseline_only_then_budget_runs_reuse_it(tmp_path, data_dir, engine):
    """A sweep's first stage generates just the shared Full-KV baseline."""
    only = runner.evaluate(config(tmp_path, data_dir, "budget=512", "baseline.only=true"),
                           str(tmp_path / "stage1"))
    assert only["budget"] is None and only["num_samples"] == 15
    assert [e.kwargs["budget"] for e in fake_engine.FakeLLM.instances] == [None]
    assert not os.path.exists(tmp_path / "stage1" / "samples.jsonl")
    s = runner.evaluate(config(tmp_path, data_dir, "budget=1024"), str(tmp_path / "b1024"))
    assert [e.kwargs["budget"] for e in fake_engine.FakeLLM.instances] == [None, 1024]
    assert s["baseline"]["pass@1"] == only["pass@1"]


def test_concurrent_budget_runs_generate_the_shared_baseline_once(tmp_path, data_dir, engine,
                                                                  monkeypatch):
    import threading
    cfgs = [config(tmp_path, data_dir, f"budget={b}") for b in (512, 1024)]
    errors = []
    both_at_baseline = threading.Barrier(2)
    lock = runner.run_lock

    def contended_lock(run_dir):  # both jobs reach the shared baseline at the same time
        if "_baselines" in run_dir:
            both_at_baseline.wait(timeout=60)
        return lock(run_dir)

    monkeypatch.setattr(runner, "run_lock", contended_lock)

    def run(cfg, name):
        try:
            runner.evaluate(cfg, str(tmp_path / name))
        except Exception as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(c, f"b{i}")) for i, c in enumerate(cfgs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors
    full = [e for e in fake_engine.FakeLLM.instances if e.kwargs["budget"] is None]
    assert sum(e.generated for e in full) == 12  # once (q99 errors: 3); the second job found it done
    base_dir = json.load(open(tmp_path / "b0" / "summary.json"))["baseline"]["run_dir"]
    rows = [json.loads(line) for line in open(os.path.join(base_dir, "samples.jsonl"))]
    assert len(rows) == len({(r["problem_id"], r["sample_index"]) for r in rows}) == 15
