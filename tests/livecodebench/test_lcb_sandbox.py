"""Hostile programs are contained. Each is bounded (<= 300 sleeping forks, <= 12 GB of
allocation attempts, <= 2 GB of output attempts, seconds of wall time), so a broken sandbox
cannot take the machine down. They run concurrently on the pool, with LiveCodeBench's
in-process guard off: the OS-level confinement alone must hold."""
import glob
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid

import pytest
from lcb_helpers import process_count
from tasks.sandbox import SandboxConfig, run_many, run_program
from tasks.sandbox.uids import pids_of

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CFG = SandboxConfig(timeout_s=3.0, global_slack_s=2.0, workers=2, lcb_guard=False)
SECRET = "zipage-secret-" + uuid.uuid4().hex

FORK_BOMB = """import os, time
n = 0
for _ in range(300):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    n += 1
print('forked', n)"""
MEMORY_BOMB = """chunks = []
try:
    bytearray(12 * 2**30)
    print('GOT 12GB')
except MemoryError:
    pass
for _ in range(120):  # 120 x 100 MiB: 12 GB at most
    chunks.append(bytes(100 * 2**20))
print('allocated', len(chunks))"""
PRINT_BOMB = "for _ in range(2000):\n    print('x' * 10**6)"
FD_BOMB = """import os
for _ in range(1000):
    os.write(1, b'y' * 10**6)
    os.write(2, b'z' * 10**6)
print('done')"""
DISK_FILL = """try:
    with open('big.bin', 'wb') as f:
        for _ in range(200):
            f.write(b'0' * 2**20)
    print('WROTE 200MB')
except OSError as e:
    print('stopped', e.errno)"""
ESCAPE_GROUP = """import os, time
if os.fork() == 0:
    os.setsid()
    time.sleep(60)
    os._exit(0)
print('child detached')"""


def _write_outside(paths):
    return ("for p in %r:\n    try:\n        open(p, 'w').write('x')\n        print('WROTE', p)\n"
            "    except OSError as e:\n        print('blocked', p, e.errno)" % (paths,))


@pytest.fixture(scope="module")
def hostile(isolation, tmp_path_factory):
    os.environ["ZIPAGE_LCB_SECRET"] = SECRET  # the evaluator's secret must not leak
    tag = uuid.uuid4().hex
    outside = [str(tmp_path_factory.mktemp("outside") / f"f-{tag}"),
               os.path.join(tempfile.gettempdir(), f"zipage-escape-{tag}"),
               f"/dev/shm/zipage-escape-{tag}", os.path.join(ROOT, f"zipage-escape-{tag}")]
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.setblocking(False)
    victim = subprocess.Popen(["sleep", "60"])  # kill(-1) as root would take it down
    me = os.getpid()
    kills = [f"os.kill({me}, 9)", "os.kill(os.getppid(), 9)", "os.killpg(os.getpgid(0), 9)"]
    if isolation["uid_drop"] or isolation["pid_namespace"]:
        kills.append("os.kill(-1, 9)")  # only safe to try when contained
    programs = {
        "fork_bomb": FORK_BOMB, "memory_bomb": MEMORY_BOMB, "print_bomb": PRINT_BOMB,
        "fd_bomb": FD_BOMB, "disk_fill": DISK_FILL, "write_outside": _write_outside(outside),
        "env": f"import os\nprint(dict(os.environ))\nprint(open('/proc/{me}/environ').read())",
        "network": ("import socket\ns = socket.socket()\ns.settimeout(2)\n"
                    f"s.connect(('127.0.0.1', {server.getsockname()[1]}))\nprint('CONNECTED')"),
        "kill_parent": "import os\n" + "".join(
            f"try:\n    {k}\n    print('sent')\n"
            "except OSError as e:\n    print('refused', e.errno)\n"
            for k in kills) + "print('still here')",
    }
    if isolation["uid_drop"] or isolation["pid_namespace"]:
        programs["escape_group"] = ESCAPE_GROUP
    before = process_count()
    sbx_dirs = set(os.listdir(tempfile.gettempdir()))
    start = time.monotonic()
    results = run_many([{"code": c, "mode": "stdin", "inputs": [""]} for c in programs.values()],
                       CFG)
    wall = time.monotonic() - start
    time.sleep(0.2)
    yield {"res": dict(zip(programs, results)), "wall": wall, "outside": outside,
           "server": server, "victim": victim, "before": before, "sbx_dirs": sbx_dirs}
    victim.kill()
    victim.wait()
    server.close()
    for p in outside:
        if os.path.exists(p):
            os.unlink(p)
    os.environ.pop("ZIPAGE_LCB_SECRET", None)


def _out(hostile, name):
    res = hostile["res"][name]
    assert res.isolation is not None, (res.end, res.error)
    return res, (res.tests[0]["output"] if res.tests else ""), res.tests[0] if res.tests else {}


def test_fork_bomb_is_bounded(hostile, isolation):
    res, out, _ = _out(hostile, "fork_bomb")
    assert res.end == "done" and out.startswith("forked")
    if isolation["uid_drop"]:
        assert int(out.split()[1]) < CFG.nproc  # RLIMIT_NPROC of the dedicated uid


def test_memory_bomb_hits_address_space_limit(hostile):
    res, out, msg = _out(hostile, "memory_bomb")
    assert msg["status"] == "runtime_error" and "MemoryError" in msg["error"]
    assert "GOT 12GB" not in out


