"""A run killed with SIGKILL mid-generation, then resumed, counts every sample's time or
says plainly why its throughput is a lower bound (issue 29, item 2)."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from harness_fixtures import ROOT, config, read_rows
from tasks import evaluate as runner
from tasks.report import report

HARNESS = os.path.dirname(os.path.abspath(__file__))
SETTINGS = ["budget=512", "engine.max_num_seqs=1"]  # samples finish one by one


def kill_after(run_dir, data_dir, tmp_path, lines: int) -> None:
    """Start the run in a process (fake engine, 20 ms a step) and SIGKILL it once
    samples.jsonl has `lines` lines."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, HARNESS]), "FAKE_STEP_S": "0.02"}
    args = [f"data_dir={data_dir}", f"results_dir={tmp_path}/results", "engine.device=cpu",
            "cpu.enabled=false", "sampling.n=3", "sampling.max_tokens=64", "use_tqdm=false",
            "scoring.workers=2", f"run_dir={run_dir}", *SETTINGS]
    proc = subprocess.Popen([sys.executable, os.path.join(HARNESS, "fake_run.py"), *args],
                            cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    samples = os.path.join(run_dir, "samples.jsonl")
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if os.path.exists(samples) and len(open(samples).readlines()) >= lines:
                break
            time.sleep(0.02)
        assert proc.poll() is None, proc.stderr.read()
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(30)


def test_issue29_sigkilled_segment_is_detected_and_counted(tmp_path, data_dir, engine):
    run_dir = str(tmp_path / "run")
    kill_after(run_dir, data_dir, tmp_path, lines=3)
    kept = list(read_rows(run_dir).values())
    assert len(kept) >= 3 and len({r["segment"] for r in kept}) == 1
    stats = [json.loads(line) for line in open(os.path.join(run_dir, "generation_stats.jsonl"))]
    assert [r["event"] for r in stats] == ["open"]  # the kill left no close record
    s = runner.evaluate(config(tmp_path, data_dir, *SETTINGS), run_dir)  # resume
    assert s["complete"] and s["num_samples"] == 15
    assert s["died_segments"] == 1 and s["interrupted_segments"] == 1
    assert s["generation_segments"] == 2
    # Every sample's time is counted: the killed segment from its start to its last sample.
    generated = [r for r in read_rows(run_dir).values() if r["finish_reason"] != "error"]
    assert s["untimed_samples"] == 0
    assert s["timed_output_tokens"] == s["output_tokens"] == sum(
        r["completion_tokens"] for r in generated)
    last = max(r["finish_s"] for r in kept)  # the killed process's clock started at 0
    (resumed,) = [json.loads(line) for line in open(os.path.join(run_dir, "generation_stats.jsonl"))
                  if '"event": "close"' in line]
    assert s["generation_wall_time_s"] == pytest.approx(resumed["wall_time_s"] + last)
    # ... and the summary says why the rate is a lower bound, naming the segment.
    (reason,) = s["throughput_lower_bound_reasons"]
    assert s["throughput_lower_bound"] and "was killed (no close record)" in reason
    assert f"its {len(kept)} finished samples" in reason and kept[0]["segment"] in reason
    assert "was killed" in report(s)
    assert s["baseline"]["time_to_finish_speedup"] is not None  # over all samples


def test_issue29_samples_without_a_segment_make_the_time_partial(tmp_path, data_dir, engine):
    """A folder from before open records (samples with no segment account): no
    time-to-finish speedup, and the summary counts the untimed samples."""
    run_dir = tmp_path / "run"
    runner.evaluate(config(tmp_path, data_dir, *SETTINGS), str(run_dir))
    stats = run_dir / "generation_stats.jsonl"
    lines = [json.loads(line) for line in open(stats)]
    # What an old harness left after a SIGKILL: the killed segment recorded nothing.
    closed = [r for r in lines if r["event"] == "close"]
    closed[0]["kept_samples"] -= 4
    closed[0]["kept_output_tokens"] -= 100
    stats.write_text("".join(json.dumps(r) + "\n" for r in closed))
    from tasks.score import rescore
    s = rescore(str(run_dir))
    assert s["untimed_samples"] == 4 and s["untimed_output_tokens"] == 100
    assert s["baseline"]["time_to_finish_speedup"] is None
    assert "4 sample(s) (100 tokens) have no measured generation time" in report(s)
