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
