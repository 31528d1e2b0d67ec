"""Process groups on the CPU (gloo): private rendezvous, collectives, and failures that stop
every rank and leave no process behind."""
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace

import pytest

from tests.distributed import rank_fns
from tests.engine.tiny_models import tiny_config
from tests.distributed.helpers import run_checked
from zipage.distributed import RankError
from zipage.models.spec import spec_from_hf_config


def test_two_groups_on_one_host_do_not_collide():
    """Two engines started at the same moment each get their own rendezvous (no fixed port),
    and their collectives compute what they should."""
    out = {}
    threads = [threading.Thread(target=lambda v=v: out.__setitem__(v, run_checked(
        rank_fns.group_facts, 2, v))) for v in (100, 200)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    for v in (100, 200):
        assert [r["rank"] for r in out[v]] == [0, 1]
        for r in out[v]:  # sum, gather in rank order, minimum over ranks
            assert (r["sum"], r["gather"], r["min"]) == (2 * v + 1, [v, v + 1], v)


def test_one_rank_raising_stops_the_rank_waiting_for_it():
    """Rank 1 cannot build SmolLM2's shape (9 heads, 3 KV heads) at TP=2; rank 0 is already
    waiting in a collective. The caller gets the clear error, and both processes are gone."""
    spec = replace(spec_from_hf_config(tiny_config("llama")), num_heads=9, num_kv_heads=3,
                   head_dim=16, hidden_size=144)
    t0, pids = time.monotonic(), []
    with pytest.raises(RankError, match=r"(?s)rank 1 of 2 failed.*ValueError: tensor_parallel_"
                       r"size=2 must divide num_attention_heads=9, num_key_value_heads=3"):
        run_checked(rank_fns.build_on_rank_one, 2, spec, pids=pids)
    assert time.monotonic() - t0 < 60  # not the collective's 10-minute timeout
    assert len(pids) == 2


def test_a_rank_crashing_without_a_word_is_reported():
    with pytest.raises(RankError, match="rank 1 of 2 exited with code 3"):
        run_checked(rank_fns.crash_on_rank_one, 2)


def test_ranks_die_with_the_process_that_started_them():
    """The engine process killed outright (no cleanup runs) takes its ranks with it."""
    folder = tempfile.mkdtemp()
    pid_file = os.path.join(folder, "pid")
    code = ("from tests.distributed import rank_fns\nfrom zipage.distributed import run_ranks\n"
            f"run_ranks(rank_fns.sleep_forever, 2, {pid_file!r})\n")
    # TMPDIR: the killed parent cannot remove its rendezvous directory; the test does.
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "TMPDIR": folder}
    parent = subprocess.Popen([sys.executable, "-c", code], env=env)
    try:
        deadline = time.monotonic() + 120
        while not all(os.path.exists(f"{pid_file}.{r}") for r in (0, 1)):
            assert time.monotonic() < deadline and parent.poll() is None, "ranks never started"
            time.sleep(0.2)
        time.sleep(0.2)
        pids = [int(open(f"{pid_file}.{r}").read()) for r in (0, 1)]
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(p) for p in pids), "ranks outlived their parent"
    shutil.rmtree(folder)


def _alive(pid: int) -> bool:
    """Running (a zombie whose parent died is reaped by init and disappears)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
