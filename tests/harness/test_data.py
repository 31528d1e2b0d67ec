"""Bad data fails loudly at load, whatever the limit or the current directory (issue 11,
item 6), and bad engine options fail before any folder exists."""
import json
import os
import subprocess
import sys

import pytest

from harness_fixtures import ROOT, config, write_problems
from tasks import evaluate as runner
from tasks.base import DataError


def test_an_empty_data_file_is_an_error(tmp_path, data_dir, engine):
    open(os.path.join(data_dir, "amc23.jsonl"), "w").close()
    with pytest.raises(DataError, match=r"amc23.jsonl: no problems for task amc23"):
        runner.evaluate(config(tmp_path, data_dir, "engine=fullkv"), str(tmp_path / "run"))
    assert not os.path.exists(tmp_path / "run")


def test_an_empty_answer_is_rejected_with_its_line(tmp_path, data_dir, engine):
    with open(os.path.join(data_dir, "amc23.jsonl"), "a") as f:
        f.write(json.dumps({"id": "p5", "problem": "q5: twice 5?", "answer": "  "}) + "\n")
    with pytest.raises(DataError, match=r"amc23.jsonl:6: field\(s\) answer empty"):
        runner.evaluate(config(tmp_path, data_dir, "engine=fullkv"), str(tmp_path / "run"))


def test_the_whole_file_is_checked_not_only_the_rows_used(tmp_path, data_dir, engine):
    """The CPU clamp keeps 4 problems; a broken line 11 is still found."""
    write_problems(os.path.join(data_dir, "amc23.jsonl"), ks=range(1, 11), extra=["{oops"])
    cfg = config(tmp_path, data_dir, "engine=fullkv", "cpu.enabled=true")
    with pytest.raises(DataError, match=r"amc23.jsonl:11: invalid JSON"):
        runner.evaluate(cfg, str(tmp_path / "run"))
    assert not os.path.exists(tmp_path / "run")


def test_relative_data_dir_resolves_from_the_project_root(tmp_path):
    from tasks.prepare import ConfigError, resolve_data_dir
    root, data, elsewhere = tmp_path / "repo", tmp_path / "shared" / "datasets", tmp_path / "w"
    for d in (root, data, elsewhere):
        d.mkdir(parents=True)
    cwd = os.getcwd()
    try:
        os.chdir(elsewhere)
        assert resolve_data_dir("../shared/datasets", root=str(root)) == str(data)
        with pytest.raises(ConfigError) as err:
            resolve_data_dir("../nowhere", root=str(root))
        assert f"{elsewhere.parent}/nowhere" in str(err.value) and "project root" in str(err.value)
    finally:
        os.chdir(cwd)


def test_run_py_finds_a_root_relative_data_dir_from_any_directory(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "amc23.jsonl").write_text("")     # found, then rejected as empty: no model loads
    (tmp_path / "elsewhere").mkdir()
    rel = os.path.relpath(data, ROOT)          # valid from the project root only
    p = subprocess.run([sys.executable, os.path.join(ROOT, "run.py"), f"data_dir={rel}",
                        f"results_dir={tmp_path}/results", "engine.device=cpu"],
                       cwd=tmp_path / "elsewhere", capture_output=True, text=True, timeout=120)
    assert p.returncode == 2
    assert f"{data}/amc23.jsonl: no problems" in p.stderr, p.stderr


def test_a_bad_engine_option_fails_before_any_folder(tmp_path, data_dir, engine):
    cfg = config(tmp_path, data_dir, "budget=512", "+engine.compression.redundancy_wieght=0.1")
    with pytest.raises(runner.ConfigError, match="redundancy_wieght"):
        runner.evaluate(cfg)
    assert not os.path.exists(tmp_path / "results")


def load(path, lines: list[bytes]):
    from tasks.base import get_task
    with open(path, "wb") as f:
        f.write(b"".join(line + b"\n" for line in lines))
    return get_task("amc23").load(os.path.dirname(path))


GOOD = b'{"id": "a", "problem": "q1", "answer": "2"}'


def test_issue29_a_byte_order_mark_is_accepted(tmp_path):
    """Issue 29 item 9: a file saved with a UTF-8 BOM loads (it used to fail with Python's
    internal decoding hint); the BOM is not part of the first row's id."""
    problems = load(tmp_path / "amc23.jsonl", [b"\xef\xbb\xbf" + GOOD, b'{"id": 7, "problem": '
                                               b'"q2", "answer": 3}'])
    assert [(p.id, p.answer) for p in problems] == [("a", "2"), ("7", "3")]  # int id: decimal


@pytest.mark.parametrize("line,needle", [
    (b'{"id": "a", "problem": "q", "answer": "1"}',
     "amc23.jsonl:2: duplicate problem id 'a' at line 1 and line 2"),
    (b'{"id": null, "problem": "q", "answer": "1"}',
     "amc23.jsonl:2: id must be a non-empty string or an integer, got null"),
    (b'{"id": "", "problem": "q", "answer": "1"}',
     "amc23.jsonl:2: id must be a non-empty string or an integer, got an empty string"),
    (b'{"id": 1.5, "problem": "q", "answer": "1"}',
     "amc23.jsonl:2: id must be a non-empty string or an integer, got 1.5 (float)"),
    (b'{"id": true, "problem": "q", "answer": "1"}',
     "amc23.jsonl:2: id must be a non-empty string or an integer, got true (bool)"),
    (b'{"id": "b", "problem": "q", "answer": true}',
     "amc23.jsonl:2: field answer must be a string or a number, got true (bool)"),
    (b'{"id": "b", "problem": "q", "answer": NaN}',
     "amc23.jsonl:2: field answer must be a finite number, got nan"),
    (b'{"id": "b", "problem": "q", "answer": null}',
     "amc23.jsonl:2: field answer must be a string or a number, got null"),
    (b'{"id": "b", "problem": "q", "answer": [1]}',
     "amc23.jsonl:2: field answer must be a string or a number, got [1] (list)"),
], ids=["duplicate", "null-id", "empty-id", "float-id", "bool-id", "true", "nan", "null",
        "list"])
def test_issue29_bad_ids_and_answers_name_file_and_line(tmp_path, line, needle):
    """Issue 29 item 9: null/empty/non-string ids, JSON true/NaN answers and duplicate ids
    (both lines named) are clear errors instead of the strings 'None', 'True', 'nan'."""
    with pytest.raises(DataError) as err:
        load(tmp_path / "amc23.jsonl", [GOOD, line])
    assert needle in str(err.value)


def test_issue29_livecodebench_accepts_a_bom_and_names_both_duplicate_lines(tmp_path):
    from tasks.livecodebench.data import read_file
    row = {"question_id": "q1", "question_content": "x", "platform": "atcoder",
           "contest_date": "2024-01-01T00:00:00", "difficulty": "easy",
           "public_test_cases": json.dumps([{"input": "1", "output": "1", "testtype": "stdin"}])}
    path = tmp_path / "lcb.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(row).encode() + b"\n")
    assert [p.question_id for p in read_file(str(path))] == ["q1"]
    path.write_bytes(b"\xef\xbb\xbf" + (json.dumps(row) + "\n").encode() * 2)
    with pytest.raises(DataError, match="duplicate question_id 'q1' at line 1 and line 2"):
        read_file(str(path))
