"""Cluster sweeps: Hydra's submitit launcher (one job array) and `python -m tasks.sweep`
(baselines first, then the budget runs), run here with the fake engine."""
import json
import os
import stat
import subprocess
import sys

import pytest

from conftest import ROOT
from tasks import sweep

HARNESS = os.path.dirname(os.path.abspath(__file__))
FAKE_RUN = os.path.join(HARNESS, "fake_run.py")


@pytest.fixture
def data(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    for task, field in (("amc23", "problem"), ("gsm8k", "question")):
        (d / f"{task}.jsonl").write_text("".join(
            json.dumps({"id": f"p{k}", field: f"q{k}: twice {k}?", "answer": str(2 * k)}) + "\n"
            for k in (1, 2, 3)))
    return d


def fake_job_env(delay_s: float) -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, HARNESS]),
            "FAKE_GENERATE_S": str(delay_s)}


def common(tmp_path, data) -> list[str]:
    return [f"data_dir={data}", f"results_dir={tmp_path}/results", "engine.device=cpu",
            "cpu.enabled=false", "sampling.n=2", "sampling.max_tokens=32", "use_tqdm=false",
            "scoring.workers=1"]


def check_one_baseline_per_task(results, n_runs: int) -> None:
    """Every run is scored against its task's single Full-KV baseline, generated once."""
    summaries = [json.loads(p.read_text()) for p in (results / "multirun").rglob("summary.json")]
    assert len(summaries) == n_runs
    baselines = {s["task"]: s["baseline"]["run_dir"] for s in summaries}
    assert all(s["baseline"]["run_dir"] == baselines[s["task"]] for s in summaries)
    assert sorted(os.path.relpath(b, results / "_baselines").split(os.sep)[0]
                  for b in baselines.values()) == ["amc23", "gsm8k"]
    for b in baselines.values():
        with open(os.path.join(b, "generation_stats.jsonl")) as f:
            closed = [line for line in f if '"event": "open"' not in line]
            assert len(closed) == 1                             # one engine run generated it
        with open(os.path.join(b, "samples.jsonl")) as f:
            assert len(f.readlines()) == 3 * 2                  # 3 problems x n=2, none twice
    for s in summaries:  # timed on the fake engine's clock: exact
        with open(os.path.join(s["baseline"]["run_dir"], "summary.json")) as f:
            base = json.load(f)
        assert s["complete"] and s["baseline"]["output_tokens_per_s"] == base["output_tokens_per_s"]
        assert s["baseline"]["speedup"] == pytest.approx(
            s["output_tokens_per_s"] / base["output_tokens_per_s"])
        assert s["baseline"]["speedup"] > 1.2  # the fake engine's budget steps are cheaper


def job_logs(results) -> str:
    return "".join(p.read_text() for p in (results / "multirun" / ".submitit").rglob("*.out"))


def test_submitit_local_launcher_sweep_shares_one_baseline_per_task(tmp_path, data):
    """`run.py -m hydra/launcher=submitit_local`: 4 jobs at once; the two jobs of a task reach
    their shared baseline together and the run-folder lock lets only one generate it."""
    subprocess.run([sys.executable, FAKE_RUN, "-m", "hydra/launcher=submitit_local",
                    "task=amc23,gsm8k", "budget=256,512", *common(tmp_path, data)],
                   cwd=tmp_path, env=fake_job_env(3.0), check=True, capture_output=True, timeout=240)
    results = tmp_path / "results"
    check_one_baseline_per_task(results, 4)
    logs = job_logs(results)
    assert logs.count("reusing cached baseline") == 2             # the other job of each task
    assert "waiting for another job generating" in logs           # the jobs did overlap


