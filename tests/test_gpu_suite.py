"""`bench gpu-suite`: stages are listed with their commands, a run logs and times every command,
a failing or overrunning one does not stop the rest, and the summary says which failed."""
import sys
import tarfile

import pytest

from scripts import bench
from scripts.gpu import stages as st


def test_list_prints_every_stage_and_its_commands(capsys, tmp_path):
    assert bench.main(["gpu-suite", "--list", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for name, stage in st.STAGES.items():
        assert f"{name}: {stage.description}" in out
        for c in stage.commands:
            assert f"[{c.name}, limit {c.limit_s} s]" in out
    assert f"--json {tmp_path}/throughput.json" in out  # {out} filled in
    assert "python -m pytest -m 'gpu and quick' tests/gpu" in out  # as a user would type it


def test_dry_run_prints_the_chosen_stages_and_runs_nothing(capsys, tmp_path):
    out_dir = tmp_path / "suite"
    assert bench.main(["gpu-suite", "--stages", "quick,long", "--dry-run",
                       "--out", str(out_dir)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("quick:") and "\nlong:" in printed and "tests:" not in printed
    assert not out_dir.exists()


def test_an_unknown_stage_is_named_with_the_known_ones(tmp_path):
    with pytest.raises(SystemExit, match=r"unknown \['nope'\]; the stages are tests, quick"):
        bench.main(["gpu-suite", "--stages", "tests,nope", "--out", str(tmp_path)])


def test_a_run_logs_times_and_survives_failures_and_overruns(monkeypatch, capsys, tmp_path):
    py = sys.executable
    monkeypatch.setattr(st, "STAGES", {
        "first": st.Stage("ok, then a failure", [
            st.Command("hello", 30, (py, "-c", "import os; print('hi', os.environ['MARK'])")),
            st.Command("broken", 30, (py, "-c", "import sys; print('bad'); sys.exit(3)"))],
            env={"MARK": "stage-env"}),
        "second": st.Stage("an overrun, then a report in {out}", [
            st.Command("slow", 1, (py, "-c", "import time; time.sleep(30)")),
            st.Command("report", 30, (py, "-c", "import sys; open(sys.argv[1], 'w').write('{}')",
                                      "{out}/report.json"))])})
    out = tmp_path / "suite"
    rc = bench.main(["gpu-suite", "--stages", "first,second", "--out", str(out),
                     "--no-clocks", "--pack"])
    printed = capsys.readouterr().out
    assert rc == 1  # one command failed, one ran out of time
    summary = printed.split("=== summary")[1]
    rows = {line.split()[1]: line.split() for line in summary.splitlines()[2:] if line.strip()}
    assert rows["hello"][2] == "0" and rows["broken"][2] == "3"
    assert rows["slow"][2] == "124" and int(rows["slow"][3]) < 10
    assert rows["report"][2] == "0" and (out / "report.json").read_text() == "{}"
    assert "hi stage-env" in printed  # the log's tail is printed, the stage's env was set
    # --pack: logs and phases went into suite.tgz; reports and the summary stay beside it
    assert sorted(p.name for p in out.iterdir()) == ["report.json", "suite.tgz", "summary.txt"]
    with tarfile.open(out / "suite.tgz") as tar:
        names = set(tar.getnames())
        phases = tar.extractfile("phases.txt").read().decode().split()
        slow_log = tar.extractfile("slow.log").read().decode()
    assert {"hello.log", "broken.log", "slow.log", "report.log"} <= names
    assert phases[0::2] == ["hello-start", "hello-end", "broken-start", "broken-end",
                            "slow-start", "slow-end", "report-start", "report-end"]
    assert "killed at its 1 s limit" in slow_log


def test_every_bench_command_of_every_stage_parses():
    """A stage's arguments are the subcommand's own options (an unknown one would end the
    stage at once on the device, after minutes of cold start)."""
    for name, stage in st.STAGES.items():
        for c in stage.commands:
            argv = c.resolved("/tmp/suite")
            if argv[1:3] != ["-m", "scripts.bench"]:
                continue
            args = bench.build_parser(argv[3]).parse_args(argv[3:])
            assert args.subcommand == argv[3], (name, c.name)
