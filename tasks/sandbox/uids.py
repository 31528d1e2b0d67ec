"""Dedicated unprivileged uids for sandbox runs (one per concurrent run).

A uid that no account and no process uses is ours alone, so RLIMIT_NPROC bounds exactly one
run, concurrent runs cannot signal each other, and "kill every process of this uid" is a
safe way to clean up whatever escaped the run's process group. A uid is held through an
flock on a per-uid lock file, so evaluators in different processes never share one.
"""
from __future__ import annotations

import fcntl
import os
import pwd
import signal
import tempfile
import threading
import time

LOCK_DIR = os.path.join(tempfile.gettempdir(), "zipage-sandbox-uids")
_lock = threading.Lock()
_busy: dict[int, int] = {}  # uid -> fd holding its lock


def pids_of(uid: int, live_only: bool = True) -> list[int]:
    """Processes whose real uid is `uid` (zombies too unless live_only)."""
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status") as f:
                st = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        if int(st["Uid"].split()[0]) == uid and not (live_only and st["State"].strip()[0] == "Z"):
            pids.append(int(name))
    return pids


def _try_lock(uid: int) -> int | None:
    os.makedirs(LOCK_DIR, mode=0o700, exist_ok=True)
    fd = os.open(os.path.join(LOCK_DIR, str(uid)), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return fd
    except OSError:
        os.close(fd)
        return None


def acquire_uid(base: int) -> int:
    with _lock:
        for uid in range(base, base + 512):
            if uid in _busy:
                continue
            try:
                pwd.getpwuid(uid)
                continue  # a real account: never ours
            except KeyError:
                pass
            fd = _try_lock(uid)
            if fd is None:
                continue  # another evaluator process holds it
            if pids_of(uid, live_only=False):
                os.close(fd)
                continue
            _busy[uid] = fd
            return uid
    raise RuntimeError("no free sandbox uid")


def release_uid(uid: int) -> None:
    with _lock:
        fd = _busy.pop(uid, None)
    if fd is not None:
        os.close(fd)  # drops the flock


def busy_uids() -> set[int]:
    with _lock:
        return set(_busy)


def sweep(uid: int, timeout: float = 5.0) -> bool:
    """Kill every process of `uid` until none is left; False if some survived `timeout`."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        pids = pids_of(uid, live_only=False)
        if not pids:
            return True
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.01)
    return not pids_of(uid, live_only=False)
