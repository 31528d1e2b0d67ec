"""The time-boxed runner of `bench fidelity-gpu` (scripts/fidelity/timebox.py): priority
order, the deadline (no task starts that cannot finish, running ones are killed), failures
stay contained."""
import time

import pytest

from scripts.fidelity.timebox import Estimator, Task, run

FN = "timebox_tasks:write_after"


def _run(tasks, tmp_path, max_wall_s, rate=0.1, workers=2, **kw):
    events = []
    out = run(tasks, workers, max_wall_s, str(tmp_path / "logs"), Estimator({"cell": rate}, 0.0),
              on_event=events.append, **kw)
    return out, events


def test_a_task_that_cannot_finish_is_not_started_and_a_shorter_later_one_runs(tmp_path):
    tasks = [Task("long", FN, dict(path=str(tmp_path / "long"), seconds=0.1), steps=1000),
             Task("short", FN, dict(path=str(tmp_path / "short"), seconds=0.1), priority=2,
                  steps=1)]
    out, events = _run(tasks, tmp_path, max_wall_s=20)  # long: 1000 x 0.1 s > 20 s
    assert out["long"].status == "not started" and "estimate" in out["long"].detail
    assert out["short"].status == "ok" and (tmp_path / "short").exists()
    assert not (tmp_path / "long").exists()


def test_running_tasks_are_killed_at_the_deadline_and_finished_ones_stay(tmp_path):
    tasks = [Task("quick", FN, dict(path=str(tmp_path / "quick"), seconds=0.0), steps=1),
             Task("slow", FN, dict(path=str(tmp_path / "slow"), seconds=60), steps=1)]
    t0 = time.monotonic()
    out, _ = _run(tasks, tmp_path, max_wall_s=6, rate=0.01)
    assert time.monotonic() - t0 < 20  # not the 60 s of the slow task
    assert out["quick"].status == "ok" and (tmp_path / "quick").exists()
    assert out["slow"].status == "killed" and not (tmp_path / "slow").exists()


def test_strict_priority_and_failures_skip_only_their_dependents(tmp_path):
    tasks = [Task("boom", "timebox_tasks:fail", priority=1),
             Task("needs boom", FN, dict(path=str(tmp_path / "x"), seconds=0), priority=1,
                  after=("boom",)),
             Task("crash", "timebox_tasks:die", priority=1),
             Task("later", FN, dict(path=str(tmp_path / "later"), seconds=0), priority=2)]
    out, events = _run(tasks, tmp_path, max_wall_s=60, workers=2)
    assert out["boom"].status == "failed" and "engine died" in out["boom"].detail
    assert out["needs boom"].status == "skipped"
    assert out["crash"].status == "failed" and "worker died" in out["crash"].detail
    assert out["later"].status == "ok"  # the dead worker was replaced
    starts = [e.split()[1] for e in events if e.startswith("start ")]
    assert starts.index("later") > starts.index("crash")  # P2 only after every P1 started


def test_a_lower_priority_task_waits_while_a_higher_one_waits_for_its_input(tmp_path):
    tasks = [Task("input", FN, dict(path=str(tmp_path / "in"), seconds=2), priority=0),
             Task("needs input", FN, dict(path=str(tmp_path / "a"), seconds=0), priority=1,
                  after=("input",)),
             Task("p2", FN, dict(path=str(tmp_path / "b"), seconds=0), priority=2)]
    out, events = _run(tasks, tmp_path, max_wall_s=60, workers=2)
    assert all(o.status == "ok" for o in out.values())
    starts = [e.split(" on ")[0][len("start "):] for e in events if e.startswith("start ")]
    assert starts == ["input", "needs input", "p2"]


def test_estimator_uses_the_measured_rate_of_its_kind():
    est = Estimator({"cell": 1.0}, overhead_s=2.0)
    t = Task("a", FN, steps=100)
    assert est.seconds(t) == pytest.approx(102.0)  # the prior
    est.record(Task("done", FN, steps=50), seconds=12.0)  # (12 - 2) / 50 = 0.2 s per step
    assert est.seconds(t) == pytest.approx(2.0 + 100 * 0.2 * 1.25)
    assert est.seconds(Task("b", FN, kind="agree", steps=10)) == pytest.approx(12.0)


def test_task_names_and_dependencies_are_checked(tmp_path):
    with pytest.raises(ValueError, match="unique"):
        _run([Task("a", FN), Task("a", FN)], tmp_path, 10)
    with pytest.raises(ValueError, match="unknown dependencies"):
        _run([Task("a", FN, after=("b",))], tmp_path, 10)


def test_a_kind_that_only_fails_is_given_up_and_other_kinds_still_run(tmp_path):
    tasks = [Task(f"bad{i}", "timebox_tasks:fail", kind="cell") for i in range(5)]
    tasks.append(Task("other", FN, dict(path=str(tmp_path / "o"), seconds=0), kind="agree",
                      priority=2))
    out, events = _run(tasks, tmp_path, max_wall_s=60, workers=1, fail_fast=2)
    assert [out[f"bad{i}"].status for i in range(5)] == ["failed"] * 2 + ["skipped"] * 3
    assert out["other"].status == "ok"
