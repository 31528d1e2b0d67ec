"""`python -m tasks.tables`: pandas tables (Markdown, LaTeX, CSV) and plots from run folders."""
import json
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
    for kind in ("budget", "pareto", "length"):
        assert (out / f"gsm8k_smollm2-135m_n1_len32_{kind}.png").stat().st_size > 5000
    # the answer metrics (issue 33): n=1 gives maj@1 only, which is pass@1
    answers = table_after(md, "### gsm8k")
    assert answers["method"] == ["maj@1", "agreement", "answers in Full KV"]
    for method, cells in answers.items():
        if method != "method":
            assert cells[0] == table_rows(md)[method][0] and cells[1] != "n/a"
    assert answers["Full KV"][1] == "100.0 ± 0.0%"  # Full KV agrees with itself
    zipage = runs.set_index("engine").loc["zipage"]
    assert 0 <= zipage["answer_agreement"] <= 1 and json.loads(zipage["accuracy_by_length"])[
        "edges"] == [0, 8, 16, 24, 32]


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
    agreement = b["answer_agreement"]["mean"]
    assert acc["zipage b=1024"] == [f"{s['pass@1']:.4f} ± {s['pass@1_stderr']:.4f}",
                                    f"{b['accuracy_retained']:.1f}%", f"{100 * agreement:.1f}%"]
    assert acc["Full KV"] == [f"{b['pass@1']:.4f} ± {b['pass@1_stderr']:.4f}", "100.0%", "100.0%"]
    maj = {k: f"{v['mean']:.4f} ± {v['stderr']:.4f}" for k, v in s["maj@k"].items()}
    assert table_after(md, "### amc23")["zipage b=1024"] == [
        maj["1"], maj["3"], f"{100 * agreement:.1f} ± {100 * b['answer_agreement']['stderr']:.1f}%",
        f"{100 * b['sample_answer_in_baseline']:.1f}%"]
    tput = table_rows(md, 1)
    assert tput["zipage b=1024"] == [f"{s['output_tokens_per_s']:.0f} ({b['speedup']:.2f}x)"]
    runs = pd.read_csv(out / "runs.csv")
    assert len(runs) == 4 and runs["budget"].isna().sum() == 1  # one shared baseline
    tex = (out / "tables.tex").read_text()
    assert "\\toprule" in tex and "\\bottomrule" in tex and "zipage\\_paper b=512" in tex
    assert f"{s['pass@1']:.4f} $\\pm$ {s['pass@1_stderr']:.4f}" in tex
    assert (out / "amc23_smollm2-135m_n3_len64_budget.png").stat().st_size > 5000
    assert (out / "amc23_smollm2-135m_n3_len64_pareto.png").stat().st_size > 5000
    assert (out / "amc23_smollm2-135m_n3_len64_length.png").stat().st_size > 5000


def test_runs_of_one_engine_and_budget_are_told_apart(tmp_path, data_dir, engine):  # noqa: F811
    """A sweep over a scoring switch and two preset names outside the built-in list."""
    for i, extra in enumerate((["engine.compression.redundancy=none"], [],
                               ["engine.name=snapkv"], ["engine.name=r-kv"])):
        cfg = config(tmp_path, data_dir, "budget=512", "scoring.workers=1", *extra)
        runner.evaluate(cfg, str(tmp_path / "results" / f"run{i}"))
    out = tmp_path / "reports"
    assert tables.main([str(tmp_path / "results"), "--out", str(out)]) == 0
    assert list(table_rows((out / "tables.md").read_text())) == [
        "Full KV", "r-kv b=512", "snapkv b=512",
        "zipage b=512 (compression.redundancy=lightning)", "zipage b=512 (compression.redundancy=none)"]
    assert len(list(out.glob("*.png"))) == 3  # budget, pareto, length


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


def test_a_missing_folder_is_named_as_missing(tmp_path, capsys):
    assert tables.main([str(tmp_path / "multirn"), "--out", str(tmp_path / "out")]) == 2
    assert "multirn is not a folder" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_pareto_front_keeps_the_undominated_points():
    from tasks.tables_plots import pareto_front
    pts = pd.DataFrame({"output_tokens_per_s": [100, 200, 300, 250, 400],
                        "pass@1": [0.9, 0.8, 0.7, 0.6, 0.7]})
    front = pareto_front(pts)
    assert front.index.tolist() == [0, 1, 4]


