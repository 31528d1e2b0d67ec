"""The answer metrics in scored runs (issue 33, phase 2): summary.json's maj@k and accuracy by
length, the baseline block's agreement with Full KV, scores.jsonl's answer classes, and the
printed report; with the fake engine, checked against values worked out from the run's files."""
import json
import re
import statistics
from collections import Counter

import pytest

import fake_engine
from harness_fixtures import config, read_rows
from tasks import evaluate as runner
from tasks.identity import digest
from tasks.report import report


def voting(row) -> str | None:
    """A scored sample's answer when it votes (answered, not cut at max_tokens)."""
    return None if row["truncated"] or not row["extracted_answer"] else row["extracted_answer"]


def majority(answers: list) -> str | None:
    """Most frequent answer, the tie to the one seen first; None if nothing answered."""
    counts = Counter(a for a in answers if a is not None)
    return next((a for a in answers if a is not None and counts[a] == max(counts.values())),
                None)


def answers_by_problem(folder) -> dict:
    rows = read_rows(folder, "scores.jsonl")
    return {pid: [voting(rows[pid, i]) for i in sorted(i for p, i in rows if p == pid)]
            for pid in sorted({p for p, _ in rows})}


def test_a_scored_run_has_maj_at_k_agreement_and_length_bins(tmp_path, data_dir, engine):
    """The fake engine's answers are integers: a class is an answer string, so majorities can
    be counted here by string (the run itself starts no equivalence worker for them)."""
    s = runner.evaluate(config(tmp_path, data_dir, "budget=512"), str(tmp_path / "run"))
    b, base_dir = s["baseline"], s["baseline"]["run_dir"]
    run, base = answers_by_problem(tmp_path / "run"), answers_by_problem(base_dir)
    gold = {f"p{k}": str(2 * k) for k in (1, 2, 3, 4, 99)}
    assert s["maj@k"]["1"]["mean"] == pytest.approx(s["pass@1"])  # a group of one
    maj3 = [float(majority(a) == gold[p]) for p, a in run.items()]
    assert s["maj@k"]["3"] == {"mean": pytest.approx(sum(maj3) / 5), "problems": 5,
                               "stderr": pytest.approx(statistics.stdev(maj3) / 5 ** .5)}
    assert s["answer_equivalence"]["comparisons"] == 0  # integers: settled without math-verify
    agree = [float(majority(run[p]) == majority(base[p])) for p in run]
    assert b["answer_agreement"]["mean"] == pytest.approx(sum(agree) / 5)
    assert b["answer_agreement"]["unanswered_by_both"] == 1  # p99: the engine rejects it
    mine = [(p, a) for p, answers in run.items() for a in answers if a is not None]
    assert b["sample_answer_in_baseline"] == pytest.approx(
        sum(a in base[p] for p, a in mine) / len(mine))
    scores = read_rows(tmp_path / "run", "scores.jsonl")
    for p, answers in run.items():  # one class per distinct answer, numbered as first seen
        classes = [scores[p, i]["answer_class"] for i in range(3)]
        seen = list(dict.fromkeys(a for a in answers if a is not None))
        assert classes == [None if a is None else seen.index(a) for a in answers]
    samples = read_rows(tmp_path / "run").values()
    bins = s["accuracy_by_length"]["bins"]
    assert s["accuracy_by_length"]["edges"] == [0, 16, 32, 48, 64]
    assert [x["samples"] for x in bins] == [  # the last bin holds outputs of 64 tokens too
        sum(lo <= r["completion_tokens"] < hi or r["completion_tokens"] == hi == 64
            for r in samples) for lo, hi in ((0, 16), (16, 32), (32, 48), (48, 64))]
    assert sum(x["correct"] for x in bins) == sum(v["correct"] for v in scores.values())
    full = json.load(open(f"{base_dir}/summary.json"))
    assert b["maj@k"] == full["maj@k"] and b["accuracy_by_length"] == full["accuracy_by_length"]
    assert full["baseline"]["answer_agreement"]["mean"] == 1.0  # Full KV agrees with itself
    assert full["baseline"]["sample_answer_in_baseline"] == 1.0


