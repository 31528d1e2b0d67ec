"""Throughput over every timed segment, and where the baseline's throughput came from
(issue 11, item 4). The fake engine runs on a clock the harness's timer also reads."""
import json
import os

import pytest

import fake_engine
from harness_fixtures import config
from tasks import evaluate as runner
from tasks.report import report


def segments(run_dir):
    """The closed segment records (each segment also has an open record, written first)."""
    rows = [json.loads(line) for line in open(os.path.join(run_dir, "generation_stats.jsonl"))]
    return [r for r in rows if r.get("event") != "open"]


def test_interrupted_and_resumed_run_reports_the_same_throughput(tmp_path, data_dir, engine):
    cfg = config(tmp_path, data_dir, "engine=fullkv")
    whole = runner.evaluate(cfg, str(tmp_path / "whole"))["output_tokens_per_s"]

    engine.interrupt_at_step = 30  # Ctrl-C with the longest samples still running
    with pytest.raises(KeyboardInterrupt):
        runner.evaluate(cfg, str(tmp_path / "cut"))
    s = runner.evaluate(cfg, str(tmp_path / "cut"))
    first, second = segments(tmp_path / "cut")
    assert first["interrupted"] and first["work_measured"] and not second["interrupted"]
    assert first["num_output_tokens"] > first["kept_output_tokens"] > 0  # unfinished work counted
    assert s["generation_segments"] == 2 and s["interrupted_segments"] == 1
    assert not s["throughput_lower_bound"]
    assert s["output_tokens_per_s"] == pytest.approx(whole, rel=0.05)
    # Timing only the resumed part (what the harness used to report) is further off: the
    # tail runs fewer requests at once, and each step has a fixed cost.
    tail = second["num_output_tokens"] / second["wall_time_s"]
    assert tail / whole < 0.93


def test_unreported_unfinished_work_makes_a_flagged_lower_bound(tmp_path, data_dir, engine):
    cfg = config(tmp_path, data_dir, "engine=fullkv")
    whole = runner.evaluate(cfg, str(tmp_path / "whole"))["output_tokens_per_s"]
    engine.report_interrupted = False  # an engine that sets no stats for an interrupted call
    engine.interrupt_at_step = 30
    with pytest.raises(KeyboardInterrupt):
        runner.evaluate(cfg, str(tmp_path / "cut"))
    s = runner.evaluate(cfg, str(tmp_path / "cut"))
    assert s["throughput_lower_bound"] and s["output_tokens_per_s"] < whole
    assert "out tok/s is a lower bound" in report(s)


@pytest.fixture
def fixed_conditions(monkeypatch):
    """Deterministic conditions; set `.host` to change the next segments' host."""
    from tasks import conditions
    state = type("S", (), {"host": "node1"})()
    real = conditions.current

    def current(job):
        return {**real(job), "host": state.host, "load_avg_1m": 0.0, "cpu_count": 2}
    monkeypatch.setattr(conditions, "current", current)
    return state


def test_summary_says_where_the_baseline_throughput_came_from(tmp_path, data_dir, engine,
                                                              fixed_conditions):
    first = runner.evaluate(config(tmp_path, data_dir, "budget=512"), str(tmp_path / "b512"))
    b = first["baseline"]
    assert b["throughput_source"] == "measured in the same job as this run" and b["same_job"]
    assert "Full KV throughput: measured in the same job as this run" in report(first)

    fixed_conditions.host = "node2"
    later = runner.evaluate(config(tmp_path, data_dir, "budget=1024"), str(tmp_path / "b1024"))
    b = later["baseline"]
    assert b["same_job"] is False and b["throughput_source"].startswith("measured in another job")
    assert "on node1" in b["throughput_source"] and "baseline.retime=true" in b["throughput_source"]
    assert b["conditions_differ"] == ["host node2 vs node1"]
    assert "warning: measured under different conditions: host node2 vs node1" in report(later)


def test_retime_compares_both_engines_in_one_job(tmp_path, data_dir, engine, fixed_conditions):
    runner.evaluate(config(tmp_path, data_dir, "budget=512"), str(tmp_path / "b512"))
    fixed_conditions.host = "node2"
    s = runner.evaluate(config(tmp_path, data_dir, "budget=1024", "baseline.retime=true",
                               "baseline.retime_problems=2"), str(tmp_path / "b1024"))
    assert [e.kwargs["budget"] for e in fake_engine.FakeLLM.instances] == [512, None, 1024, None]
    retime = json.load(open(tmp_path / "b1024" / "retime.json"))
    assert retime["problems"] == ["p1", "p3"] and retime["run"]["num_requests"] == 2
    rates = retime["output_tokens_per_s"]
    b = s["baseline"]
    assert b["speedup"] == pytest.approx(rates["run"] / rates["baseline"])
    assert b["speedup_from_generation"] == pytest.approx(
        s["output_tokens_per_s"] / b["output_tokens_per_s"])
    assert b["same_job"] and b["conditions_differ"] == []
    assert b["throughput_source"].startswith("re-timed in job")
    assert len(segments(tmp_path / "b1024")) == 1      # the re-timing is not a run segment
