"""The hub path (no data_dir: `datasets.load_dataset` at a pinned revision) yields the same
problems as the local JSONL copy. No hub access here, so each test builds a hub-shaped
parquet repository from /work/shared/datasets (the hub's column names, taken from the hub
source a run would use, the task's own (tasks/math_tasks.py) under `task.hf.*` overrides; a
README `configs:` block for a named subset) and points the source's path at it; the loading
code is the one a hub run uses."""
import json
import os

import datasets
import pytest

from conftest import ROOT
from tasks.base import DataError, HFSource
from tasks.prepare import hf_source
from tasks.prepare import task_from_config

DATA = os.environ.get("ZIPAGE_DATA_DIR", os.path.join(ROOT, "..", "shared", "datasets"))
pytestmark = pytest.mark.skipif(not os.path.isdir(DATA), reason=f"no local datasets at {DATA}")


def task_config(name):
    from hydra import compose, initialize_config_dir
    from tasks.config import register_configs
    register_configs()
    with initialize_config_dir(config_dir=os.path.join(ROOT, "configs"), version_base=None):
        return compose("config", overrides=[f"task={name}", f"data_dir={DATA}"])


def hub_copy(jsonl: str, repo, subset: str | None, split: str, columns: dict,
             shape=None) -> str:
    """A local dataset repository shaped like the hub's: parquet files, hub column names;
    `shape` turns a local row into the hub's row (its columns as the hub holds them)."""
    import pandas as pd
    with open(jsonl, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    to_hub = {ours: hub for hub, ours in columns.items()}
    frame = pd.DataFrame([shape(r) for r in rows] if shape else rows)
    frame = frame.rename(columns=to_hub) if shape is None else frame
    folder = subset or "data"
    os.makedirs(repo / folder)
    frame.to_parquet(repo / folder / f"{split}-00000-of-00001.parquet", index=False)
    if subset:  # the hub declares named subsets in the dataset card
        (repo / "README.md").write_text(f"---\nconfigs:\n- config_name: {subset}\n  data_files:\n"
                                        f"  - split: {split}\n    path: {folder}/{split}-*\n---\n")
    return str(repo)


# Each hub copy's columns as the hub holds them, from a local row (the local copies hold the
# bare answer: ../shared/datasets/README.md).
HUB_ROWS = {
    # openai/gsm8k: question and the worked solution ending in "#### N" (the local `solution`)
    "gsm8k": lambda r: {"question": r["question"], "answer": r["solution"]},
    # math-ai/aime24: no answer column; `solution` is "\boxed{N}"
    "aime24": lambda r: {"id": int(r["source_id"]), "problem": r["problem"],
                         "solution": f"\\boxed{{{r['answer']}}}", "url": r["url"]},
    # math-ai/amc23: `question`; answers as floats, as the source of the local copy wrote them
    "amc23": lambda r: {"id": int(r["source_id"]), "question": r["problem"],
                        "answer": float(r["answer"]), "url": r["url"]},
    "aime25": lambda r: {"id": r["id"], "problem": r["problem"], "answer": r["answer"]},
    "math500": lambda r: {"problem": r["problem"], "solution": r["solution"],
                          "answer": r["answer"], "subject": r["subject"], "level": r["level"],
                          "unique_id": r["id"]},
}


@pytest.fixture
def load_calls(tmp_path, monkeypatch):
    """Every datasets.load_dataset call (path, name, split, revision), cache kept in tmp."""
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf_cache"))
    calls, real = [], datasets.load_dataset

    def spy(path, name=None, **kw):
        calls.append((path, name, kw.get("split"), kw.get("revision")))
        return real(path, name, **kw)
    monkeypatch.setattr(datasets, "load_dataset", spy)
    return calls


@pytest.mark.parametrize("name", ["amc23", "aime24", "aime25", "math500", "gsm8k"])
def test_math_hub_path_yields_the_jsonl_problems(name, tmp_path, load_calls):
    """The same statements and bare gold answers as the local copy (GSM8K's hub answer is
    the worked solution: its gold was that whole text), in the same order."""
    cfg = task_config(name)
    task = task_from_config(cfg)
    hf = hf_source(cfg, task)
    local = task.load(DATA, None, data_file=cfg.task.data_file)
    repo = hub_copy(task.data_path(DATA, cfg.task.data_file), tmp_path / name, hf.name, hf.split,
                    hf.columns, HUB_ROWS[name])
    pinned = HFSource(**{**hf.__dict__, "path": repo, "revision": "0123abcd"})
    hub = task.load(None, None, hf=pinned)
    assert load_calls == [(repo, hf.name, hf.split, "0123abcd")]
    assert len(hub) == len(local) > 0
    assert [(p.prompt, p.answer) for p in hub] == [(p.prompt, p.answer) for p in local]
    if name in ("aime25", "math500"):  # the hub keeps the local ids
        assert [p.id for p in hub] == [p.id for p in local]


def test_a_hub_copy_whose_answer_column_is_bare_takes_answer_rule_none(tmp_path, load_calls):
    cfg = task_config("gsm8k")
    task = task_from_config(cfg)
    hf = hf_source(cfg, task)
    repo = hub_copy(task.data_path(DATA, None), tmp_path / "mirror", hf.name, hf.split, {},
                    lambda r: {"question": r["question"], "answer": r["answer"]})
    mirror = HFSource(**{**hf.__dict__, "path": repo, "revision": "0123abcd"})
    with pytest.raises(DataError, match=r"row 0: answer rule 'after_hashes' found no answer in "
                       r"'18'; .* takes task.hf.answer_rule=none"):
        task.load(None, None, hf=mirror)
    bare = task.load(None, None, hf=HFSource(**{**mirror.__dict__, "answer_rule": "none"}))
    assert [p.answer for p in bare] == [p.answer for p in task.load(DATA, None)]


def test_unpinned_hub_load_is_refused(tmp_path, load_calls):
    task = task_from_config(task_config("amc23"))
    with pytest.raises(Exception, match="pinned hub revision"):
        task.load(None, None, hf=HFSource(path=str(tmp_path), revision=None))
    assert load_calls == []


def test_livecodebench_hub_path_yields_the_jsonl_problems(tmp_path, load_calls):
    cfg = task_config("livecodebench")
    task = task_from_config(cfg)
    local = task.load(DATA, None, data_file=cfg.task.data_file)
    subset = "release_v6"  # the subset a hub run loads by default
    repo = hub_copy(task.data_path(DATA, cfg.task.data_file), tmp_path / "lcb", subset, "test", {})
    hub = task.load(None, None, hf=HFSource(path=repo, revision="0123abcd"))
    assert load_calls == [(repo, subset, "test", "0123abcd")]
    assert len(hub) == len(local) > 0
    assert [p.id for p in hub] == [p.id for p in local]
    assert [p.meta["lcb"] for p in hub] == [p.meta["lcb"] for p in local]  # tests included
    assert sum(p.meta["lcb"].num_public for p in hub) > len(hub)


@pytest.mark.parametrize("name", ["amc23", "livecodebench"])
def test_an_unreachable_hub_is_a_clear_error(name, monkeypatch):
    """What a user without network sees (simulated: the real call would wait on retries)."""
    def offline(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'https://huggingface.co' (offline)")
    monkeypatch.setattr(datasets, "load_dataset", offline)
    task = task_from_config(task_config(name))
    with pytest.raises(DataError, match=r"could not load .*@0123abcd.*offline"):
        task.load(None, None, hf=HFSource(path="someone/some-set", revision="0123abcd"))


@pytest.fixture
def hub(monkeypatch, tmp_path):
    """No data_dir; the hub answers `dataset_info` with commit `hub.sha` (None: unreachable),
    its cache is empty; `hub.asked` lists the repositories asked for."""
    import types
    import huggingface_hub
    from huggingface_hub import constants
    from tasks import hub_revision
    monkeypatch.delenv("ZIPAGE_DATA_DIR", raising=False)
    monkeypatch.setattr(hub_revision, "_pinned", {})
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub_cache"))
    state = types.SimpleNamespace(sha="c0ffee0123456789", asked=[])

    def dataset_info(self, repo, **kwargs):
        state.asked.append(repo)
        if state.sha is None:
            raise ConnectionError("Name or service not known")
        return types.SimpleNamespace(sha=state.sha)
    monkeypatch.setattr(huggingface_hub.HfApi, "dataset_info", dataset_info)
    return state


def run_config(tmp_path, *overrides):
    from hydra import compose, initialize_config_dir
    from tasks.config import register_configs
    register_configs()
    with initialize_config_dir(config_dir=os.path.join(ROOT, "configs"), version_base=None):
        return compose("config", overrides=["task=amc23", f"results_dir={tmp_path}/results",
                                            "engine.device=cpu", *overrides])


def test_a_run_without_data_dir_reads_the_hub_at_its_current_commit_and_names_it(
        tmp_path, hub, load_calls):
    from tasks.plan import make_plan
    cfg = task_config("amc23")
    hf = hf_source(cfg, task_from_config(cfg))
    repo = hub_copy(os.path.join(DATA, "amc23.jsonl"), tmp_path / "amc23", None, hf.split,
                    hf.columns)
    plan = make_plan(run_config(tmp_path, f"task.hf.path={repo}"))
    assert plan.cfg.task.hf.revision == hub.sha and hub.asked == [repo]
    assert load_calls == [(repo, None, "test", hub.sha)]
    assert len(plan.problems) == 4  # the CPU clamp of task.limit
    assert [n for n in plan.notes if n.startswith("data:")] == [
        f"data: {repo} from the Hugging Face hub at its current commit, {hub.sha} "
        f"(task.hf.revision={hub.sha} pins it)"]
    typed = make_plan(run_config(tmp_path, f"task.hf.path={repo}", f"task.hf.revision={hub.sha}"))
    assert typed.run_dir == plan.run_dir  # the same folder as the pinned command
    assert typed.baseline.run_dir == plan.baseline.run_dir
    again = make_plan(run_config(tmp_path, f"task.hf.path={repo}"))  # a run.py -m job
    assert again.notes == plan.notes and hub.asked == [repo]  # asked once per process


def test_an_unreachable_hub_falls_back_to_the_cached_copy(hub):
    from huggingface_hub import constants
    from tasks.hub_revision import current_commit
    hub.sha = None
    ref = os.path.join(constants.HF_HUB_CACHE, "datasets--math-ai--amc23", "refs", "main")
    os.makedirs(os.path.dirname(ref))
    with open(ref, "w") as f:
        f.write("feedface\n")
    commit, note = current_commit("math-ai/amc23", "amc23")
    assert commit == "feedface" and "the cached copy (the hub: ConnectionError)" in note


def test_a_copy_fetched_at_a_commit_is_found_without_a_main_ref(hub):
    """A run downloads at its pinned commit, which leaves snapshots/<commit> and no refs/main:
    offline, the last snapshot fetched is the copy."""
    from huggingface_hub import constants
    from tasks.hub_revision import current_commit
    hub.sha = None
    snapshots = os.path.join(constants.HF_HUB_CACHE, "datasets--math-ai--aime24", "snapshots")
    for age, commit in ((100, "older"), (0, "newer")):
        os.makedirs(os.path.join(snapshots, commit))
        os.utime(os.path.join(snapshots, commit), (1e9 - age, 1e9 - age))
    assert current_commit("math-ai/aime24", "aime24")[0] == "newer"


def test_no_data_dir_no_hub_and_no_cached_copy_says_how_to_give_data(tmp_path, hub):
    from tasks.plan import make_plan
    hub.sha = None
    with pytest.raises(DataError, match=r"amc23: no data_dir, and the Hugging Face hub could "
                       r"not be asked for math-ai/amc23's current commit \(ConnectionError: "
                       r"Name or service not known\); pass data_dir=\.\.\."):
        make_plan(run_config(tmp_path))
    assert not os.path.exists(tmp_path / "results")


def test_a_hub_sweep_pins_every_job_to_the_commit_its_folders_are_named_after(hub):
    from tasks import sweep
    stage1, stage2 = sweep.plan(["hydra/launcher=slurm", "task=amc23,aime24", "budget=1024,2048"])
    pin = f"task.hf.revision={hub.sha}"
    assert stage1 == [["task=amc23", "budget=1024", pin, "baseline.only=true"],
                      ["task=aime24", "budget=1024", pin, "baseline.only=true"]]
    assert [job[-1] for job in stage2] == [pin] * 4
    assert hub.asked == ["math-ai/amc23", "math-ai/aime24"]  # once per repository
