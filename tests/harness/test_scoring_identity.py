"""What determines a score is checked with every summary, the run's and its baseline's
(issue 29, items 1, 3 and 4): gold answers, scoring settings, the data file."""
import json
import os
import subprocess
import sys

from harness_fixtures import ROOT, config, read_rows
from tasks import evaluate as runner


def set_answer(data_dir, pid, answer=None, problem=None):
    path = os.path.join(data_dir, "amc23.jsonl")
    rows = [json.loads(line) for line in open(path)]
    for r in rows:
        if r["id"] == pid:
            r.update({k: v for k, v in (("answer", answer), ("problem", problem)) if v})
    with open(path, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)


def verdicts_follow(folder, pid, gold):
    """Every scored sample of `pid` is right exactly when its answer is `gold`."""
    rows = [v for (p, _), v in read_rows(folder, "scores.jsonl").items() if p == pid]
    assert rows
    for v in rows:
        assert v["correct_lenient"] == (v["extracted_answer"] == gold), v


def summary(folder):
    return json.load(open(os.path.join(folder, "summary.json")))


def test_issue29_changed_gold_answers_rescore_both_engines(tmp_path, data_dir, engine, capsys):
    """Item 1: after a gold answer changes, a rerun scores the run and its cached Full-KV
    baseline against the new answer (it used to reuse the stale baseline summary)."""
    cfg = ["budget=512"]
    first = runner.evaluate(config(tmp_path, data_dir, *cfg), str(tmp_path / "run"))
    base_dir = first["baseline"]["run_dir"]
    set_answer(data_dir, "p1", answer="3")          # the fake engine's wrong answer to q1
    capsys.readouterr()
    again = runner.evaluate(config(tmp_path, data_dir, *cfg), str(tmp_path / "run"))
    out = capsys.readouterr().out
    assert "reusing cached baseline" not in out
    assert f"note: {base_dir} scored again" in out and "p1 ('2' -> '3')" in out
    for folder in (tmp_path / "run", base_dir):
        verdicts_follow(folder, "p1", "3")
        assert summary(folder)["scoring_identity"]["golds"]["p1"] == "3"
    b, fresh = again["baseline"], summary(base_dir)
    assert b["pass@1"] == fresh["pass@1"] and b.get("status") is None
    assert b["accuracy_retained"] == 100 * again["pass@1"] / b["pass@1"]
    digest = fresh["scoring_identity"]["digest"]
    assert digest != first["scoring_identity"]["digest"]
    assert {v["scoring"] for v in read_rows(base_dir, "scores.jsonl").values()} == {digest}
    capsys.readouterr()
    runner.evaluate(config(tmp_path, data_dir, *cfg), str(tmp_path / "run"))
    assert "reusing cached baseline" in capsys.readouterr().out  # now current: reused


def test_issue29_scoring_overrides_apply_to_a_finished_run(tmp_path, data_dir, engine, capsys,
                                                          monkeypatch):
    """Item 3: scoring.penalize_truncated / timeout_s on a rerun of a finished folder score
    it (and its baseline) again with the new settings, and config.yaml says so;
    scoring.workers changes no verdict and no identity."""
    import fake_engine
    real = fake_engine.completion_for

    def boxed_when_cut(prompt, seed, budget):  # a cut output that had boxed the right answer
        text, reason = real(prompt, seed, budget)
        if reason == "length":  # "<think>{2k} ... and then"
            text += f" \\boxed{{{text.removeprefix('<think>').split()[0]}}}"
        return text, reason
    monkeypatch.setattr(fake_engine, "completion_for", boxed_when_cut)
    run = str(tmp_path / "run")
    first = runner.evaluate(config(tmp_path, data_dir, "budget=512"), run)
    assert first["pass@1"] < first["pass@1_incl_truncated"]  # the fake engine truncates some
    lenient = runner.evaluate(config(tmp_path, data_dir, "budget=512",
                                     "scoring.penalize_truncated=false"), run)
    assert lenient["pass@1"] == first["pass@1_incl_truncated"]
    base = summary(lenient["baseline"]["run_dir"])
    assert base["pass@1"] == base["pass@1_incl_truncated"] == lenient["baseline"]["pass@1"]
    saved = open(os.path.join(run, "config.yaml")).read()
    assert "penalize_truncated: false" in saved
    assert lenient["scoring_identity"]["options"]["penalize_truncated"] is False
    capsys.readouterr()
    same = runner.evaluate(config(tmp_path, data_dir, "budget=512", "scoring.workers=1",
                                  "scoring.penalize_truncated=false"), run)
    assert "scored again" not in capsys.readouterr().out
    assert same["scoring_identity"] == lenient["scoring_identity"]
    slow = runner.evaluate(config(tmp_path, data_dir, "budget=512", "scoring.timeout_s=9",
                                  "scoring.penalize_truncated=false"), run)
    assert "scoring.timeout_s (5.0 -> 9.0)" in capsys.readouterr().out
    assert "timeout_s: 9.0" in open(os.path.join(run, "config.yaml")).read()
    assert slow["rescored_because"] == ["scoring.timeout_s (5.0 -> 9.0)"]


def score_cli(run_dir):
    return subprocess.run([sys.executable, "-m", "tasks.score", str(run_dir)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_issue29_score_cli_checks_the_data_file(tmp_path, data_dir, engine):
    """Item 4: `python -m tasks.score RUN` compares the data with run.json: a changed gold
    answer is scored against and said (with the file digests); a changed problem text is
    refused, leaving the summary as it was."""
    run = tmp_path / "run"
    runner.evaluate(config(tmp_path, data_dir, "engine=fullkv"), str(run))
    generated = json.load(open(run / "run.json"))["data_sha256"]
    set_answer(data_dir, "p2", answer="5")  # q2's wrong answer from the fake engine
    p = score_cli(run)
    assert p.returncode == 0, p.stderr
    assert "changed since the samples were generated" in p.stdout
    assert "p2 ('4' -> '5')" in p.stdout
    s = summary(run)
    assert s["data_sha256_at_generation"] == generated != s["data_sha256"]
    verdicts_follow(run, "p2", "5")
    before = open(run / "summary.json").read()
    set_answer(data_dir, "p3", problem="q3: thrice 3?")
    p = score_cli(run)
    assert p.returncode == 2 and "problems' text" in p.stderr and "Traceback" not in p.stderr
    assert open(run / "summary.json").read() == before
