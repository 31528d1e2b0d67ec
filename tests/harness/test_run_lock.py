"""The run folder's lock: a job that fails before writing anything leaves no folder behind;
one that wrote something, or found the folder there, keeps it."""
import os
import threading

import pytest

from tasks import rundir
from tasks.rundir import run_lock


def test_a_job_that_fails_before_writing_removes_the_folders_it_made(tmp_path):
    run_dir = tmp_path / "results" / "gsm8k" / "qwen3-8b" / "zipage-b2048"
    (tmp_path / "results").mkdir()
    with pytest.raises(RuntimeError, match="model did not load"):
        with run_lock(str(run_dir)):
            assert run_dir.is_dir()
            raise RuntimeError("model did not load")
    assert os.listdir(tmp_path / "results") == []


def test_ctrl_c_before_the_first_sample_removes_the_folder(tmp_path):
    run_dir = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        with run_lock(str(run_dir)):
            raise KeyboardInterrupt
    assert not run_dir.exists()


def test_a_folder_with_samples_is_kept_when_the_job_fails(tmp_path):
    run_dir = tmp_path / "run"
    with pytest.raises(RuntimeError):
        with run_lock(str(run_dir)):
            (run_dir / "samples.jsonl").write_text('{"problem_id": "q1"}\n')
            raise RuntimeError("killed mid-run")
    assert (run_dir / "samples.jsonl").read_text() == '{"problem_id": "q1"}\n'


def test_a_folder_that_was_there_before_is_kept(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    with pytest.raises(RuntimeError):
        with run_lock(str(run_dir)):
            raise RuntimeError("model did not load")
    assert run_dir.is_dir()


def test_a_job_left_waiting_makes_the_folder_again_when_the_first_job_removes_it(
        tmp_path, monkeypatch):
    run_dir = tmp_path / "baseline"
    second_is_waiting, first_inside = threading.Event(), threading.Event()
    real_flock = rundir.fcntl.flock

    class WaitSignallingFcntl:  # tells the first job when the second blocks on the lock
        LOCK_EX, LOCK_NB, LOCK_UN = rundir.fcntl.LOCK_EX, rundir.fcntl.LOCK_NB, rundir.fcntl.LOCK_UN

        @staticmethod
        def flock(f, op):
            if op == rundir.fcntl.LOCK_EX:
                second_is_waiting.set()
            return real_flock(f, op)

    monkeypatch.setattr(rundir, "fcntl", WaitSignallingFcntl)

    def first_job():
        try:
            with run_lock(str(run_dir)):
                first_inside.set()
                assert second_is_waiting.wait(timeout=30)
                raise RuntimeError("model did not load")
        except RuntimeError:
            pass

    first = threading.Thread(target=first_job)
    first.start()
    assert first_inside.wait(timeout=30)
    with run_lock(str(run_dir)):
        (run_dir / "samples.jsonl").write_text("row\n")
    first.join(timeout=30)
    assert second_is_waiting.is_set()
    assert (run_dir / "samples.jsonl").read_text() == "row\n"
    assert sorted(os.listdir(run_dir)) == [".lock", "samples.jsonl"]
