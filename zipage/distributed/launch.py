"""One process per rank, started and stopped so that none is ever left behind.

Each rank joins the group (a FileStore in a fresh temporary directory: no port, no shared
memory name) and runs ``fn(tp, *args)``. If one rank fails, the others are terminated at
once: a rank blocked in a collective waiting for a dead peer would otherwise hang until the
collective's timeout. Ranks also die with the process that started them (Linux).
"""
import ctypes
import os
import pickle
import queue
import shutil
import signal
import sys
import tempfile
import time
import traceback

import torch.multiprocessing as mp

from zipage.distributed.group import destroy_tp_group, init_tp_group, rank_device


class RankError(RuntimeError):
    """A rank raised, crashed or timed out; the message carries its traceback."""


class RankProcesses:
    """Processes for ranks ``first..world_size-1`` of one group. Rank 0 may be the caller
    itself (first=1): it joins with ``init_tp_group(0, world_size, self.store_path, device)``."""

    def __init__(self, world_size: int, device_type: str = "cpu"):
        self.world_size, self.device_type = world_size, device_type
        self.ctx = mp.get_context("spawn")  # CUDA cannot be used in a forked child
        self.dir = tempfile.mkdtemp(prefix="zipage-tp-")
        self.store_path = os.path.join(self.dir, "store")
        self.results = self.ctx.Queue()
        self.procs: dict[int, mp.Process] = {}

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs.values()]

    def start(self, fn, *args, first: int = 0, rank_args: dict | None = None) -> None:
        """Start ranks first..world_size-1 running ``fn(tp, *args, *rank_args[rank])``;
        `fn` and the arguments must be picklable (pipe ends are)."""
        for rank in range(first, self.world_size):
            own = tuple((rank_args or {}).get(rank, ()))
            p = self.ctx.Process(target=_rank_main, daemon=True, name=f"zipage-tp-rank{rank}",
                                 args=(rank, self.world_size, self.store_path, self.device_type,
                                       os.getpid(), fn, args + own, self.results))
            p.start()
            self.procs[rank] = p

    def wait(self, timeout: float | None = None) -> list:
        """Results of the started ranks in rank order; RankError at the first failure."""
        deadline = None if timeout is None else time.monotonic() + timeout
        done: dict[int, object] = {}
        while len(done) < len(self.procs):
            try:
                rank, ok, payload = self.results.get(timeout=0.2)
            except queue.Empty:
                self._check_alive(done, deadline, timeout)
                continue
            if not ok:
                raise self._failure(rank, payload)
            done[rank] = pickle.loads(payload)
        return [done[r] for r in sorted(done)]

    def _failure(self, rank: int, payload: str) -> RankError:
        """The error for a failed rank. A peer that crashed is named first: it is usually the
        cause (its peers then fail in their collectives with 'connection closed')."""
        end = time.monotonic() + 1.0
        crashed = []
        for r, p in self.procs.items():
            if r != rank:
                p.join(max(0.0, end - time.monotonic()))
                if p.exitcode not in (None, 0):
                    crashed.append(f"rank {r} of {self.world_size} exited with code {p.exitcode}; ")
        return RankError(f"{''.join(crashed)}rank {rank} of {self.world_size} failed:\n{payload}")

    def _check_alive(self, done, deadline, timeout):
        for rank, p in self.procs.items():
            if rank not in done and p.exitcode is not None:
                try:  # its result may have arrived just before it exited
                    r, ok, payload = self.results.get(timeout=1.0)
                except queue.Empty:
                    raise RankError(f"rank {rank} of {self.world_size} exited with code "
                                    f"{p.exitcode} without a result") from None
                if not ok:
                    raise self._failure(r, payload)
                done[r] = pickle.loads(payload)
                return
        if deadline is not None and time.monotonic() > deadline:
            raise RankError(f"ranks {sorted(set(self.procs) - set(done))} gave no result "
                            f"within {timeout} s")

    def close(self, grace_s: float = 10.0) -> None:
        """Join every rank (terminating any still running after `grace_s`), remove the store."""
        end = time.monotonic() + grace_s
        for p in self.procs.values():
            p.join(max(0.0, end - time.monotonic()))
        for p in self.procs.values():
            if p.is_alive():
                p.terminate()
                p.join(5)
            if p.is_alive():
                p.kill()
                p.join()
        self.results.close()
        self.results.join_thread()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *_):
        # After a failure the surviving ranks may be stuck in a collective: stop them now.
        self.close(grace_s=0.0 if exc_type is not None else 10.0)


def run_ranks(fn, world_size: int, *args, device_type: str = "cpu",
              timeout: float | None = None) -> list:
    """Run ``fn(tp, *args)`` on every rank of a new group, each in its own process."""
    with RankProcesses(world_size, device_type) as ranks:
        ranks.start(fn, *args)
        return ranks.wait(timeout)


def _rank_main(rank, world_size, store_path, device_type, parent_pid, fn, args, results):
    _die_with_parent(parent_pid)
    try:
        tp = init_tp_group(rank, world_size, store_path, rank_device(device_type, rank))
        # Pickled here by value: a tensor sent through the queue as-is would be shared
        # memory that vanishes when this process exits.
        results.put((rank, True, pickle.dumps(fn(tp, *args))))
    except BaseException:
        results.put((rank, False, traceback.format_exc()))
    finally:
        destroy_tp_group()


def _die_with_parent(parent_pid: int) -> None:
    if sys.platform != "linux":
        return
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:  # the parent died before the signal was armed
        os._exit(1)
