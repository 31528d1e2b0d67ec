"""Run prioritised tasks in worker processes within a wall-clock budget.

A task is a call `module:function(**kwargs)` that writes its own results to disk (a finished
cell survives whatever happens later). Tasks start in strict priority order, as many at once
as there are workers and as fit the memory limit: while a task waits for its dependencies or
for memory, no task of a later priority starts; one whose dependency failed is skipped. A
task whose estimated duration would end past the deadline is dropped (a later, shorter task
may still start); at the deadline the tasks still running are killed (their cells are lost;
nothing half-written stays: cells are written atomically). The estimate is
`overhead_s + steps * rate`, the rate (seconds per step) of that kind of task measured on the
finished ones (1.25x, for safety), a prior before any finished.

Workers are spawned processes (CUDA cannot be forked); each keeps its memoised model loading
across tasks. A worker's output goes to `<log_dir>/worker<i>.log`.
"""
import importlib
import multiprocessing as mp
import os
import queue
import sys
import time
import traceback
from dataclasses import dataclass, field

SAFETY = 1.25


@dataclass
class Task:
    name: str
    fn: str  # "module:function"
    kwargs: dict = field(default_factory=dict)
    priority: int = 1
    kind: str = "cell"  # tasks of one kind share a measured rate
    steps: int = 1  # work units (e.g. decode steps) for the estimate
    mem_gb: float = 0.0
    after: tuple = ()  # names of tasks that must finish first


@dataclass
class Outcome:
    status: str  # ok | failed | skipped | not started | killed
    seconds: float = 0.0
    detail: str = ""
    result: object = None


class Estimator:
    def __init__(self, prior_rate: dict, overhead_s: float):
        self.prior, self.overhead_s, self.done = dict(prior_rate), overhead_s, {}

    def rate(self, kind: str) -> float:
        runs = self.done.get(kind)
        if not runs:
            return self.prior.get(kind, max(self.prior.values(), default=1.0))
        return SAFETY * sum(s for s, _ in runs) / sum(n for _, n in runs)

    def seconds(self, task: Task) -> float:
        return self.overhead_s + task.steps * self.rate(task.kind)

    def record(self, task: Task, seconds: float) -> None:
        self.done.setdefault(task.kind, []).append((max(seconds - self.overhead_s, 0.0),
                                                    max(task.steps, 1)))


def _call(fn: str, kwargs: dict):
    module, name = fn.split(":")
    return getattr(importlib.import_module(module), name)(**kwargs)


def _worker(index: int, inbox, outbox, log_dir: str, env: dict, init: str | None) -> None:
    os.environ.update(env)
    log = open(os.path.join(log_dir, f"worker{index}.log"), "a", buffering=1)
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    sys.stdout = sys.stderr = log
    if init:
        try:  # e.g. load the model once while the first tasks wait for their inputs
            _call(init, {})
        except Exception:
            traceback.print_exc()
    while True:
        task = inbox.get()
        if task is None:
            return
        print(f"=== {task.name} ({time.strftime('%H:%M:%S')})", flush=True)
        t0 = time.perf_counter()
        try:
            result = _call(task.fn, task.kwargs)
            outbox.put((index, task.name, "ok", time.perf_counter() - t0, "", result))
        except BaseException:  # the task failed, the worker lives on
            tb = traceback.format_exc()
            print(tb, flush=True)
            outbox.put((index, task.name, "failed", time.perf_counter() - t0,
                        tb.strip().splitlines()[-1], None))


class _Pool:
    def __init__(self, n: int, log_dir: str, env: dict, init: str | None):
        self.ctx = mp.get_context("spawn")
        self.outbox = self.ctx.Queue()
        self.log_dir, self.env, self.init = log_dir, env, init
        self.slots = [self._start(i) for i in range(n)]

    def _start(self, i: int):
        inbox = self.ctx.Queue()
        p = self.ctx.Process(target=_worker, args=(i, inbox, self.outbox, self.log_dir, self.env,
                                                        self.init),
                             daemon=True)
        p.start()
        return dict(proc=p, inbox=inbox, task=None, t0=0.0)

    def restart(self, i: int) -> None:
        self.kill(i)
        self.slots[i] = self._start(i)

    def kill(self, i: int) -> None:
        p = self.slots[i]["proc"]
        if p.is_alive():
            p.terminate()
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join(5)

    def close(self) -> None:
        for i, s in enumerate(self.slots):
            if s["task"] is None and s["proc"].is_alive():
                s["inbox"].put(None)
        for i, s in enumerate(self.slots):
            s["proc"].join(10)
            self.kill(i)


