"""engine.data_parallel_size=N: problems split over N spawned engine replicas (the fake
engine, fake_engine.make_engine), samples appended to one file, resume after any replica
dies, throughput over the whole launch."""
import json
import multiprocessing as mp
import os

import pytest

import fake_engine
from harness_fixtures import config, data_dir, read_rows  # noqa: F401 (fixtures, shared)
from tasks import evaluate as runner
from tasks.replicas import ReplicaError, assignment, gpu_groups
from tasks.samples import append_line, read_samples
from tasks.summary import throughput

SAME = ("completion", "seed", "finish_reason", "completion_tokens", "prompt_hash", "gold")


@pytest.fixture
def replicas_engine(monkeypatch):
    """The module-level fake factory (picklable, so spawned replicas can use it)."""
    monkeypatch.setattr(runner, "make_engine", fake_engine.make_engine)
    monkeypatch.setattr(runner, "make_tokenizer", fake_engine.make_tokenizer)
    for key in ("FAKE_CRASH_REPLICA", "FAKE_CRASH_AFTER"):
        monkeypatch.delenv(key, raising=False)
    return monkeypatch


def same_samples(a_dir, b_dir):
    a, b = read_rows(a_dir), read_rows(b_dir)
    assert a.keys() == b.keys()
    for k in a:
        assert {f: a[k].get(f) for f in SAME} == {f: b[k].get(f) for f in SAME}, k
    return a


def test_two_replicas_give_the_samples_of_one(tmp_path, data_dir, replicas_engine):
    one = runner.evaluate(config(tmp_path, data_dir, "engine=fullkv"), str(tmp_path / "one"))
    two = runner.evaluate(config(tmp_path, data_dir, "engine=fullkv",
                                 "engine.data_parallel_size=2"), str(tmp_path / "two"))
    rows = same_samples(tmp_path / "one", tmp_path / "two")
    assert len(rows) == 15  # 5 problems x 3 samples, p99's rejected ones included
    assert two["pass@1"] == one["pass@1"] and two["complete"]
    segs = [json.loads(line) for line in open(tmp_path / "two" / "generation_stats.jsonl")]
    segs = [s for s in segs if s.get("event") != "open"]  # closed records
    assert sorted(s["replica"]["rank"] for s in segs) == [0, 1]
    assert len({s["replica"]["group"] for s in segs}) == 1
    assert two["data_parallel_replicas"] == 2 and two["num_samples"] == 15
    # whole-run throughput: every replica's tokens over the launch's span, not summed walls
    span = (max(s["start_s"] + s["wall_time_s"] for s in segs) - min(s["start_s"] for s in segs))
    assert two["generation_wall_time_s"] == pytest.approx(span)
    assert two["timed_output_tokens"] == sum(s["num_output_tokens"] for s in segs)
    # the identity ignores how many replicas ran: the same command with N=1 resumes it
    again = runner.evaluate(config(tmp_path, data_dir, "engine=fullkv"), str(tmp_path / "two"))
    assert again["num_samples"] == 15


@pytest.mark.parametrize("dead", [0, 1])
def test_resume_after_either_replica_died(tmp_path, data_dir, replicas_engine, dead):
    cfg = ["engine=fullkv", "engine.data_parallel_size=2"]
    runner.evaluate(config(tmp_path, data_dir, *cfg), str(tmp_path / "full"))
    replicas_engine.setenv("FAKE_CRASH_REPLICA", str(dead))
    replicas_engine.setenv("FAKE_CRASH_AFTER", "2")
    with pytest.raises(ReplicaError, match=f"(?s)replica {dead} of 2 failed.*simulated crash"):
        runner.evaluate(config(tmp_path, data_dir, *cfg), str(tmp_path / "run"))
    kept = read_samples(str(tmp_path / "run" / "samples.jsonl"))
    mine = assignment(5, 2)[dead]  # problems p1..p4, p99 by index
    ids = ["p1", "p2", "p3", "p4", "p99"]
    survivor_rows = [r for r in kept.rows if ids.index(r["problem_id"]) not in mine]
    assert len(survivor_rows) == 3 * (5 - len(mine))  # the other replica finished its share
    assert len(kept.rows) < 15 and not kept.bad_lines
    replicas_engine.delenv("FAKE_CRASH_REPLICA")
    resumed = runner.evaluate(config(tmp_path, data_dir, *cfg), str(tmp_path / "run"))
    assert resumed["complete"]
    same_samples(tmp_path / "full", tmp_path / "run")


def _append_many(path, tag, n):
    for i in range(n):
        append_line(path, json.dumps({"problem_id": tag, "sample_index": i, "pad": "x" * 5000})
                    + "\n")


def test_concurrent_appends_keep_every_line_whole(tmp_path):
    path = str(tmp_path / "samples.jsonl")
    with open(path, "w") as f:
        f.write('{"problem_id": "torn", "sample_in')  # a line cut by a kill
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_append_many, args=(path, f"w{w}", 200)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    got = read_samples(path)
    assert len(got.rows) == 800 and len(got.keys()) == 800  # no line twice
    assert [line for line, _ in got.bad_lines] == [1]  # only the torn line, kept and reported


