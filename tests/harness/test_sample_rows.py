"""Several rows for one sample, or rows without this run's prompt hash, are never resolved
silently: a stated rule picks the scored row and the report names the lines (issue 29,
item 8)."""
import json
import subprocess
import sys

from harness_fixtures import ROOT, config, read_rows
from tasks import evaluate as runner


def line_of(run_dir) -> dict:
    """(problem, sample index) -> its line in samples.jsonl (1-based)."""
    rows = [json.loads(line) for line in open(run_dir / "samples.jsonl")]
    return {(r["problem_id"], r["sample_index"]): n for n, r in enumerate(rows, 1)}


def score_cli(run_dir):
    p = subprocess.run([sys.executable, "-m", "tasks.score", str(run_dir)], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return p.stdout, json.load(open(run_dir / "summary.json"))


def test_issue29_a_prepended_row_without_prompt_hash_is_not_scored(tmp_path, data_dir, engine):
    run = tmp_path / "run"
    first = runner.evaluate(config(tmp_path, data_dir, "engine=fullkv"), str(run))
    wrong = [k for k, v in read_rows(run, "scores.jsonl").items() if not v["correct"]
             and k[0] != "p99"][0]
    real = line_of(run)[wrong]
    forged = {"problem_id": wrong[0], "sample_index": wrong[1],
              "completion": f"\\boxed{{{2 * int(wrong[0][1:])}}}", "finish_reason": "stop",
              "completion_tokens": 3}
    other = {**forged, "prompt_hash": "0123456789abcdef"}  # another prompt's sample
    lines = (run / "samples.jsonl").read_text()
    (run / "samples.jsonl").write_text(json.dumps(forged) + "\n" + lines + json.dumps(other) + "\n")
    out, s = score_cli(run)
    assert s["pass@1"] == first["pass@1"]            # the real sample is scored, not line 1
    scored = read_rows(run, "scores.jsonl")[wrong]
    assert scored["line"] == real + 1 and not scored["correct"]
    want = json.load(open(run / "run.json"))["prompt_hashes"][wrong[0]]
    assert s["samples_file"]["unmatched"] == [
        {"line": 1, "problem_id": wrong[0], "sample_index": wrong[1], "why": "no prompt_hash"},
        {"line": 17, "problem_id": wrong[0], "sample_index": wrong[1],
         "why": f"prompt_hash 0123456789abcdef is not this problem's prompt ({want})"}]
    assert (f"2 row(s) of samples.jsonl without this run's prompt_hash, kept and not scored: "
            f"line 1 (problem {wrong[0]} sample {wrong[1]}): no prompt_hash") in out


def test_issue29_duplicates_are_reported_by_line_and_conflicts_not_scored(tmp_path, data_dir,
                                                                          engine):
    run = tmp_path / "run"
    runner.evaluate(config(tmp_path, data_dir, "engine=fullkv"), str(run))
    rows, lines = read_rows(run), line_of(run)
    same, other = rows["p1", 0], rows["p2", 0]
    forged = {**other, "completion": "\\boxed{4} or not"}
    with open(run / "samples.jsonl", "a") as f:
        f.write(json.dumps(same) + "\n")                                           # line 16
        f.write(json.dumps(forged) + "\n")                                          # line 17
    out, s = score_cli(run)
    dups = {(d["problem_id"], d["sample_index"]): d for d in s["samples_file"]["duplicate_rows"]}
    assert dups["p1", 0] == {"problem_id": "p1", "sample_index": 0, "kind": "identical",
                             "lines": [lines["p1", 0], 16], "scored_line": lines["p1", 0]}
    assert dups["p2", 0]["kind"] == "conflict" and dups["p2", 0]["scored_line"] is None
    assert ("p2", 0) not in read_rows(run, "scores.jsonl")   # neither row scored
    assert s["num_samples"] == 14 and not s["complete"]
    assert s["samples_file"]["conflicts"] == 1 and s["samples_file"]["duplicates"] == 2
    assert (f"warning: 1 sample(s) have differing rows, none of them scored (delete the wrong "
            f"line, then re-score): problem p2 sample 0 at lines {lines['p2', 0]}, 17") in out
    assert (f"note: 1 sample(s) have identical repeated rows, each scored once (its first "
            f"line): problem p1 sample 0 at lines {lines['p1', 0]}, 16") in out
    assert "of identical counting rows the first is scored" in s["samples_file"]["rule"]
