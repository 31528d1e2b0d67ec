"""Cluster sweep job files / submission, and paper tables built from real run folders."""
import csv
import json
import os
import stat
import sys

from conftest import ROOT
from test_runner import config, data_dir, engine  # noqa: F401 (fixtures)
from tasks import evaluate as runner

sys.path.insert(0, os.path.join(ROOT, "scripts"))
import paper_tables  # noqa: E402
import sweep  # noqa: E402


def test_tables_and_plots_from_a_budget_sweep(tmp_path, data_dir, engine):  # noqa: F811
    summaries = {}
    for eng, budget in (("zipage", 512), ("zipage", 1024), ("zipage_paper", 512)):
        cfg = config(tmp_path, data_dir, f"engine={eng}", f"budget={budget}")
        summaries[eng, budget] = runner.evaluate(cfg, str(tmp_path / "results" / f"{eng}{budget}"))
    out = tmp_path / "reports"
    assert paper_tables.main([str(tmp_path / "results"), "--out", str(out)]) == 0
    md = (out / "tables.md").read_text()
    lines = [line for line in md.splitlines() if line.startswith("| ")]
    methods = [line.split(" | ")[0][2:] for line in lines[:5]]
    assert methods == ["method", "Full KV", "zipage b=512", "zipage b=1024", "zipage_paper b=512"]
    s = summaries["zipage", 1024]
    assert f"| zipage b=1024 | {s['pass@1']:.4f} | {s['baseline']['accuracy_retained']:.1f}% |" in md
    assert f"{s['output_tokens_per_s']:.0f} ({s['baseline']['speedup']:.2f}x)" in md
    rows = list(csv.DictReader(open(out / "runs.csv")))
    assert len(rows) == 4 and sum(r["budget"] == "" for r in rows) == 1  # one shared baseline
    plot = out / "amc23_smollm2-135m_n3_len64.png"
    assert plot.exists() and plot.stat().st_size > 5000


def test_sweep_writes_two_stages_and_chains_them_with_sbatch(tmp_path, monkeypatch):
    calls = tmp_path / "sbatch_calls"
    fake = tmp_path / "bin" / "sbatch"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\necho "$@" >> {calls}\nwc -l < {calls} | tr -d " "\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    out = tmp_path / "jobs"
    code = sweep.main(["--models", "qwen3-8b", "--tasks", "aime24", "amc23", "--budgets", "1024",
                       "2048", "--engines", "zipage", "zipage_paper", "--out", str(out),
                       "--slurm", "--partition", "gpu", "--python", "python", "--",
                       "sampling.n=32"])
    assert code == 0
    stage1 = (out / "stage1.commands").read_text().splitlines()
    stage2 = (out / "stage2.commands").read_text().splitlines()
    assert stage1 == [f"python run.py model=qwen3-8b task={t} budget=1024 baseline.only=true "
                      f"sampling.n=32" for t in ("aime24", "amc23")]
    assert len(stage2) == 8 and stage2[0] == \
        "python run.py model=qwen3-8b task=aime24 engine=zipage budget=1024 sampling.n=32"
    script = (out / "stage2.sbatch").read_text()
    assert "#SBATCH --array=1-8" in script and "#SBATCH --partition=gpu" in script
    first, second = calls.read_text().splitlines()
    assert first.endswith("stage1.sbatch") and "--dependency=afterok:1" in second


def test_local_sweep_runs_baselines_first_and_stops_if_one_fails(tmp_path, capfd):
    args = ["--models", "m", "--tasks", "t1", "t2", "--budgets", "512", "1024", "--out",
            str(tmp_path / "jobs"), "--local"]
    assert sweep.main(args + ["--python", "echo"]) == 0
    ran = [line for line in capfd.readouterr().out.splitlines() if line.startswith("run.py")]
    assert [r.split()[2] for r in ran] == ["task=t1", "task=t2"] + ["task=t1"] * 2 + ["task=t2"] * 2
    assert "baseline.only=true" in ran[0] and "engine=zipage budget=1024" in ran[3]
    assert sweep.main(args + ["--python", "false"]) == 1
    assert "[stage2]" not in capfd.readouterr().out  # budget runs need their baselines
