"""The engine's runner for tensor parallelism: N rank processes behind the runner protocol
(zipage/engine/llm_engine.py). The engine process keeps the scheduler and block manager and
joins no process group; every rank (rank 0 included) is its own process (tp_worker.py), so
two engines in one process or on one host never share a group, a port or a name.

``launch`` pickles the step once and writes it to every rank's pipe; ``collect`` waits for
rank 0's StepResult (all ranks sampled the same tokens). While waiting it also watches every
rank's pipe and process: a rank that fails or dies stops the engine with RankError naming
it, and the other ranks are terminated. Ctrl-C is handled here (ranks ignore it): a message
is never half-written to a rank, so the engine stays usable after an interrupted generate.
"""
import contextlib
import pickle
import queue
import signal
import threading
import time
import weakref
from multiprocessing.connection import wait

from zipage.distributed.launch import RankError, RankProcesses
from zipage.distributed.tp_worker import RankSetup, serve


@contextlib.contextmanager
def deferred_interrupt():
    """Hold a Ctrl-C (SIGINT) until the block is done, then raise it (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = []
    previous = signal.signal(signal.SIGINT, lambda *a: caught.append(a))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if caught and callable(previous):
            previous(*caught[0])


class TPRunner:
    def __init__(self, setup: RankSetup, world_size: int, device_type: str,
                 startup_timeout_s: float = 1800.0):
        self.world_size = world_size
        self.ranks = RankProcesses(world_size, device_type)
        pipes = [self.ranks.ctx.Pipe() for _ in range(world_size)]
        self.conns = [mine for mine, _ in pipes]
        self.failure: str | None = None
        self._next_id = 0
        # Ranks stop with this runner: close(), garbage collection or interpreter exit.
        self._finalizer = weakref.finalize(self, _shutdown, self.ranks, self.conns)
        try:
            self.ranks.start(serve, setup, rank_args={r: (theirs,) for r, (_, theirs) in
                                                      enumerate(pipes)})
            for _, theirs in pipes:
                theirs.close()  # only the rank holds its end: its exit closes the pipe
            plans = self._gather_ready(startup_timeout_s)
        except BaseException:
            self.close()
            raise
        self.plan = plans[0]  # ranks agreed on the pool (TPGroup.min) before allocating it
        self.rank_plans = plans

    # -- the runner protocol ------------------------------------------------------------------
    @property
    def num_kv_blocks(self) -> int:
        return self.plan.num_blocks

    @property
    def num_query_slots(self) -> int:
        return self.plan.num_query_slots

    @property
    def pids(self) -> list[int]:
        return self.ranks.pids

    def launch(self, step, previous=None) -> int:
        self._check_usable()
        # A result left by an interrupted collect is read now: rank 0 never blocks writing
        # it while this process writes a step to rank 0. (A rank's failure surfaces here too.)
        while any(conn.poll(0) for conn in self.conns):
            self._next_message(timeout=0)
        step_id, self._next_id = self._next_id, self._next_id + 1
        data = pickle.dumps(("launch", step_id, (step, previous)), protocol=5)
        with deferred_interrupt():  # every rank gets the step, or none does
            self._send_all(data)
        return step_id

    def collect(self, step_id: int):
        self._check_usable()
        with deferred_interrupt():
            self._send_all(pickle.dumps(("collect", step_id, None), protocol=5))
        while True:
            kind, got, payload = self._next_message(timeout=None)
            if kind == "result" and got == step_id:
                return payload
            # An older step's result: its collect was interrupted; drop it.

    def close(self, grace_s: float = 10.0) -> None:
        """Stop every rank (joined, or terminated after `grace_s`) and remove the rendezvous."""
        if self._finalizer.alive:
            self._finalizer.detach()
            _shutdown(self.ranks, self.conns, grace_s)

    # -- messages from ranks ------------------------------------------------------------------
    def _send_all(self, data: bytes) -> None:
        try:
            for conn in self.conns:
                conn.send_bytes(data)
        except OSError:
            self._fail_from_ranks(1.0)

    def _gather_ready(self, timeout: float) -> list:
        plans, deadline = {}, time.monotonic() + timeout
        while len(plans) < self.world_size:
            left = deadline - time.monotonic()
            if left <= 0:
                self._fail(f"ranks {sorted(set(range(self.world_size)) - set(plans))} were "
                           f"not ready within {timeout:.0f} s")
            kind, rank, plan = self._next_message(timeout=left)
            if kind == "ready":
                plans[rank] = plan
        return [plans[r] for r in range(self.world_size)]

    def _next_message(self, timeout):
        """The next message from rank 0 (results, readiness) or any rank's failure."""
        procs = self.ranks.procs
        waitables = self.conns + [procs[r].sentinel for r in range(self.world_size)]
        ready = wait(waitables, timeout)
        if not ready:
            return ("timeout", None, None)
        conns = [c for c in ready if c in self.conns]
        if len(conns) < len(ready) and not conns:
            self._fail_from_ranks(1.0)  # a rank exited without a word
        with deferred_interrupt():  # a message is read whole
            conn = conns[0]
            try:
                msg = pickle.loads(conn.recv_bytes())
            except (EOFError, OSError):
                self._fail_from_ranks(1.0)
        if msg[0] == "error" or (msg[0] == "result" and conn is not self.conns[0]):
            self._fail_from_ranks(1.0, first=msg)
        return msg

    def _fail_from_ranks(self, settle_s: float, first=None):
        """Gather what the ranks say for `settle_s` (the first failure often makes its peers
        fail in a collective), then stop them all and raise RankError."""
        errors = {first[1]: first[2]} if first and first[0] == "error" else {}
        end = time.monotonic() + settle_s
        while time.monotonic() < end:
            for rank, conn in enumerate(self.conns):
                try:
                    while conn.poll(0):
                        msg = pickle.loads(conn.recv_bytes())
                        if msg[0] == "error":
                            errors.setdefault(msg[1], msg[2])
                except (EOFError, OSError):
                    pass
            time.sleep(0.05)
        try:  # a rank that failed before its loop (joining the group) reports here
            while True:
                rank, ok, payload = self.ranks.results.get(timeout=0.1)
                if not ok:
                    errors.setdefault(rank, payload)
        except (queue.Empty, OSError, ValueError):
            pass
        lines = []
        for r in range(self.world_size):
            code = self.ranks.procs[r].exitcode
            if r not in errors and code not in (None, 0):
                lines.append(f"rank {r} of {self.world_size} exited with code {code}")
        # Errors raised outside collectives first: a peer's 'connection closed' is a symptom.
        order = sorted(errors, key=lambda r: ("gloo" in errors[r] or "NCCL" in errors[r], r))
        lines += [f"rank {r} of {self.world_size} failed:\n{errors[r]}" for r in order]
        if lines and not errors:
            lines.append("(its stderr says why; a script that builds LLM(tensor_parallel_size>1) "
                         "needs `if __name__ == \"__main__\":`, as any program whose "
                         "processes are spawned)")
        self._fail("\n".join(lines) or "a rank stopped unexpectedly")

    def _fail(self, message: str):
        self.failure = message
        self.close(grace_s=0.0)
        raise RankError(message)

    def _check_usable(self):
        if self.failure is not None:
            raise RankError(f"this engine's ranks failed earlier; build a new LLM:\n{self.failure}")


def _shutdown(ranks: RankProcesses, conns, grace_s: float = 10.0) -> None:
    for conn in conns:
        try:
            conn.send_bytes(pickle.dumps(("stop", 0, None)))
        except (OSError, ValueError):
            pass
        conn.close()
    ranks.close(grace_s)
