"""`python -m tasks.tables`: pandas tables (Markdown, LaTeX, CSV) and plots from run folders."""
import os
import subprocess
import sys

import pandas as pd
import pytest

from conftest import ROOT
from test_runner import config, data_dir, engine  # noqa: F401 (fixtures)
from tasks import evaluate as runner
from tasks import tables

HARNESS = os.path.dirname(os.path.abspath(__file__))
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, HARNESS])}


def table_rows(md: str, nth: int = 0) -> dict[str, list[str]]:
    """{method: cells} of the nth Markdown table (0: accuracy, 1: throughput)."""
    lines = md.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("| method ")]
    rows = {}
    for line in lines[starts[nth] + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0]] = cells[1:]
    return rows


def test_documented_cpu_sweep_tables_and_plots(tmp_path, data_dir):  # noqa: F811
    """README's CPU sweep: engine=fullkv,zipage budget=256,512 on a CPU. The clamps map both
    budgets to 128 (one Zipage run folder, named after what ran), and the Full-KV run repeats
    its cached baseline (one run in two folders crashed the old plots)."""
    (tmp_path / "data" / "gsm8k.jsonl").write_text(
        "".join(f'{{"id": "g{k}", "question": "q{k}: twice {k}?", "answer": "{2 * k}"}}\n'
                for k in (1, 2, 3)))
    subprocess.run([sys.executable, os.path.join(HARNESS, "fake_run.py"), "-m", "task=gsm8k",
                    "task.limit=2", "sampling.n=1", "sampling.max_tokens=32", "engine=fullkv,zipage",
                    "budget=256,512", f"data_dir={data_dir}", f"results_dir={tmp_path}/results",
                    "engine.device=cpu", "use_tqdm=false", "scoring.workers=1"],
                   cwd=tmp_path, env=ENV, check=True, capture_output=True)
    out = tmp_path / "reports"
    done = subprocess.run([sys.executable, "-m", "tasks.tables", str(tmp_path / "results/multirun"),
                           "--out", str(out)], cwd=ROOT, env=ENV, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    md = (out / "tables.md").read_text()
    assert list(table_rows(md)) == ["Full KV", "zipage b=128"]
    assert "1 more run folder(s) repeat a run shown here" in md
    folders = [p.parent.name for p in (tmp_path / "results/multirun").rglob("summary.json")]
    assert sorted(f.split("-")[0] for f in folders) == ["fullkv", "zipage"]  # one per run
    runs = pd.read_csv(out / "runs.csv")
    assert sorted(runs["engine"]) == ["fullkv", "zipage"]
    assert "\\toprule" in (out / "tables.tex").read_text()
    for kind in ("budget", "pareto"):
        assert (out / f"gsm8k_smollm2-135m_n1_len32_{kind}.png").stat().st_size > 5000


def test_tables_from_a_budget_sweep(tmp_path, data_dir, engine):  # noqa: F811
    summaries = {}
    for eng, budget in (("zipage", 512), ("zipage", 1024), ("zipage_paper", 512)):
        cfg = config(tmp_path, data_dir, f"engine={eng}", f"budget={budget}", "scoring.workers=1")
        summaries[eng, budget] = runner.evaluate(cfg, str(tmp_path / "results" / f"{eng}{budget}"))
    out = tmp_path / "reports"
    assert tables.main([str(tmp_path / "results"), "--out", str(out)]) == 0
    md = (out / "tables.md").read_text()
    acc = table_rows(md)
    assert list(acc) == ["Full KV", "zipage b=512", "zipage b=1024", "zipage_paper b=512"]
    s, b = summaries["zipage", 1024], summaries["zipage", 1024]["baseline"]
    assert acc["zipage b=1024"] == [f"{s['pass@1']:.4f} ± {s['pass@1_stderr']:.4f}",
                                    f"{b['accuracy_retained']:.1f}%"]
    assert acc["Full KV"] == [f"{b['pass@1']:.4f} ± {b['pass@1_stderr']:.4f}", "100.0%"]
    tput = table_rows(md, 1)
    assert tput["zipage b=1024"] == [f"{s['output_tokens_per_s']:.0f} ({b['speedup']:.2f}x)"]
    runs = pd.read_csv(out / "runs.csv")
    assert len(runs) == 4 and runs["budget"].isna().sum() == 1  # one shared baseline
    tex = (out / "tables.tex").read_text()
    assert "\\toprule" in tex and "\\bottomrule" in tex and "zipage\\_paper b=512" in tex
    assert f"{s['pass@1']:.4f} $\\pm$ {s['pass@1_stderr']:.4f}" in tex
    assert (out / "amc23_smollm2-135m_n3_len64_budget.png").stat().st_size > 5000
    assert (out / "amc23_smollm2-135m_n3_len64_pareto.png").stat().st_size > 5000


def test_runs_of_one_engine_and_budget_are_told_apart(tmp_path, data_dir, engine):  # noqa: F811
    """A sweep over a scoring switch and two preset names outside the built-in list."""
    for i, extra in enumerate((["engine.compression.redundancy=lightning"], [],
                               ["engine.name=snapkv"], ["engine.name=r-kv"])):
        cfg = config(tmp_path, data_dir, "budget=512", "scoring.workers=1", *extra)
        runner.evaluate(cfg, str(tmp_path / "results" / f"run{i}"))
    out = tmp_path / "reports"
    assert tables.main([str(tmp_path / "results"), "--out", str(out)]) == 0
    assert list(table_rows((out / "tables.md").read_text())) == [
        "Full KV", "r-kv b=512", "snapkv b=512",
        "zipage b=512 (compression.redundancy=lightning)", "zipage b=512 (compression.redundancy=none)"]
    assert len(list(out.glob("*.png"))) == 2


def test_every_comparison_preset_is_a_row_next_to_full_kv_and_zipage(tmp_path, data_dir,
                                                                     engine):  # noqa: F811
    from zipage.compression.presets import COMPARISON
    names = ("zipage",) + COMPARISON
    for name in names:
        cfg = config(tmp_path, data_dir, f"engine={name}", "budget=512", "scoring.workers=1")
        runner.evaluate(cfg, str(tmp_path / "results" / name))
    out = tmp_path / "reports"
    assert tables.main([str(tmp_path / "results"), "--out", str(out)]) == 0
    md = (out / "tables.md").read_text()
    want = ["Full KV"] + sorted(f"{n} b=512" for n in names)
    assert list(table_rows(md)) == want and list(table_rows(md, 1)) == want
    runs = pd.read_csv(out / "runs.csv")
    assert runs["budget"].isna().sum() == 1  # every preset shares one Full KV baseline


def test_a_partial_run_is_marked_and_a_summary_being_written_is_skipped(
        tmp_path, data_dir, engine, capsys):  # noqa: F811
    engine.crash_after = 4
    cfg = config(tmp_path, data_dir, "budget=512", "scoring.workers=1")
    with pytest.raises(RuntimeError):
        runner.evaluate(cfg, str(tmp_path / "results" / "run"))
    subprocess.run([sys.executable, "-m", "tasks.score", str(tmp_path / "results" / "run")],
                   cwd=ROOT, env=ENV, check=True, capture_output=True)
    (tmp_path / "results" / "scoring").mkdir()
    (tmp_path / "results" / "scoring" / "summary.json").write_text('{"task": "amc23", "pass')
    out = tmp_path / "reports"
    assert tables.main([str(tmp_path / "results"), "--out", str(out)]) == 0
    md = (out / "tables.md").read_text()
    assert table_rows(md)["zipage b=512"][0].endswith("*")
    assert "* partial run: rerun its command to finish it." in md
    assert "scoring/summary.json (not valid JSON; still being written?)" in capsys.readouterr().err


def test_no_runs_is_an_error(tmp_path, capsys):
    assert tables.main([str(tmp_path), "--out", str(tmp_path / "out")]) == 1
    assert "no run summaries under" in capsys.readouterr().err


def test_pareto_front_keeps_the_undominated_points():
    from tasks.tables_plots import pareto_front
    pts = pd.DataFrame({"output_tokens_per_s": [100, 200, 300, 250, 400],
                        "pass@1": [0.9, 0.8, 0.7, 0.6, 0.7]})
    front = pareto_front(pts)
    assert front.index.tolist() == [0, 1, 4]
