"""LLM(tensor_parallel_size=2) on the CPU (gloo, two rank processes) against the one-process
engine: the same tokens, greedy and seeded sampling, with compression on and off; two
engines at once; and no rank process left after shutdown, exit, a dead rank or Ctrl-C."""
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

from tests.distributed.helpers import assert_gone
from tests.engine.tiny_models import random_prompts, tiny_checkpoint
from zipage import LLM, SamplingParams
from zipage.distributed import RankError

PROMPTS = random_prompts([5, 40, 70, 12], vocab=384)
OPTIONS = dict(block_size=16, kv_cache_tokens=4096, max_num_batched_tokens=64)
GREEDY = SamplingParams(temperature=0.0, max_tokens=48, ignore_eos=True)
SAMPLED = SamplingParams(temperature=0.8, top_p=0.9, max_tokens=24, seed=5, n=2, ignore_eos=True)


@pytest.fixture(scope="module")
def folder():
    path, _ = tiny_checkpoint("qwen3")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def run(folder, tp, budget, prompts=PROMPTS, params=GREEDY, **extra):
    llm = LLM(folder, tensor_parallel_size=tp, budget=budget, **OPTIONS, **extra)
    try:
        outs = llm.generate(prompts, params, use_tqdm=False)
        return [[c.token_ids for c in o.outputs] for o in outs], llm.last_stats
    finally:
        llm.shutdown()


@pytest.mark.parametrize("budget", [None, 32], ids=["fullkv", "compressed"])
def test_two_ranks_generate_the_tokens_of_one(folder, budget):
    want, stats1 = run(folder, 1, budget)
    got, stats2 = run(folder, 2, budget)
    assert len({t for o in want for t in o[0]}) > 10, "degenerate reference"
    assert got == want
    if budget is not None:  # every prompt but the first outgrows the cap (3 blocks of 16)
        assert stats2.num_compressions == stats1.num_compressions >= 8


def test_seeded_sampling_and_async_scheduling_match_one_rank(folder):
    want, _ = run(folder, 1, 32, params=SAMPLED)
    got, _ = run(folder, 2, 32, params=SAMPLED, async_scheduling=True)
    assert got == want
    assert want[0][0] != want[0][1]  # two different samples per prompt


def test_two_engines_at_once_do_not_collide(folder):
    """Two tensor-parallel engines alive together in one process, built and run at the same
    time from two threads: each has its own ranks and rendezvous, and each is right."""
    want, _ = run(folder, 1, None)
    out, errors = {}, []

    def job(name, prompts):
        try:
            out[name] = run(folder, 2, None, prompts=prompts)[0]
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=job, args=("a", PROMPTS)),
               threading.Thread(target=job, args=("b", PROMPTS[::-1]))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors
    assert out["a"] == want and out["b"] == want[::-1]


def test_shutdown_leaves_no_rank_process(folder):
    llm = LLM(folder, tensor_parallel_size=2, **OPTIONS)
    pids = llm.runner.pids
    assert len(pids) == 2 and all(os.path.exists(f"/proc/{p}") for p in pids)
    store_dir = llm.runner.ranks.dir
    llm.shutdown()
    assert_gone(pids)
    assert not os.path.exists(store_dir)


def test_a_dead_rank_stops_the_engine_with_its_name(folder):
    llm = LLM(folder, tensor_parallel_size=2, **OPTIONS)
    pids = llm.runner.pids
    os.kill(pids[1], signal.SIGKILL)  # the OOM killer, a segfault
    t0 = time.monotonic()
    with pytest.raises(RankError, match="rank 1 of 2 exited with code -9"):
        llm.generate(PROMPTS, GREEDY, use_tqdm=False)
    assert time.monotonic() - t0 < 30
    assert_gone(pids)  # rank 0 (waiting on its dead peer) was stopped too
    with pytest.raises(RankError, match="failed earlier"):
        llm.generate(PROMPTS, GREEDY, use_tqdm=False)
    llm.shutdown()


def test_interrupted_generate_leaves_the_engine_usable(folder):
    """Ctrl-C during a generate (here from on_sample): the ranks stay in step with the engine,
    and the next generate gives the full answer."""
    want, _ = run(folder, 1, 32)
    llm = LLM(folder, tensor_parallel_size=2, budget=32, **OPTIONS)
    try:
        def interrupt(*_):
            raise KeyboardInterrupt
        with pytest.raises(KeyboardInterrupt):
            llm.generate(PROMPTS, GREEDY, use_tqdm=False, on_sample=interrupt)
        outs = llm.generate(PROMPTS, GREEDY, use_tqdm=False)
        assert [[c.token_ids for c in o.outputs] for o in outs] == want
    finally:
        llm.shutdown()


