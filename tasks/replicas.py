"""Data-parallel replicas (`engine.data_parallel_size=N`): the problems of one run split over
N engines, each in its own process (on a GPU node, its own GPUs through
CUDA_VISIBLE_DEVICES: replica r gets visible GPUs r*T .. r*T+T-1 for T =
tensor_parallel_size).

The k-th unfinished problem goes to replica k % N (neighbouring problems, often of similar
difficulty, are spread out; on a resume only what is missing is shared out). Seeds depend on
the problem's index in the whole run, so each sample is the one a single engine would draw.
Every replica appends its finished samples to the run's one samples.jsonl (whole lines under
a lock, tasks/samples.py) and its timed segment, tagged with the launch, to
generation_stats.jsonl; throughput counts a launch's wall time once
(tasks/summary.py). A replica that fails does not stop the others: their samples are kept,
the run then raises, and a rerun generates what is missing, whichever replica died.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import queue
import signal
import sys
import traceback
import uuid

from tasks.prepare import ConfigError


class ReplicaError(RuntimeError):
    """One or more replicas failed; their finished samples are on disk."""


def assignment(todo: list[int] | int, size: int) -> list[set[int]]:
    """Problem indices per replica: the k-th problem still to do goes to replica k % size
    (an int: all of range(todo)). On a resume only unfinished problems are shared out, so
    the replicas stay balanced and none loads a model for nothing."""
    todo = list(range(todo)) if isinstance(todo, int) else list(todo)
    return [set(todo[r::size]) for r in range(size)]


def unfinished(problems, n: int, run_dir: str) -> list[int]:
    """Indices of the problems with a sample missing from the run's samples.jsonl."""
    from tasks.samples import SAMPLES, read_samples
    have = read_samples(os.path.join(run_dir, SAMPLES)).keys()
    return [j for j, p in enumerate(problems) if any((p.id, i) not in have for i in range(n))]


def gpu_groups(size: int, per_replica: int, device: str) -> list[str | None]:
    """CUDA_VISIBLE_DEVICES of each replica (None: leave the environment as it is)."""
    if device != "cuda":
        return [None] * size
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        ids = [v.strip() for v in visible.split(",") if v.strip()]
    else:
        import torch
        ids = [str(i) for i in range(torch.cuda.device_count())]
    need = size * per_replica
    if len(ids) < need:
        raise ConfigError(f"engine.data_parallel_size={size} x tensor_parallel_size="
                          f"{per_replica} needs {need} GPUs; {len(ids)} visible ({ids})")
    return [",".join(ids[r * per_replica:(r + 1) * per_replica]) for r in range(size)]


