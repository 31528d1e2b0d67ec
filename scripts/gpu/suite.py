"""Named stages of GPU tests and benchmarks in one go (one device call), logged and timed:

    python -m scripts.bench gpu-suite                                  # tests, throughput
    python -m scripts.bench gpu-suite --stages tests,long --out /tmp/s
    python -m scripts.bench gpu-suite --list                           # stages and commands

Each command's output goes to OUT/<command>.log (its last --tail lines are printed), its JSON
reports to OUT; a command past its limit is killed (rc 124) and the suite goes on. While it
runs, nvidia-smi samples SM clock, power and throttle reasons every 250 ms (OUT/smi.csv) and
OUT/phases.txt holds each command's epoch start and end to line them up (the H200 here is
power-capped: docs/throughput_model.md, "Power limit"). A table of rc and seconds per command
comes last. The stages: scripts/gpu/stages.py.
"""
import argparse
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from scripts.arg_types import count_or_zero
from scripts.common import ROOT
from scripts.gpu import stages
from scripts.gpu.pack import pack

SMI_QUERY = ("timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,"
             "clocks_throttle_reasons.active")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stages", default=",".join(stages.DEFAULT),
                   help=f"comma-separated, run in this order "
                        f"(default {','.join(stages.DEFAULT)}; "
                        f"all: {','.join(stages.STAGES)})")
    p.add_argument("--out", default=os.environ.get("OUT") or "/tmp/zipage-suite",
                   help="logs and reports (default $OUT if set, else /tmp/zipage-suite)")
    p.add_argument("--list", action="store_true", help="print the stages and their commands")
    p.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    p.add_argument("--tail", type=count_or_zero, default=20,
                   help="log lines printed after each command (0: none)")
    p.add_argument("--no-clocks", action="store_true", help="no nvidia-smi sampling")
    p.add_argument("--pack", action="store_true",
                   help="at the end, put every file but the top-level reports into "
                        "suite.tgz (parts of at most 15 MB): few files to copy back")


def chosen_stages(text: str) -> list[str]:
    names = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in names if s not in stages.STAGES]
    if unknown or not names:
        raise SystemExit(f"--stages: unknown {unknown or 'none given'}; the stages are "
                         f"{', '.join(stages.STAGES)} (--list shows their commands)")
    return names


def describe(names: list[str], out: str) -> str:
    lines = []
    for name in names:
        stage = stages.STAGES[name]
        lines.append(f"{name}: {stage.description}")
        for c in stage.commands:
            env = "".join(f"{k}={v} " for k, v in stage.env.items())
            lines.append(f"  [{c.name}, limit {c.limit_s} s] {env}"
                         + display(c.resolved(out)))
    return "\n".join(lines)


def display(argv: list[str]) -> str:
    """As a user would type it: `python`, not this interpreter's full path; quoted."""
    return shlex.join(["python" if argv[0] == sys.executable else argv[0], *argv[1:]])


def child_env(stage: stages.Stage) -> dict:
    env = dict(os.environ, PYTHONUNBUFFERED="1", NCCL_NVLS_ENABLE="0", **stage.env)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def run_command(argv: list[str], log: Path, limit_s: float, env: dict) -> int:
    """Run to its end or its limit (then kill its whole process group: rc 124)."""
    with open(log, "w") as f:
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            return proc.wait(timeout=limit_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
            f.write(f"\n=== killed at its {limit_s:.0f} s limit\n")
            return 124


def tail(path: Path, n: int) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-n:]) if n > 0 else ""


def start_clock_log(out: Path):
    if not shutil.which("nvidia-smi"):
        print("(no nvidia-smi: clocks not logged)", flush=True)
        return None
    subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version",
                    "--format=csv,noheader"], check=False)
    return subprocess.Popen(["nvidia-smi", f"--query-gpu={SMI_QUERY}", "--format=csv",
                             "-lms", "250"], stdout=open(out / "smi.csv", "w"),
                            stderr=subprocess.STDOUT)


def main(a) -> int:
    names = chosen_stages(a.stages) if not a.list else list(stages.STAGES)
    out = Path(a.out).resolve()
    if a.list or a.dry_run:
        print(describe(names, str(out)))
        return 0
    out.mkdir(parents=True, exist_ok=True)
    smi = None if a.no_clocks else start_clock_log(out)
    rows = []
    try:
        for name in names:
            stage = stages.STAGES[name]
            for c in stage.commands:
                argv = c.resolved(str(out))
                print(f"=== {name} / {c.name}: {display(argv)}", flush=True)
                with open(out / "phases.txt", "a") as f:
                    f.write(f"{c.name}-start {time.time():.3f}\n")
                t0 = time.monotonic()
                rc = run_command(argv, out / f"{c.name}.log", c.limit_s, child_env(stage))
                seconds = time.monotonic() - t0
                with open(out / "phases.txt", "a") as f:
                    f.write(f"{c.name}-end {time.time():.3f}\n")
                print(tail(out / f"{c.name}.log", a.tail), flush=True)
                rows.append((name, c.name, rc, seconds))
    finally:
        if smi is not None:
            smi.terminate()
            smi.wait()
    table = [f"{'stage':<14}{'command':<14}{'rc':>5}{'seconds':>9}"]
    table += [f"{s:<14}{c:<14}{rc:>5}{sec:>9.0f}" for s, c, rc, sec in rows]
    (out / "summary.txt").write_text("\n".join(table) + "\n")
    if a.pack:
        pack(out)
    print("=== summary (logs in " + str(out) + ")\n" + "\n".join(table), flush=True)
    return 0 if all(rc == 0 for _, _, rc, _ in rows) else 1