SCRIPT = """
import os, sys, time
from zipage import LLM, SamplingParams
if __name__ == "__main__":
    llm = LLM(sys.argv[1], tensor_parallel_size=2, block_size=16, kv_cache_tokens=4096)
    with open(sys.argv[2], "w") as f:
        f.write(" ".join(map(str, llm.runner.pids)))
    if sys.argv[3] == "exit":
        sys.exit(0)  # no shutdown(): the interpreter's exit stops the ranks
    llm.generate([[1, 2, 3]] * 64, SamplingParams(max_tokens=100000, ignore_eos=True),
                 use_tqdm=False)  # interrupted long before it ends
"""


@pytest.mark.parametrize("how", ["exit", "sigint"])
def test_no_orphans_when_the_engine_process_exits_or_is_interrupted(folder, tmp_path, how):
    script, pid_file = tmp_path / "engine.py", tmp_path / "pids"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    # A launcher that ignores SIGINT (`cmd &` in a script) would pass SIG_IGN on, and Python
    # then installs no KeyboardInterrupt handler: give the child the default disposition.
    proc = subprocess.Popen([sys.executable, str(script), folder, str(pid_file), how], env=env,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 120
        while not (pid_file.exists() and pid_file.read_text()):
            assert proc.poll() is None or how == "exit", proc.stderr.read()
            assert time.monotonic() < deadline, "engine never started"
            time.sleep(0.2)
        pids = [int(p) for p in pid_file.read_text().split()]
        if how == "sigint":
            time.sleep(2.0)  # well inside generate
            proc.send_signal(signal.SIGINT)
        err = proc.communicate(timeout=60)[1]
    finally:
        proc.kill()
    if how == "sigint":
        assert proc.returncode != 0 and "KeyboardInterrupt" in err
    else:
        assert proc.returncode == 0, err
    deadline = time.monotonic() + 15
    while any(os.path.exists(f"/proc/{p}") for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert_gone(pids)


@pytest.mark.slow  # three processes load the GGUF: minutes on a small CPU
def test_smollm2_three_ranks_generate_the_tokens_of_one():
    """The real model (GGUF) at TP=3 (9 query, 3 KV heads), compressing: a few tokens."""
    prompt = ("Question: Natalia sold clips to 48 of her friends in April, and then she sold "
              "half as many clips in May. How many clips did she sell altogether? Answer:")
    params = SamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True)
    outs = {}
    for tp in (1, 3):
        llm = LLM("smollm2-135m", tensor_parallel_size=tp, budget=16, block_size=16,
                  kv_cache_tokens=2048, max_model_len=512, num_sink_tokens=0)  # budget = W
        try:
            out = llm.generate([prompt], params, use_tqdm=False)[0]
            outs[tp] = (out.outputs[0].token_ids, llm.last_stats.num_compressions)
        finally:
            llm.shutdown()
    assert outs[3] == outs[1]
    assert outs[1][1] >= 1  # the prompt outgrows the cap (2 blocks): it compressed


def test_the_pool_is_the_smallest_any_rank_can_hold(folder):
    """Rank 1 has room for fewer blocks (its own GPU, other processes on it): both ranks
    allocate that many, each with its own half of the KV heads."""
    from tests.distributed import rank_fns
    from tests.distributed.helpers import run_checked
    plans = run_checked(rank_fns.runner_pool, 2, folder, [4096, 1024])
    assert [p["blocks"] for p in plans] == [64, 64]
    assert [p["kv_shape"] for p in plans] == [(2, 2, 64, 16, 1, 16)] * 2  # 1 of 2 KV heads


def test_a_size_that_does_not_split_the_model_fails_before_any_process(folder, monkeypatch):
    import zipage.distributed.tp_runner as tp_runner

    def no_ranks(*a, **k):
        raise AssertionError("rank processes were started")
    monkeypatch.setattr(tp_runner, "TPRunner", no_ranks)
    with pytest.raises(ValueError, match="tensor_parallel_size=3 must divide num_attention_heads=4"):
        LLM(folder, tensor_parallel_size=3, **OPTIONS)
    with pytest.raises(ValueError, match="positive integer"):
        LLM(folder, tensor_parallel_size=0, **OPTIONS)
