"""Sweep models x tasks x budgets on a SLURM cluster (or locally), two stages.

    python scripts/sweep.py --models qwen3-8b --tasks aime24 amc23 --budgets 1024 2048 4096 \
        --slurm --partition gpu --time 24:00:00 -- sampling.n=32
    python scripts/sweep.py ... --dry-run      # write the job files, print, submit nothing
    python scripts/sweep.py ... --local        # run every job here, one after the other

Stage 1 generates each (model, task) Full-KV baseline once (`baseline.only=true`); stage 2
runs every (model, task, engine, budget) after it (SLURM: --dependency=afterok), reusing the
cached baseline. Arguments after `--` go to every run.py call. Each stage is a job array over
a commands file (one run.py call per line) in --out; rerunning a job resumes its run folder.
Then: `python scripts/paper_tables.py` builds the tables and plots.
"""
import argparse
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def parse_args(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", required=True)
    ap.add_argument("--tasks", nargs="+", required=True)
    ap.add_argument("--budgets", nargs="+", type=int, required=True)
    ap.add_argument("--engines", nargs="+", default=["zipage"],
                    help="engine configs of stage 2 (e.g. zipage zipage_paper)")
    ap.add_argument("--out", default="results/sweeps/latest", help="job files go here")
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--slurm", action="store_true", help="submit two job arrays with sbatch")
    mode.add_argument("--local", action="store_true", help="run every job here, in order")
    mode.add_argument("--dry-run", action="store_true", help="write job files, submit nothing")
    ap.add_argument("--partition")
    ap.add_argument("--account")
    ap.add_argument("--time", default="24:00:00")
    ap.add_argument("--gpus", type=int, default=1, help="GPUs per job")
    ap.add_argument("--max-parallel", type=int, default=None, help="array %% limit")
    ap.add_argument("--python", default=sys.executable)
    a = ap.parse_args(argv)
    a.extra = extra
    return a


def stage_commands(a) -> tuple[list[str], list[str]]:
    py, extra = shlex.quote(a.python), " ".join(shlex.quote(x) for x in a.extra)
    tail = f" {extra}" if extra else ""
    stage1 = [f"{py} run.py model={m} task={t} budget={a.budgets[0]} baseline.only=true{tail}"
              for m in a.models for t in a.tasks]
    stage2 = [f"{py} run.py model={m} task={t} engine={e} budget={b}{tail}"
              for m in a.models for t in a.tasks for e in a.engines for b in a.budgets]
    return stage1, stage2


def sbatch_script(a, name: str, commands_file: Path, n: int) -> str:
    limit = f"%{a.max_parallel}" if a.max_parallel else ""
    opts = [f"--job-name=zipage-{name}", f"--array=1-{n}{limit}", f"--time={a.time}",
            f"--gpus={a.gpus}", f"--output={commands_file.parent}/logs/{name}-%A_%a.out"]
    opts += [f"--partition={a.partition}"] if a.partition else []
    opts += [f"--account={a.account}"] if a.account else []
    lines = ["#!/usr/bin/env bash", *[f"#SBATCH {o}" for o in opts], "set -euo pipefail",
             f"cd {shlex.quote(str(ROOT))}",
             f'cmd=$(sed -n "${{SLURM_ARRAY_TASK_ID}}p" {shlex.quote(str(commands_file))})',
             'echo "$cmd"', 'eval "$cmd"']
    return "\n".join(lines) + "\n"


def write_jobs(a) -> dict:
    out = Path(a.out)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    jobs = {}
    for name, cmds in zip(("stage1", "stage2"), stage_commands(a)):
        cmd_file = out / f"{name}.commands"
        cmd_file.write_text("\n".join(cmds) + "\n")
        script = out / f"{name}.sbatch"
        script.write_text(sbatch_script(a, name, cmd_file.resolve(), len(cmds)))
        jobs[name] = (script, cmds)
    return jobs


def submit(jobs: dict) -> list[str]:
    first = subprocess.run(["sbatch", "--parsable", str(jobs["stage1"][0])], check=True,
                           capture_output=True, text=True).stdout.strip().split(";")[0]
    second = subprocess.run(["sbatch", "--parsable", f"--dependency=afterok:{first}",
                             str(jobs["stage2"][0])], check=True, capture_output=True,
                            text=True).stdout.strip().split(";")[0]
    return [first, second]


def run_local(jobs: dict) -> int:
    failed = []
    for name in ("stage1", "stage2"):
        for cmd in jobs[name][1]:
            print(f"[{name}] {cmd}", flush=True)
            if subprocess.run(cmd, shell=True, cwd=ROOT).returncode != 0:
                failed.append(cmd)
        if name == "stage1" and failed:
            break  # stage 2 needs the baselines
    for cmd in failed:
        print(f"FAILED: {cmd}", file=sys.stderr)
    return 1 if failed else 0


def main(argv=None) -> int:
    a = parse_args(argv)
    jobs = write_jobs(a)
    n1, n2 = len(jobs["stage1"][1]), len(jobs["stage2"][1])
    print(f"{n1} baseline jobs, {n2} budget jobs; job files in {a.out}")
    if a.dry_run:
        for name in ("stage1", "stage2"):
            print(f"--- {jobs[name][0]}\n" + jobs[name][0].read_text())
        return 0
    if a.local:
        return run_local(jobs)
    ids = submit(jobs)
    print(f"submitted: baselines {ids[0]}, budget runs {ids[1]} (after {ids[0]} succeeds)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
