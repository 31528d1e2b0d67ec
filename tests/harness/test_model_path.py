"""`model.path=` runs are filed, labelled and scored as the checkpoint that ran, and a path
that is not a model fails before any folder (issue 29, items 5 and 6)."""
import json
import os
import subprocess
import sys

import pytest

from harness_fixtures import DATA_DIR, ROOT

THINKING_TEMPLATE = "{% for m in messages %}<|im_start|>{{ m.content }}{% endfor %}<think>\n"


def checkpoint(tmp_path, name="Qwen3-32B", template=THINKING_TEMPLATE):
    """A checkpoint folder as the harness reads it before loading (the fake engine loads)."""
    folder = tmp_path / "ckpt" / name
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": template}))
    return folder


def run_cli(monkeypatch, tmp_path, data_dir, *overrides):
    import run
    monkeypatch.setattr(sys, "argv", [
        "run.py", "task=amc23", "engine=fullkv", f"data_dir={data_dir}",
        f"results_dir={tmp_path}/results", "engine.device=cpu", "cpu.enabled=false",
        "sampling.n=1", "sampling.max_tokens=64", "use_tqdm=false", "scoring.workers=1",
        *overrides])
    run.cli()


def test_issue29_a_checkpoint_run_is_filed_and_labelled_as_what_ran(tmp_path, data_dir, engine,
                                                                     monkeypatch, capsys):
    """Item 5: not under smollm2-135m, not smollm2's thinking=false: the folder and the
    tables say Qwen3-32B, and its <think> template makes it a reasoning model."""
    from tasks import tables
    ckpt = checkpoint(tmp_path)
    run_cli(monkeypatch, tmp_path, data_dir, f"model.path={ckpt}")
    out = capsys.readouterr().out
    assert f"model.thinking=true, from the chat template of model.path={ckpt}" in out
    assert os.listdir(tmp_path / "results" / "amc23") == ["Qwen3-32B"]
    (folder,) = (tmp_path / "results" / "amc23" / "Qwen3-32B").iterdir()
    s = json.load(open(folder / "summary.json"))
    assert s["model"] == "Qwen3-32B" and any("model.thinking=true" in n for n in s["notes"])
    saved = (folder / "config.yaml").read_text()
    assert "thinking: true" in saved and "hub_id: null" in saved and "name: Qwen3-32B" in saved
    assert list(tables.load_runs(tmp_path / "results")["model"]) == ["Qwen3-32B"]
    # Stated on the command line, the user's choice wins (and is another run).
    run_cli(monkeypatch, tmp_path, data_dir, f"model.path={ckpt}", "model.thinking=false")
    assert "from the chat template" not in capsys.readouterr().out
    folders = sorted((tmp_path / "results" / "amc23" / "Qwen3-32B").iterdir())
    assert len(folders) == 2
    thinking = sorted("thinking: false" in (f / "config.yaml").read_text() for f in folders)
    assert thinking == [False, True]


def test_issue29_a_checkpoint_without_a_template_is_warned_about(tmp_path, data_dir, engine,
                                                                 monkeypatch, capsys):
    ckpt = checkpoint(tmp_path, "my ckpt/v2", template="")
    run_cli(monkeypatch, tmp_path, data_dir, f"model.path={ckpt}")
    err = capsys.readouterr().err
    assert "warning: model.path=" in err and "model.thinking=false assumed" in err
    assert os.listdir(tmp_path / "results" / "amc23") == ["v2"]


@pytest.mark.parametrize("target,needle", [
    ("README.md", "model.path=README.md is not a model: pass a checkpoint folder (with "
                  "config.json) or a GGUF file (.gguf)"),
    ("tasks", "model.path=tasks is a folder without config.json"),
    ("nowhere", "model.path=nowhere does not exist")])
def test_issue29_a_path_that_is_not_a_model_fails_before_any_folder(tmp_path, target, needle):
    """Item 6: exit 2, one clear line, no run folder (it used to leave one holding .lock)."""
    p = subprocess.run([sys.executable, "run.py", f"model.path={target}", f"data_dir={DATA_DIR}",
                        f"results_dir={tmp_path}/results"], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 2 and needle in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert not os.path.exists(tmp_path / "results")