def test_print_bombs_are_capped(hostile):
    _, _, msg = _out(hostile, "print_bomb")
    assert msg["status"] == "output_limit" and len(msg["output"] or "") <= CFG.max_output_mb << 20
    _, out, msg = _out(hostile, "fd_bomb")  # raw fd writes go nowhere near the evaluator
    assert msg["status"] == "ok" and out == "done\n"


def test_disk_fill_is_bounded(hostile):
    _, out, _ = _out(hostile, "disk_fill")
    assert out.startswith("stopped")  # ENOSPC (tmpfs) or EFBIG (RLIMIT_FSIZE)


def test_no_file_written_outside(hostile, isolation):
    _, out, _ = _out(hostile, "write_outside")
    assert "WROTE" not in out and out.count("blocked") == len(hostile["outside"])
    assert not any(os.path.exists(p) for p in hostile["outside"])


def test_environment_does_not_leak(hostile):
    res, out, msg = _out(hostile, "env")
    assert SECRET not in out and SECRET not in str(res.tests)
    # the evaluator's /proc entry is hidden (own /proc) or unreadable (other uid)
    assert msg["status"] == "runtime_error"
    assert msg["error"].split(":")[0] in ("FileNotFoundError", "PermissionError")


def test_network_is_unreachable(hostile, isolation):
    res, out, msg = _out(hostile, "network")
    assert res.isolation["network_isolation"] == isolation["network_isolation"]
    if not isolation["network_isolation"]:
        pytest.skip("no network namespace on this machine (reported network_isolation=false)")
    assert "CONNECTED" not in out and msg["status"] == "runtime_error"
    with pytest.raises(BlockingIOError):
        hostile["server"].accept()  # nothing ever reached our listening socket


def test_parent_cannot_be_killed(hostile):
    res, out, _ = _out(hostile, "kill_parent")
    assert res.end == "done" and out.rstrip().endswith("still here")
    assert hostile["victim"].poll() is None  # a root process outside the sandbox survived


def test_aftermath_processes_and_files(hostile, isolation):
    from tasks.sandbox.uids import busy_uids
    assert not busy_uids()
    for uid in range(CFG.uid_base, CFG.uid_base + 16):
        assert not pids_of(uid, live_only=False), f"processes of sandbox uid {uid} survived"
    assert process_count() <= hostile["before"] + 3
    left = {d for d in os.listdir(tempfile.gettempdir()) if d.startswith("zipage-sbx-")}
    assert not (left - hostile["sbx_dirs"])  # every temp dir was removed
    assert hostile["wall"] < 40, hostile["wall"]


def test_one_bad_program_does_not_stall_the_others():
    cfg = SandboxConfig(timeout_s=1.0, global_slack_s=1.0, workers=2)
    stuck = "import signal, time\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\ntime.sleep(60)"
    jobs = [{"code": stuck, "mode": "stdin", "inputs": [""]}] + [
        {"code": f"print({i})", "mode": "stdin", "inputs": [""]} for i in range(6)]
    done_at = {}
    start = time.monotonic()

    def stamp(i):
        return lambda msg: done_at.setdefault(i, time.monotonic() - start) is not None
    for i, job in enumerate(jobs):
        job["on_test"] = stamp(i)
    results = run_many(jobs, cfg)
    assert results[0].end == "global_timeout" and results[0].wall_s < 5
    assert [r.tests[0]["output"] for r in results[1:]] == [f"{i}\n" for i in range(6)]
    assert max(done_at[i] for i in range(1, 7)) < results[0].wall_s  # done while it hung


def test_degraded_mode_reports_no_isolation():
    res = run_program("print('hi')", "stdin", [""],
                      cfg=SandboxConfig(isolate=False, drop_uid=False, timeout_s=2))
    assert res.tests[0]["output"] == "hi\n"
    assert res.isolation["network_isolation"] is False and res.isolation["uid_drop"] is False


def test_killed_evaluator_leaves_nothing_behind(isolation):
    if not isolation["uid_drop"]:
        pytest.skip("needs a dedicated uid to find the sandbox's processes")
    script = ("import sys; sys.path.insert(0, %r)\n"
              "from tasks.sandbox import run_program, SandboxConfig\n"
              "run_program('import os, time\\nos.fork()\\nwhile True:\\n    try:\\n"
              "        time.sleep(100)\\n    except BaseException:\\n        pass', 'stdin', [''],"
              " cfg=SandboxConfig(timeout_s=100, lcb_guard=False, uid_base=%d))"
              % (ROOT, CFG.uid_base + 100))
    evaluator = subprocess.Popen([sys.executable, "-c", script])
    uids = range(CFG.uid_base + 100, CFG.uid_base + 104)
    deadline = time.monotonic() + 10
    while sum(len(pids_of(u)) for u in uids) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sum(len(pids_of(u)) for u in uids) == 2  # the program and its fork are running
    os.kill(evaluator.pid, signal.SIGKILL)
    evaluator.wait()
    deadline = time.monotonic() + 5
    while any(pids_of(u, live_only=False) for u in uids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(pids_of(u, live_only=False) for u in uids)
    # the work dir it could not remove is cleaned by the next run that gets the same uid
    stale = glob.glob(os.path.join(tempfile.gettempdir(), f"zipage-sbx-{CFG.uid_base + 100}-*"))
    assert stale
    run_program("pass", "stdin", [""], cfg=SandboxConfig(uid_base=CFG.uid_base + 100))
    assert not any(os.path.exists(d) for d in stale)