@contextlib.contextmanager
def _environ(changes: dict):
    """os.environ with `changes` while a child is spawned (it copies the environment, so
    CUDA_VISIBLE_DEVICES is set before anything in it imports torch)."""
    old = {k: os.environ.get(k) for k in changes}
    os.environ.update({k: v for k, v in changes.items() if v is not None})
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run_replicas(factory, model_id: str, kwargs: dict, problems, prompts, sampling_cfg,
                 seed: int, run_dir: str, job: str, tokenizer_digest: str, device: str,
                 size: int, use_tqdm: bool) -> list[dict | None]:
    """Generate the missing samples of `problems` with `size` engines built by
    `factory(model_id, kwargs) -> (llm, SamplingParams class)` (picklable: a module-level
    function). Returns each replica's segment (None: it had nothing to do)."""
    import multiprocessing as mp
    ctx = mp.get_context("spawn")  # CUDA cannot be used in a forked child
    gpus = gpu_groups(size, int(kwargs.get("tensor_parallel_size") or 1), device)
    group = uuid.uuid4().hex[:12]
    results = ctx.Queue()
    sampling = {k: getattr(sampling_cfg, k) for k in ("n", "temperature", "top_p", "max_tokens")}
    procs = []
    threads = None if device == "cuda" else str(max(1, (os.cpu_count() or 1) // size))
    shares = [share for share in assignment(unfinished(problems, sampling["n"], run_dir), size)
              if share]
    size = len(shares)
    for rank, only in enumerate(shares):
        env = {"CUDA_VISIBLE_DEVICES": gpus[rank], "ZIPAGE_DP_RANK": str(rank),
               "ZIPAGE_DP_SIZE": str(size),
               "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS") or threads}
        replica = {"group": group, "rank": rank, "size": size}
        args = (factory, model_id, kwargs, problems, prompts, sampling, seed, run_dir, job,
                only, replica, tokenizer_digest, use_tqdm and rank == 0, os.getpid(), results)
        with _environ(env):
            p = ctx.Process(target=_replica_main, args=args, name=f"zipage-dp{rank}", daemon=False)
            p.start()
        procs.append(p)
    print(f"data parallel: {size} replicas" + (f" on GPUs {gpus}" if gpus[0] else ""), flush=True)
    try:
        return _wait(procs, results)
    except BaseException:
        _stop(procs)
        raise


def _wait(procs, results) -> list[dict | None]:
    done: dict[int, tuple] = {}
    while len(done) < len(procs):
        try:
            rank, ok, payload = results.get(timeout=0.5)
            done[rank] = (ok, payload)
            continue
        except queue.Empty:
            pass
        for rank, p in enumerate(procs):
            if rank not in done and p.exitcode is not None:
                try:  # its result may be just behind its exit
                    r, ok, payload = results.get(timeout=2.0)
                    done[r] = (ok, payload)
                except queue.Empty:
                    done[rank] = (False, f"exited with code {p.exitcode} without a result")
    for p in procs:
        p.join()
    failed = {r: msg for r, (ok, msg) in sorted(done.items()) if not ok}
    if failed:
        text = "\n".join(f"replica {r} of {len(procs)} failed: {msg}" for r, msg in failed.items())
        raise ReplicaError(f"{text}\nthe other replicas' samples and every finished sample are "
                           f"saved; rerun the same command to generate the rest")
    return [done[r][1] for r in range(len(procs))]


def _stop(procs, grace_s: float = 30.0) -> None:
    """Interrupted (Ctrl-C, an error here): pass SIGINT on, so each replica records its
    segment and exits; terminate any still running after `grace_s`."""
    for p in procs:
        if p.exitcode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGINT)
    for p in procs:
        p.join(grace_s)
        if p.exitcode is None:
            p.terminate()
            p.join(5)


def _replica_main(factory, model_id, kwargs, problems, prompts, sampling, seed, run_dir, job,
                  only, replica, tokenizer_digest, use_tqdm, parent_pid, results):
    _die_with_parent(parent_pid)
    rank = replica["rank"]
    try:
        from types import SimpleNamespace

        from tasks import identity as ident
        from tasks.engines import free_engine
        from tasks.generate import generate_missing
        llm, sampling_cls = factory(model_id, kwargs)
        try:
            got = ident.tokenizer_digest(llm.tokenizer)
            if got != tokenizer_digest:
                raise RuntimeError(f"replica {rank}'s tokenizer ({got}) is not the one the "
                                   f"prompts were built with ({tokenizer_digest})")
            seg = generate_missing(llm, None, problems, prompts, sampling_cls,
                                   SimpleNamespace(**sampling), seed, run_dir, job,
                                   use_tqdm=use_tqdm, only=only, replica=replica)
        finally:
            free_engine(llm)
        results.put((rank, True, seg))
    except KeyboardInterrupt:
        results.put((rank, False, "interrupted"))
    except BaseException:
        results.put((rank, False, traceback.format_exc()))
        sys.exit(1)


def _die_with_parent(parent_pid: int) -> None:
    """A replica never outlives the run (Linux): its engine holds a GPU."""
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() != parent_pid:
            os._exit(1)