def patch_answers(monkeypatch, change):
    """Every sample boxes an integer, right for two seeds in three (so each problem's
    majority is right); `change(k, answer)` rewrites a compressed run's answer string."""
    def answer(prompt, seed, budget):
        k = int(re.search(r"q(\d+):", prompt).group(1))
        text = str(2 * k if seed % 3 else 2 * k + 1)
        return f"So \\boxed{{{text if budget is None else change(k, text)}}}.", "stop"
    monkeypatch.setattr(fake_engine, "completion_for", answer)


def test_agreement_is_one_for_the_same_answers_and_falls_with_one_majority(
        tmp_path, data_dir, engine, monkeypatch):
    limit = ["budget=512", "task.limit=4"]
    patch_answers(monkeypatch, lambda k, text: text)
    same = runner.evaluate(config(tmp_path, data_dir, *limit), str(tmp_path / "same"))
    b = same["baseline"]
    assert b["answer_agreement"] == {"mean": 1.0, "stderr": 0.0, "problems": 4,
                                     "unanswered_by_both": 0, "unanswered_by_one": 0}
    assert b["sample_answer_in_baseline"] == 1.0 and same["maj@k"] == b["maj@k"]
    assert same["maj@k"]["3"]["mean"] == 1.0 and same["maj@k"]["1"]["mean"] == pytest.approx(2 / 3)

    patch_answers(monkeypatch, lambda k, text: "99" if k == 2 else text)  # p2's majority: 99
    other = runner.evaluate(config(tmp_path, data_dir, "budget=1024", "task.limit=4"),
                            str(tmp_path / "other"))
    b = other["baseline"]
    assert b["run_dir"] == same["baseline"]["run_dir"]  # the same Full-KV samples
    assert b["answer_agreement"]["mean"] == 0.75 and b["answer_agreement"]["stderr"] == 0.25
    assert b["sample_answer_in_baseline"] == 0.75  # p2's three answers are new
    assert other["maj@k"]["3"]["mean"] == 0.75 and b["maj@k"]["3"]["mean"] == 1.0

    text = report(other)
    assert "agreement with Full KV 75.0% ± 25.0% (majority answer, 4 problems)   answers " \
           "Full KV also gave 75.0%" in text
    lines = text.splitlines()
    i = lines.index(next(line for line in lines if line.startswith("maj@k ")))
    assert lines[i].split() == ["maj@k", "@1", "@3"]
    assert lines[i + 1].split() == ["Zipage", "0.5000", "±", "0.1667", "0.7500", "±", "0.2500"]
    assert lines[i + 2].split() == ["Full", "KV", "0.6667", "±", "0.0000", "1.0000", "±", "0.0000"]


def test_equivalent_answers_written_otherwise_still_agree(tmp_path, data_dir, engine,
                                                         monkeypatch):
    """"4.0" for Full KV's "4": math-verify's equivalence (in the equivalence workers), not
    string equality, decides the classes and the cross map."""
    patch_answers(monkeypatch, lambda k, text: f"{text}.0")
    s = runner.evaluate(config(tmp_path, data_dir, "budget=512", "task.limit=2"),
                        str(tmp_path / "run"))
    b = s["baseline"]
    assert b["answer_agreement"]["mean"] == 1.0 and b["sample_answer_in_baseline"] == 1.0
    assert b["cross_equivalence"]["comparisons"] > 0 and s["answer_equivalence"]["comparisons"] > 0
    assert s["maj@k"] == b["maj@k"]


def test_the_report_shows_length_bins_and_code_has_no_maj_at_k(tmp_path, data_dir, engine):
    s = runner.evaluate(config(tmp_path, data_dir, "budget=512"), str(tmp_path / "run"))
    lines = report(s).splitlines()
    i = lines.index("accuracy by output length in tokens (samples in the bin):")
    assert lines[i + 1].split() == ["0-15", "16-31", "32-47", "48-64"]
    for row, (label, x) in zip(lines[i + 2:i + 4], (("Zipage", s), ("Full KV", s["baseline"]))):
        cells = [("-" if b["accuracy"] is None else f"{b['accuracy']:.2f}") + f"({b['samples']})"
                 for b in x["accuracy_by_length"]["bins"]]
        assert row.startswith(label) and row[len(label):].replace(" (", "(").split() == cells
    code = {**s, "maj@k": None, "baseline": {**s["baseline"], "answer_agreement": None}}
    text = report(code)
    assert "maj@k n/a (code)" in text and "agreement with Full KV" not in text
    broken = {**s, "accuracy_by_length": {"error": "an output of 70 tokens is outside [0, 64]"}}
    assert "accuracy by output length n/a (an output of 70 tokens" in report(broken)


