"""Evaluator side: one confined child process per (problem, sample), a bounded thread pool.

Each run: fresh temp dir (cwd; a size-capped tmpfs inside the child's namespace when we are
root), scrubbed environment, `start_new_session` so the whole group can be killed, a
wall-clock deadline of (timeout + 1) * tests + 5 s, results read line by line with a size cap,
and afterwards every process of the run's dedicated uid is killed (catches escapes from the
process group). The child confines itself first thing (see confine.py for why).
"""
from __future__ import annotations

import glob
import json
import math
import os
import select
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

from tasks.sandbox.uids import acquire_uid, release_uid, sweep

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = os.path.join(HERE, "child.py")
MiB = 1 << 20
# No user site, no bytecode files, no script dir on sys.path (-P, Python >= 3.11). Not -I:
# it would also ignore PYTHONHASHSEED, and our environment is scrubbed anyway.
PY_FLAGS = ["-s", "-B"] + (["-P"] if sys.version_info >= (3, 11) else [])


@dataclass
class SandboxConfig:
    timeout_s: float = 6.0        # per test, as LiveCodeBench
    memory_mb: int = 4096         # RLIMIT_AS
    fsize_mb: int = 16            # RLIMIT_FSIZE (raised to fit the largest test input)
    nofile: int = 64
    nproc: int = 64               # processes + threads of the run's uid
    tmpfs_mb: int = 64            # writable work dir size (namespace mode)
    max_output_mb: int = 16       # captured stdout per test
    workers: int | None = None    # None: cores - 1, at least 1
    isolate: bool = True          # namespaces (network, pid, mount)
    drop_uid: bool = True         # run as a dedicated unprivileged uid when we are root
    uid_base: int = 61000
    lcb_guard: bool = True        # LiveCodeBench's in-process guard, for verdict parity
    global_slack_s: float = 5.0   # wall limit of a run: (timeout_s + 1) * tests + slack

    def global_timeout(self, num_tests: int) -> float:
        return (self.timeout_s + 1) * max(num_tests, 1) + self.global_slack_s

    def num_workers(self) -> int:
        cores = len(os.sched_getaffinity(0))
        return self.workers or max(1, cores - 1)


@dataclass
class RunResult:
    end: str = "crashed"   # done | stopped | compile_error | runner_error | global_timeout
    #                        crashed | message_limit
    tests: list = field(default_factory=list)   # per-test messages from the child
    error: str | None = None                    # compile/runner error text
    isolation: dict | None = None               # flags reported by the child
    exit_code: int | None = None
    wall_s: float = 0.0


# -- one run ---------------------------------------------------------------------------------
def _expose_paths() -> list[str]:
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, HERE,
             os.path.dirname(os.path.realpath(sys.executable))}
    paths.update(p for p in sysconfig.get_paths().values() if os.path.isdir(p))
    return sorted(paths)


def _child_env(workdir: str) -> dict:
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "PYTHONHASHSEED": "0", "LANG": "C.UTF-8",
           "LC_ALL": "C.UTF-8", "HOME": workdir, "TMPDIR": workdir,
           "PYTHONDONTWRITEBYTECODE": "1", "PYTHONIOENCODING": "utf-8"}
    for var in ("OMP", "OPENBLAS", "MKL", "NUMEXPR"):
        env[f"{var}_NUM_THREADS"] = "1"
    return env


def _lines(fd: int, deadline: float, max_line: int):
    """Yield ('line', bytes) until 'eof', 'timeout' or 'too_long' (yielded once, last)."""
    buf = bytearray()
    poller = select.poll()  # not select(): it fails for fds >= 1024
    poller.register(fd, select.POLLIN)
    while True:
        nl = buf.find(b"\n")
        if nl >= 0:
            line = bytes(buf[:nl])
            del buf[:nl + 1]
            yield "line", line
            continue
        if len(buf) > max_line:
            yield "too_long", None
            return
        left = deadline - time.monotonic()
        if left <= 0 or not poller.poll(left * 1000):
            yield "timeout", None
            return
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            yield "eof", None
            return
        buf += chunk