def write_summary(root, name, task, engine, budget, **fields):
    """A hand-made summary.json (one setting: smollm2-135m, n=4, max_tokens=64, T=0.6)."""
    run = root / name
    run.mkdir(parents=True)
    s = {"task": task, "model": "smollm2-135m", "engine": engine, "budget": budget, "n": 4,
         "max_tokens": 64, "temperature": 0.6, "seed": 0, "pass@1": 0.5, "pass@1_stderr": 0.1,
         "num_samples": 40, "num_samples_expected": 40, "complete": True,
         "output_tokens_per_s": 100.0, "baseline": {"accuracy_retained": 100.0}, **fields}
    (run / "summary.json").write_text(json.dumps(s))


def by_length(accuracies):
    edges = [0, 16, 32, 48, 64]
    return {"edges": edges, "bins": [{"lo": lo, "hi": hi, "samples": 10, "correct": round(10 * a),
                                      "accuracy": a}
                                     for lo, hi, a in zip(edges, edges[1:], accuracies)]}


def maj(**ks):
    return {k[1:]: {"mean": m, "stderr": 0.1, "problems": 10} for k, m in ks.items()}


def table_after(md: str, heading: str) -> dict[str, list[str]]:
    """{method: cells, "method": header cells} of the first table after a heading line."""
    lines = md.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(heading))
    rows = {}
    for line in [lines[start + 2]] + lines[start + 4:]:  # the header, then under the |:--- line
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0]] = cells[1:]
    return rows


def test_maj_at_k_agreement_columns_and_the_length_plot(tmp_path):
    """Summaries with the answer metrics (issue 33), an older one without them and a code
    task (maj@k is not defined for code): n/a, never 0."""
    root = tmp_path / "results"
    agree = {"mean": 0.8, "stderr": 0.05, "problems": 10, "unanswered_by_both": 1,
             "unanswered_by_one": 0}
    write_summary(root, "full", "amc23", "fullkv", None, **{
        "maj@k": maj(k1=0.5, k2=0.6, k4=0.7), "accuracy_by_length": by_length([1, .8, .5, 0]),
        "baseline": {"accuracy_retained": 100.0, "sample_answer_in_baseline": 1.0,
                     "answer_agreement": {**agree, "mean": 1.0, "stderr": 0.0}}})
    write_summary(root, "z128", "amc23", "zipage", 128, **{
        "maj@k": maj(k1=0.45, k2=0.55), "accuracy_by_length": by_length([1, .7, .2, 0]),
        "baseline": {"accuracy_retained": 90.0, "answer_agreement": agree,
                     "sample_answer_in_baseline": 0.9}})
    write_summary(root, "z256", "amc23", "zipage", 256, **{"maj@k": [0.5]})  # older/malformed
    write_summary(root, "lcb_full", "livecodebench", "fullkv", None)
    write_summary(root, "lcb_z128", "livecodebench", "zipage", 128)
    out = tmp_path / "reports"
    assert tables.main([str(root), "--out", str(out)]) == 0
    md = (out / "tables.md").read_text()
    acc = table_rows(md)
    assert [cells[-1] for cells in acc.values()] == ["100.0%", "80.0%", "n/a"]  # mean agreement
    amc = table_after(md, "### amc23")
    assert amc["method"] == ["maj@1", "maj@2", "agreement", "answers in Full KV"]  # k shared
    assert amc["Full KV"] == ["0.5000 ± 0.1000", "0.6000 ± 0.1000", "100.0 ± 0.0%", "100.0%"]
    assert amc["zipage b=128"] == ["0.4500 ± 0.1000", "0.5500 ± 0.1000", "80.0 ± 5.0%", "90.0%"]
    assert amc["zipage b=256"] == ["n/a"] * 4
    lcb = table_after(md, "### livecodebench")
    assert lcb["method"] == ["maj@k", "agreement", "answers in Full KV"]
    assert lcb["Full KV"] == lcb["zipage b=128"] == ["n/a"] * 3
    assert lcb["zipage b=256"] == ["-"] * 3  # no such run
    tex = (out / "tables.tex").read_text()
    assert "amc23, maj@k $\\pm$ stderr and agreement with Full KV" in tex
    assert "80.0 $\\pm$ 5.0\\%" in tex
    assert (out / "amc23_smollm2-135m_n4_len64_length.png").stat().st_size > 5000
    assert not (out / "livecodebench_smollm2-135m_n4_len64_length.png").exists()
    runs = pd.read_csv(out / "runs.csv")
    assert runs.set_index("run_dir")["maj@4"].notna().sum() == 1