def test_plan_has_one_baseline_job_per_baseline_and_one_job_per_run_folder():
    stage1, stage2 = sweep.plan(["hydra/launcher=slurm", "hydra.launcher.partition=gpu",
                                 "task=amc23,aime24", "engine=fullkv,zipage,zipage_paper",
                                 "budget=1024,2048"])
    assert stage1 == [["task=amc23", "engine=zipage", "budget=1024", "baseline.only=true"],
                      ["task=aime24", "engine=zipage", "budget=1024", "baseline.only=true"]]
    assert stage2 == [[f"task={t}", f"engine={e}", f"budget={b}"] for t in ("amc23", "aime24")
                      for e in ("fullkv", "zipage", "zipage_paper") for b in (1024, 2048)
                      if not (e == "fullkv" and b == 2048)]  # Full KV ignores the budget


def test_plan_rejects_a_bad_override_before_submitting():
    with pytest.raises(Exception, match="budgett"):
        sweep.plan(["task=amc23", "budgett=1024"])


def test_slurm_stage_two_runs_after_the_baselines(tmp_path, monkeypatch, capsys):
    """The sbatch files submitit writes: our launcher defaults, one GPU per job, and the
    budget array held back with afterok on the baseline array."""
    fake = tmp_path / "bin" / "sbatch"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\ncat "$1" >> {tmp_path}/sbatch.log\necho "--" >> {tmp_path}/sbatch.log\n'
                    f'n=$(grep -c "^--$" {tmp_path}/sbatch.log)\necho "Submitted batch job 10$n"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    (fake.parent / "srun").write_text("#!/bin/sh\nexit 1\n")  # submitit looks for it; never run
    (fake.parent / "srun").chmod(fake.stat().st_mode)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    code = sweep.main(["hydra.launcher.partition=gpu", "task=amc23,aime24", "budget=1024,2048",
                       f"results_dir={tmp_path}/results", "sampling.n=32"])
    assert code == 0
    first, second = (tmp_path / "sbatch.log").read_text().split("--\n")[:2]
    for script in (first, second):
        for flag in ("--partition=gpu", "--gpus-per-node=1", "--time=1440", "--cpus-per-task=16",
                     "--job-name=zipage"):
            assert f"#SBATCH {flag}" in script
    assert "#SBATCH --array=0-1%2\n" in first and "dependency" not in first  # % = min(64, jobs)
    assert "#SBATCH --array=0-3%4\n" in second
    assert "#SBATCH --dependency=afterok:101\n" in second
    assert "#SBATCH --kill-on-invalid-dep=yes" in second  # a failed baseline cancels stage 2
    assert "submitted: baselines ['101_0', '101_1'], then" in capsys.readouterr().out


def test_local_two_stage_sweep_generates_each_baseline_once(tmp_path, data, monkeypatch):
    """`python -m tasks.sweep hydra/launcher=submitit_local`: stage 1 (one job per task)
    finishes before stage 2 starts; no budget job generates a baseline."""
    for key, value in fake_job_env(0.0).items():
        monkeypatch.setenv(key, value)
    code = sweep.main(["hydra/launcher=submitit_local", "task=amc23,gsm8k", "budget=256,512",
                       *common(tmp_path, data), "--app", FAKE_RUN])
    assert code == 0
    results = tmp_path / "results"
    check_one_baseline_per_task(results, 4)
    assert job_logs(results).count("reusing cached baseline") == 4  # every stage-2 job


@pytest.mark.parametrize("override, message", [
    ("engine=zipage,fullx", "unknown engine 'fullx' (did you mean 'fullkv'?)"),
    ("budgt=512", "unknown key 'budgt' (did you mean 'budget'?)"),
    ("budget=100", "budget=100 must be a positive multiple of engine.block_size=256"),
    ("hydra.launcher.bogus=3", "Could not override 'hydra.launcher.bogus'.")])
def test_a_sweep_run_py_would_refuse_is_refused_in_one_line(tmp_path, capsys, override, message):
    """As run.py does: one line naming the fix, exit 2, nothing submitted; no traceback."""
    argv = ["--dry-run", "task=gsm8k", "budget=512", f"results_dir={tmp_path}", override]
    assert sweep.main(argv) == 2
    out, err = capsys.readouterr()
    assert err.startswith("error: ") and err.count("\n") == 1 and message in err
    assert "stage" not in out and not (tmp_path / "multirun").exists()