def run(tasks: list[Task], workers: int, max_wall_s: float, log_dir: str,
        estimator: Estimator, mem_limit_gb: float = float("inf"), env: dict | None = None,
        on_event=print, clock=time.monotonic, init: str | None = None,
        fail_fast: int = 3) -> dict[str, Outcome]:
    """Run `tasks` (see the module docstring); name -> Outcome for every task."""
    os.makedirs(log_dir, exist_ok=True)
    names = [t.name for t in tasks]
    if len(set(names)) != len(names):
        raise ValueError("task names must be unique")
    unknown = {d for t in tasks for d in t.after} - set(names)
    if unknown:
        raise ValueError(f"unknown dependencies: {sorted(unknown)}")
    start = clock()
    pending = sorted(tasks, key=lambda t: t.priority)  # stable: plan order within a priority
    outcomes: dict[str, Outcome] = {}
    pool = _Pool(min(workers, len(tasks)) or 1, log_dir, env or {}, init)
    try:
        while pending or any(s["task"] for s in pool.slots):
            elapsed = clock() - start
            if elapsed >= max_wall_s:
                break
            _skip_failed_dependencies(pending, outcomes, on_event)
            _drop_failing_kinds(tasks, pending, outcomes, fail_fast, on_event)
            _start_ready(pool, pending, outcomes, estimator, max_wall_s - elapsed,
                         mem_limit_gb, on_event)
            if not any(s["task"] for s in pool.slots):
                if pending:  # nothing runs and nothing can start (memory limit too low)
                    for t in pending:
                        outcomes[t.name] = Outcome("not started", detail="cannot start: "
                                                   f"needs {t.mem_gb:.0f} GB > limit")
                    pending.clear()
                break
            _collect(pool, outcomes, estimator, start, clock, max_wall_s, on_event)
        for i, s in enumerate(pool.slots):
            if s["task"] is not None:
                pool.kill(i)
                outcomes[s["task"].name] = Outcome("killed", clock() - s["t0"], "deadline")
                on_event(f"killed at the deadline: {s['task'].name}")
                s["task"] = None
        for t in pending:
            outcomes.setdefault(t.name, Outcome("not started", detail="time budget"))
    finally:
        pool.close()
    return {n: outcomes.get(n, Outcome("not started")) for n in names}


def _drop_failing_kinds(tasks, pending, outcomes, fail_fast, on_event) -> None:
    """After `fail_fast` failures of a kind and no success, its other tasks would fail too
    (a broken kernel, a missing file): they are not started, the time goes to other kinds."""
    kind = {t.name: t.kind for t in tasks}
    for k in {t.kind for t in pending}:
        done = [o.status for n, o in outcomes.items() if kind[n] == k]
        if done.count("failed") >= fail_fast and "ok" not in done:
            for t in [t for t in pending if t.kind == k]:
                pending.remove(t)
                outcomes[t.name] = Outcome("skipped", detail=f"{fail_fast} {k} tasks failed, "
                                                             "none succeeded")
            on_event(f"{k} tasks: {fail_fast} failed and none succeeded; the rest skipped")


def _skip_failed_dependencies(pending, outcomes, on_event) -> None:
    for t in list(pending):
        bad = [d for d in t.after if d in outcomes and outcomes[d].status != "ok"]
        if bad:
            pending.remove(t)
            outcomes[t.name] = Outcome("skipped", detail=f"dependency {bad[0]} "
                                                        f"{outcomes[bad[0]].status}")
            on_event(f"skipped {t.name}: {outcomes[t.name].detail}")


def _start_ready(pool, pending, outcomes, estimator, remaining, mem_limit_gb, on_event) -> None:
    """Start tasks on idle workers in strict priority order: while a task waits (for its
    dependencies or for memory), no task of a later priority starts. A task whose estimate
    does not fit the remaining time is dropped (time only runs out)."""
    for i, slot in enumerate(pool.slots):
        if slot["task"] is not None:
            continue
        in_use = sum(s["task"].mem_gb for s in pool.slots if s["task"] is not None)
        waiting = None  # priority of the first task that must wait
        for t in list(pending):
            if waiting is not None and t.priority > waiting:
                break
            if estimator.seconds(t) > remaining:
                pending.remove(t)
                outcomes[t.name] = Outcome("not started", detail=f"estimate "
                                           f"{estimator.seconds(t):.0f} s > {remaining:.0f} s left")
                on_event(f"not started {t.name}: {outcomes[t.name].detail}")
                continue
            ready = all(outcomes.get(d, Outcome("")).status == "ok" for d in t.after)
            if not ready or in_use + t.mem_gb > mem_limit_gb:
                waiting = t.priority if waiting is None else waiting
                continue
            pending.remove(t)
            slot.update(task=t, t0=time.monotonic())
            slot["inbox"].put(t)
            on_event(f"start {t.name} on worker {i} (estimate {estimator.seconds(t):.0f} s)")
            break


def _collect(pool, outcomes, estimator, start, clock, max_wall_s, on_event) -> None:
    try:
        msg = pool.outbox.get(timeout=max(0.05, min(1.0, max_wall_s - (clock() - start))))
    except queue.Empty:
        for i, s in enumerate(pool.slots):  # a worker that died takes its task with it
            if s["task"] is not None and not s["proc"].is_alive():
                t = s["task"]
                outcomes[t.name] = Outcome("failed", time.monotonic() - s["t0"],
                                           f"worker died (exit {s['proc'].exitcode})")
                on_event(f"FAILED {t.name}: {outcomes[t.name].detail}")
                s["task"] = None
                pool.restart(i)
        return
    i, name, status, seconds, detail, result = msg
    t = pool.slots[i]["task"]
    pool.slots[i]["task"] = None
    outcomes[name] = Outcome(status, seconds, detail, result)
    if status == "ok":
        estimator.record(t, seconds)
    on_event(f"{status} {name}: {seconds:.0f} s"
             + (f" ({detail})" if detail else ""))
