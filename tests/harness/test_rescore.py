"""Re-scoring never loses or rewrites samples (issue 11, items 2, 3 and 7)."""
import json
import subprocess
import sys
import time

import pytest

import fake_engine
from harness_fixtures import ROOT, config, read_rows
from tasks import evaluate as runner


def score_cli(run_dir):
    return subprocess.run([sys.executable, "-m", "tasks.score", str(run_dir)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_rescore_while_generating_keeps_every_sample(tmp_path, data_dir, engine):
    """A real `python -m tasks.score` process runs while this process keeps appending."""
    run_dir = tmp_path / "run"
    scorer = {}

    def on_step(step):
        if step == 18 and not scorer:  # the short samples are on disk, the long ones running
            scorer["p"] = subprocess.Popen([sys.executable, "-m", "tasks.score", str(run_dir)],
                                           cwd=ROOT, stdout=subprocess.PIPE,
                                           stderr=subprocess.PIPE, text=True)
        elif 18 < step < 40 and scorer and scorer["p"].poll() is None:
            time.sleep(0.05)          # appends land while the scorer reads and scores
        elif step == 40 and scorer:
            scorer["out"] = scorer["p"].communicate(timeout=120)  # its write is done; go on

    engine.on_step = on_step
    runner.evaluate(config(tmp_path, data_dir, "engine=fullkv"), str(run_dir))
    out, err = scorer["out"]
    assert scorer["p"].returncode == 0, err
    assert "PARTIAL" in out                                    # it saw a run in progress
    lines = open(run_dir / "samples.jsonl").read().splitlines()
    assert len(lines) == 15 and len(read_rows(run_dir)) == 15  # nothing lost
    assert len(read_rows(run_dir, "scores.jsonl")) == 15


def test_rescore_keeps_and_reports_unusable_lines(tmp_path, data_dir, engine):
    run_dir = tmp_path / "run"
    runner.evaluate(config(tmp_path, data_dir, "engine=fullkv"), str(run_dir))
    stranger = json.dumps({"problem_id": "p77", "sample_index": 0, "completion": "x"})
    with open(run_dir / "samples.jsonl", "ab") as f:
        f.write(b'{"foo": 1}\n[1, 2, 3]\n\xff\xfe not text\n' + stranger.encode() + b"\n")
    before = open(run_dir / "samples.jsonl", "rb").read()
    p = score_cli(run_dir)
    assert p.returncode == 0, p.stderr
    assert open(run_dir / "samples.jsonl", "rb").read() == before  # not one byte changed
    report = json.load(open(run_dir / "summary.json"))["samples_file"]
    assert [(b["line"], b["why"]) for b in report["unreadable_lines"]] == [
        (16, "no string problem_id"), (17, "a JSON list, not an object"), (18, "not UTF-8 text")]
    assert report["ignored"] == [{"line": 19, "problem_id": "p77", "sample_index": 0}]
    assert "line 16: no string problem_id" in p.stdout and "(lines 19)" in p.stdout
    assert json.load(open(run_dir / "summary.json"))["num_samples"] == 15


def test_resume_survives_unusable_and_torn_lines(tmp_path, data_dir, engine):
    run_dir = tmp_path / "run"
    cfg = config(tmp_path, data_dir, "engine=fullkv")
    engine.crash_after = 4
    with pytest.raises(RuntimeError):
        runner.evaluate(cfg, str(run_dir))
    with open(run_dir / "samples.jsonl", "ab") as f:
        f.write(b'[1, 2, 3]\n{"problem_id": "p1", "sample_in')  # a list, then a write cut by a kill
    s = runner.evaluate(cfg, str(run_dir))
    assert s["complete"] and s["num_samples"] == 15
    text = open(run_dir / "samples.jsonl", "rb").read()
    assert b'[1, 2, 3]\n{"problem_id": "p1", "sample_in\n' in text  # kept, now terminated
    assert [b["line"] for b in s["samples_file"]["unreadable_lines"]] == [5, 6]


def test_score_reports_a_missing_folder_without_a_traceback(tmp_path):
    p = score_cli(tmp_path / "nope")
    assert p.returncode == 2 and "no run folder at" in p.stderr and "Traceback" not in p.stderr
    (tmp_path / "empty").mkdir()
    p = score_cli(tmp_path / "empty")
    assert p.returncode == 2 and "config.yaml and run.json missing" in p.stderr
    assert "Traceback" not in p.stderr


def test_score_on_a_folder_of_runs_names_the_runs_in_it(tmp_path, data_dir, engine, capsys,
                                                         monkeypatch):
    from tasks.score import main
    for budget in (256, 512):
        runner.evaluate(config(tmp_path, data_dir, f"budget={budget}"),
                        str(tmp_path / "runs" / "amc23" / f"zipage-b{budget}"))
    capsys.readouterr()
    monkeypatch.chdir(tmp_path)
    assert main(["runs"]) == 2
    assert capsys.readouterr().err == (
        "error: runs is not a run folder but holds 2: runs/amc23/zipage-b256, "
        "runs/amc23/zipage-b512; score one at a time (python -m tasks.score <run folder>)\n")


def test_score_refuses_a_timeout_or_worker_count_that_cannot_score(tmp_path, data_dir, engine,
                                                                   capsys):
    from tasks.score import main
    run_dir = tmp_path / "run"
    runner.evaluate(config(tmp_path, data_dir, "engine=fullkv"), str(run_dir))
    scores = open(run_dir / "scores.jsonl", "rb").read()
    capsys.readouterr()
    # the math grader raised a 0 s timeout to 1 s without a word
    for timeout in ("0", "nan", "1.5"):
        assert main([str(run_dir), "--timeout", timeout]) == 2
        assert "scoring.timeout_s=" in capsys.readouterr().err
    with pytest.raises(SystemExit) as done:   # a pool of -1 workers failed inside scoring
        main([str(run_dir), "--workers", "-1"])
    assert done.value.code == 2 and "--workers: 0 or more" in capsys.readouterr().err
    assert open(run_dir / "scores.jsonl", "rb").read() == scores  # nothing rescored
    assert main([str(run_dir), "--workers", "0"]) == 0   # 0: the run's scoring.workers


def test_a_rejected_prompt_is_reported(tmp_path, data_dir, engine, capsys):
    from tasks.report import report
    s = runner.evaluate(config(tmp_path, data_dir, "engine=fullkv"), str(tmp_path / "run"))
    assert s["engine_errors"] == [{"problem_id": "p99", "samples": 3, "error": "prompt too long"}]
    assert "engine rejected 1 problem(s), counted wrong: p99 (3 samples): prompt too long" in report(s)
    assert s["num_problems"] == 5 and s["error_rate"] == pytest.approx(3 / 15)


def test_completions_the_engine_drops_silently_are_reported_and_retried(tmp_path, data_dir,
                                                                        engine, monkeypatch, capsys):
    real = fake_engine.FakeLLM.generate

    def dropping(self, prompts, params, use_tqdm=True, on_sample=None):
        keep = lambda k, c: None if (k, c.index) == (0, 1) else on_sample(k, c)  # noqa: E731
        return real(self, prompts, params, use_tqdm, keep)
    monkeypatch.setattr(fake_engine.FakeLLM, "generate", dropping)
    cfg = config(tmp_path, data_dir, "engine=fullkv")
    s = runner.evaluate(cfg, str(tmp_path / "run"))
    assert "no completion for problem p1 samples [1]" in capsys.readouterr().err
    assert not s["complete"] and s["num_samples"] == 14
    monkeypatch.setattr(fake_engine.FakeLLM, "generate", real)
    assert runner.evaluate(cfg, str(tmp_path / "run"))["complete"]