def test_throughput_counts_a_launch_once_and_serial_calls_in_full():
    segs = [{"wall_time_s": 10.0, "num_output_tokens": 100},  # an earlier one-engine call
            {"wall_time_s": 4.0, "start_s": 100.0, "num_output_tokens": 40,
             "replica": {"group": "g", "rank": 0, "size": 2}},
            {"wall_time_s": 5.0, "start_s": 101.0, "num_output_tokens": 60,
             "replica": {"group": "g", "rank": 1, "size": 2}}]
    t = throughput(segs)
    assert t["generation_wall_time_s"] == pytest.approx(10.0 + 6.0)
    assert t["output_tokens_per_s"] == pytest.approx(200 / 16.0)
    assert t["data_parallel_replicas"] == 2


def test_replicas_get_their_own_gpus(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,4,5,6")
    assert gpu_groups(2, 2, "cuda") == ["3,4", "5,6"]
    assert gpu_groups(4, 1, "cuda") == ["3", "4", "5", "6"]
    assert gpu_groups(2, 1, "cpu") == [None, None]
    with pytest.raises(ValueError, match="needs 6 GPUs; 4 visible"):
        gpu_groups(3, 2, "cuda")
    assert assignment(5, 2) == [{0, 2, 4}, {1, 3}]


def test_retime_with_replicas_is_refused(tmp_path, data_dir, replicas_engine):
    with pytest.raises(ValueError, match="data_parallel_size=1"):
        runner.evaluate(config(tmp_path, data_dir, "budget=512", "baseline.retime=true",
                               "engine.data_parallel_size=2"), str(tmp_path / "r"))
    assert not os.path.exists(tmp_path / "r")


def test_real_tiny_engine_two_replicas_of_two_ranks_match_one_engine(tmp_path, data_dir):
    """The real engine end to end: a tiny random Qwen3 with a character tokenizer, loaded by
    each replica (TP=2 inside each: four rank processes), against one TP=1 engine."""
    import shutil

    from tests.engine.tiny_models import add_char_tokenizer, tiny_checkpoint
    folder = add_char_tokenizer(tiny_checkpoint("qwen3")[0])
    try:
        common = [f"model.path={folder}", "engine=fullkv", "engine.block_size=16",
                  "engine.kv_cache_tokens=4096", "sampling.max_tokens=24"]
        one = runner.evaluate(config(tmp_path, data_dir, *common), str(tmp_path / "one"))
        two = runner.evaluate(config(tmp_path, data_dir, *common, "engine.data_parallel_size=2",
                                     "engine.tensor_parallel_size=2"), str(tmp_path / "two"))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    rows = same_samples(tmp_path / "one", tmp_path / "two")
    assert len(rows) == 15 and two["complete"] and two["data_parallel_replicas"] == 2
    assert len({r["completion"] for r in rows.values()}) > 5  # seeded samples differ


INTERRUPTED_RUN = """
import sys
sys.path[:0] = {paths!r}
import fake_engine
from harness_fixtures import config
from tasks import evaluate as runner
runner.make_engine, runner.make_tokenizer = fake_engine.make_engine, fake_engine.make_tokenizer
if __name__ == "__main__":
    import pathlib
    tmp = pathlib.Path({tmp!r})
    runner.evaluate(config(tmp, {data!r}, "engine=fullkv", "engine.data_parallel_size=2"),
                    str(tmp / "run"))
"""


def test_ctrl_c_stops_every_replica_and_keeps_their_samples(tmp_path, data_dir):
    import signal
    import subprocess
    import sys
    import time

    from harness_fixtures import ROOT
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    script = tmp_path / "run.py"
    script.write_text(INTERRUPTED_RUN.format(paths=[ROOT, os.path.join(ROOT, "tests", "harness")],
                                             tmp=str(tmp_path), data=data_dir))
    env = {**os.environ, "FAKE_STEP_S": "0.05", "FAKE_PID_DIR": str(pid_dir)}
    # SIG_DFL, not an inherited SIG_IGN (`cmd &` launchers): Python must raise KeyboardInterrupt
    proc = subprocess.Popen([sys.executable, str(script)], env=env, stderr=subprocess.PIPE,
                            text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 120
        while len(os.listdir(pid_dir)) < 2:
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() < deadline, "replicas never started"
            time.sleep(0.2)
        time.sleep(0.5)
        pids = [int((pid_dir / r).read_text()) for r in ("0", "1")]
        proc.send_signal(signal.SIGINT)  # to the parent only: it passes it on
        err = proc.communicate(timeout=90)[1]
    finally:
        proc.kill()
    assert proc.returncode != 0 and "KeyboardInterrupt" in err
    assert not any(os.path.exists(f"/proc/{p}") for p in pids), "replicas left behind"
    segs = [json.loads(line) for line in open(tmp_path / "run" / "generation_stats.jsonl")]
    segs = [s for s in segs if s.get("event") != "open"]  # closed records
    assert sorted(s["replica"]["rank"] for s in segs) == [0, 1]
    assert all(s["interrupted"] for s in segs)  # each recorded its cut segment
