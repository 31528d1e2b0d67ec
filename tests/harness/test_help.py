"""`python run.py --help` lists the presets a user can choose (the files in configs/<group>/),
not Hydra's internal schemas (base_engine, ...), and the config the command would run."""
import subprocess
import sys

from harness_fixtures import ROOT
from tasks.overrides import group_options


def help_text(*overrides: str) -> str:
    p = subprocess.run([sys.executable, "run.py", *overrides, "--help"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_help_lists_every_preset_and_nothing_else():
    text = help_text()
    listed = {line.split(": ", 1)[0]: line.split(": ", 1)[1].split(" (")[0].split(", ")
              for line in text.split("== Presets (group=option) ==\n")[1].split("\n\n")[0]
              .splitlines()}
    assert listed == {g: group_options(g) for g in ("model", "task", "engine", "sampling")}
    assert "base_" not in text and "python run.py task=amc23 budget=2048" in text


def test_help_shows_the_config_of_the_command():
    text = help_text("engine=snapkv", "budget=1024")
    config = text.split("== Config (this command's; override any key with key=value) ==\n")[1]
    assert "engine:\n  name: snapkv\n" in config and "\nbudget: 1024\n" in config
