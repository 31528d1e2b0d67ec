"""Process-pool map with a hard per-item deadline.

Scorers call code (sympy, candidate programs) that can hang in ways an in-process timeout
cannot stop. Workers are spawned (not forked: the parent may hold torch threads). If no item
finishes for `stall_s` seconds, every busy worker is stuck: the pool is killed, the items
that were running are retried one at a time, and those that stall alone get `on_timeout`.
Workers are recycled by giving each pool at most ITEMS_PER_WORKER items per worker (a fresh
pool per chunk), not with `max_tasks_per_child`: on Python 3.11 a pool that replaces its
workers that way deadlocks once a worker retires (a 1,200-item map never returned).
"""
from __future__ import annotations

import multiprocessing as mp
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable

ITEMS_PER_WORKER = 256  # sympy's caches grow; a fresh worker after this many items


def _kill(ex: ProcessPoolExecutor) -> None:
    for p in list((getattr(ex, "_processes", None) or {}).values()):
        if p.is_alive():
            p.kill()
    ex.shutdown(wait=False, cancel_futures=True)


def _batch(fn, items, idxs, results, workers, stall_s, initializer, on_error):
    """Run items[idxs]; fill results. Returns (suspects, requeue) index lists."""
    ex = ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"),
                             initializer=initializer)
    futs = {ex.submit(fn, items[i]): i for i in idxs}
    pending = set(futs)
    broken: list[int] = []
    try:
        while pending:
            done, pending = wait(pending, timeout=stall_s, return_when=FIRST_COMPLETED)
            for f in done:
                i = futs[f]
                try:
                    results[i] = f.result()
                except BrokenProcessPool:
                    broken.append(i)   # a worker died (OOM, segfault): retry elsewhere
                except Exception as e:  # noqa: BLE001  (one bad item is recorded, not fatal)
                    results[i] = on_error(items[i], e)
            if not done:
                suspects = [futs[f] for f in pending if f.running()]
                requeue = [futs[f] for f in pending if not f.running()]
                return suspects, requeue + broken
        return [], broken
    finally:
        if pending or broken:
            _kill(ex)
        else:
            ex.shutdown(wait=True)


def map_with_deadline(fn: Callable[[Any], Any], items: list, *, workers: int, stall_s: float,
                      on_timeout: Callable[[Any], Any], on_error: Callable[[Any, Exception], Any],
                      initializer: Callable[[], None] | None = None) -> list:
    results: list = [None] * len(items)
    chunk = max(1, workers) * ITEMS_PER_WORKER
    for start in range(0, len(items), chunk):
        _map_chunk(fn, items, list(range(start, min(start + chunk, len(items)))), results,
                   workers, stall_s, on_timeout, on_error, initializer)
    return results


def _map_chunk(fn, items, todo, results, workers, stall_s, on_timeout, on_error, initializer):
    for _ in range(3):  # a broken pool is retried a bounded number of times
        if not todo:
            break
        suspects, todo = _batch(fn, items, todo, results, max(1, min(workers, len(todo))),
                                stall_s, initializer, on_error)
        for i in suspects:  # alone in a fresh worker: a stall now is this item's own
            s, rest = _batch(fn, items, [i], results, 1, stall_s, initializer, on_error)
            if s or rest:
                results[i] = on_timeout(items[i])
    for i in todo:
        results[i] = on_error(items[i], RuntimeError("worker pool kept breaking"))