def test_a_baseline_scored_before_answer_classes_gets_them(tmp_path, data_dir, engine, capsys):
    """Its scores.jsonl without classes: computed for the agreement. Its summary from an older
    harness (no answer-class rule in its scoring identity): scored again, and said so."""
    cfg = config(tmp_path, data_dir, "budget=512")
    first = runner.evaluate(cfg, str(tmp_path / "run"))
    base_dir = first["baseline"]["run_dir"]
    scores = f"{base_dir}/scores.jsonl"
    rows = [json.loads(line) for line in open(scores)]
    with open(scores, "w") as f:
        f.writelines(json.dumps({k: v for k, v in r.items() if k != "answer_class"}) + "\n"
                     for r in rows)
    from tasks.score import rescore
    again = rescore(str(tmp_path / "run"))
    assert "reusing cached baseline" in capsys.readouterr().out
    assert again["baseline"]["answer_agreement"] == first["baseline"]["answer_agreement"]
    assert "answer_class" not in open(scores).read()  # computed, not written back

    summary = json.load(open(f"{base_dir}/summary.json"))
    older = {k: v for k, v in summary["scoring_identity"].items()
             if k not in ("answer_classes", "digest")}
    summary["scoring_identity"] = {**older, "digest": digest(older)}  # as an older harness wrote
    for key in ("maj@k", "answer_equivalence", "accuracy_by_length"):
        del summary[key]
    open(f"{base_dir}/summary.json", "w").write(json.dumps(summary))
    runner.evaluate(cfg, str(tmp_path / "run"))
    assert ("the answer-class rule (maj@k, agreement with Full KV) (none: scored before maj@k "
            "and agreement existed -> 1) changed") in capsys.readouterr().out
    assert json.load(open(f"{base_dir}/summary.json"))["maj@k"] == first["baseline"]["maj@k"]
    assert all("answer_class" in r for r in read_rows(base_dir, "scores.jsonl").values())


def test_the_full_kv_row_shows_its_own_truncation_rate(tmp_path, data_dir, engine):
    s = runner.evaluate(config(tmp_path, data_dir, "budget=512"), str(tmp_path / "run"))
    rows = {}
    for line in report(s).splitlines():  # the first table: pass@1 ... trunc
        if line.startswith(("Zipage ", "Full KV ")):
            rows.setdefault(line[:8].strip(), line)
    base = s["baseline"]["truncation_rate"]
    assert base is not None and 0 < s["truncation_rate"] < 1
    assert rows["Zipage"].split()[-1] == f"{s['truncation_rate']:.0%}"
    assert rows["Full KV"].split()[-1] == f"{base:.0%}"


@pytest.mark.parametrize("choice, label", [("engine=snapkv", "snapkv"),
                                           ("engine=zipage_attn_recent", "zipage_attn_recent"),
                                           ("engine=zipage", "Zipage")])
def test_the_report_labels_the_run_with_its_engine(tmp_path, data_dir, engine, choice, label):
    """A comparison method's rows are labelled with its name, not as Zipage; a long name
    widens the label column of every table, so the columns stay aligned."""
    s = runner.evaluate(config(tmp_path, data_dir, choice, "budget=512"), str(tmp_path / "run"))
    lines = report(s).splitlines()
    run_rows = [line for line in lines if line.startswith(label + " ")]
    base_rows = [line for line in lines if line.startswith("Full KV ") and ":" not in line]
    assert len(run_rows) == len(base_rows) == 3  # pass@1, maj@k, accuracy by length
    assert label == "Zipage" or not any(line.startswith("Zipage") for line in lines)
    width = max(8, len(label)) + 1

    def first_value(line: str) -> int:
        return width + len(line[width:]) - len(line[width:].lstrip())
    for mine, base in zip(run_rows, base_rows):
        assert mine[:width].rstrip() == label and base[:width].rstrip() == "Full KV"
        assert first_value(mine) == first_value(base)