def run_program(code: str, mode: str, inputs: list[str], fn_name: str | None = None,
                cfg: SandboxConfig | None = None,
                on_test: Callable[[dict], bool] | None = None) -> RunResult:
    """Run `code` on each input (mode 'stdin' or 'functional'); `on_test(msg)` returning
    False stops the run early (first failing test)."""
    cfg = cfg or SandboxConfig()
    res = RunResult()
    start = time.monotonic()
    uid = acquire_uid(cfg.uid_base) if cfg.drop_uid and os.geteuid() == 0 else None
    if uid is not None:  # dirs a killed evaluator left; holding the uid's lock, they're ours
        for stale in glob.glob(os.path.join(tempfile.gettempdir(), f"zipage-sbx-{uid}-*")):
            shutil.rmtree(stale, ignore_errors=True)
    workdir = tempfile.mkdtemp(prefix=f"zipage-sbx-{uid}-" if uid is not None else "zipage-sbx-")
    proc = None
    try:
        if uid is not None:
            os.chown(workdir, uid, uid)  # writable for the child even without a tmpfs
        biggest = max((len(s.encode("utf-8")) for s in inputs), default=0)
        max_out = cfg.max_output_mb * MiB
        job = {"code": code, "mode": mode, "fn_name": fn_name, "inputs": inputs,
               "timeout": cfg.timeout_s, "lcb_guard": cfg.lcb_guard,
               "max_output_bytes": max_out, "max_message_bytes": 2 * max_out + MiB,
               "sandbox": {"isolate": cfg.isolate, "workdir": workdir, "uid": uid,
                           "tmpfs_mb": cfg.tmpfs_mb, "memory_mb": cfg.memory_mb,
                           "cpu_s": math.ceil(cfg.global_timeout(len(inputs))) + 1,
                           "fsize_mb": max(cfg.fsize_mb, biggest // MiB + 2),
                           "nofile": cfg.nofile, "nproc": cfg.nproc, "expose": _expose_paths()}}
        job_path = os.path.join(workdir, ".job.json")
        with open(os.open(job_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
            json.dump(job, f)
        proc = subprocess.Popen([sys.executable, *PY_FLAGS, CHILD, job_path],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, cwd=workdir, env=_child_env(workdir),
                                start_new_session=True, close_fds=True)
        deadline = start + cfg.global_timeout(len(inputs))
        ends = {"timeout": "global_timeout", "eof": "crashed", "too_long": "message_limit"}
        for kind, line in _lines(proc.stdout.fileno(), deadline, 4 * max_out + MiB):
            if kind != "line":
                res.end = ends[kind]
                break
            try:
                msg = json.loads(line)
            except (ValueError, RecursionError):
                msg = None
            if not isinstance(msg, dict) or msg.get("test", len(res.tests)) != len(res.tests):
                res.end, res.error = "runner_error", "garbled result line"
                break
            if "hello" in msg:
                res.isolation = msg["hello"]
            elif "test" in msg:
                res.tests.append(msg)
                try:
                    go_on = on_test is None or on_test(msg) is not False
                except Exception as e:  # noqa: BLE001 - a bad message must not kill the pool
                    res.end, res.error = "runner_error", f"judging failed: {e!r}"[:500]
                    break
                if not go_on:
                    res.end = "stopped"
                    break
            else:
                res.end = next((k for k in ("done", "compile_error", "runner_error")
                                if k in msg), "runner_error")
                res.error = msg.get("compile_error") or msg.get("runner_error")
                break
        if res.end == "crashed":
            try:
                res.exit_code = proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass
    finally:
        try:
            if uid is not None:
                sweep(uid)  # first: the namespace init dies, its parent (the runner) reaps it
            if proc is not None:
                _kill(proc, grace=1.0 if uid is not None else 0.0)
        finally:
            if uid is not None:
                release_uid(uid)  # safe even if something survived: acquire skips busy uids
            shutil.rmtree(workdir, ignore_errors=True)
            res.wall_s = time.monotonic() - start
    return res


def _kill(proc: subprocess.Popen, grace: float = 0.0) -> None:
    try:
        proc.wait(timeout=grace)  # normally it is already on its way out
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the runner leads its own session/group
    except OSError:
        pass
    try:
        proc.kill()
    except OSError:
        pass
    proc.wait()
    proc.stdout.close()


def run_many(jobs: list[dict], cfg: SandboxConfig | None = None) -> list[RunResult]:
    """Run many `run_program(**job)` calls on a bounded pool; results in input order."""
    cfg = cfg or SandboxConfig()

    def safe(job):  # one failure to start a child must not sink the whole batch
        try:
            return run_program(cfg=cfg, **job)
        except Exception as e:  # noqa: BLE001
            return RunResult(end="runner_error", error=f"sandbox failed: {e!r}"[:500])
    with ThreadPoolExecutor(max_workers=cfg.num_workers()) as pool:
        return list(pool.map(safe, jobs))


_probe_cache: dict = {}


def probe(cfg: SandboxConfig | None = None) -> dict:
    """Isolation flags this machine gives (runs one trivial child, cached)."""
    cfg = cfg or SandboxConfig()
    key = (cfg.isolate, cfg.drop_uid)
    if key not in _probe_cache:
        res = run_program("pass", "stdin", [""], cfg=cfg)
        _probe_cache[key] = dict(res.isolation or {"network_isolation": False,
                                                   "pid_namespace": False, "readonly_fs": False,
                                                   "uid_drop": False, "notes": [res.error]})
    return _probe_cache[key]
