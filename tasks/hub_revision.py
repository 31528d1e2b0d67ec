"""The commit a benchmark is read at from the Hugging Face hub. A run without data_dir,
task.data_file or task.hf.revision is pinned when it is planned to the dataset repository's
current commit, as if `task.hf.revision=<commit>` had been typed: the commit is then in the
run's config.yaml, folder name and notes, so resuming and re-scoring read the same rows."""
from __future__ import annotations

import os

from omegaconf import OmegaConf

from tasks.base import DataError, get_task
from tasks.prepare import hf_source

_pinned: dict[str, tuple[str, str]] = {}  # repo -> (commit, note), asked once per process


def cached_commit(repo: str) -> str | None:
    """The commit of a copy in the local hub cache, if any: the one `main` last named, else
    the snapshot fetched last (a download at a commit records no `main`)."""
    from huggingface_hub import constants
    folder = os.path.join(constants.HF_HUB_CACHE, "datasets--" + repo.replace("/", "--"))
    try:
        with open(os.path.join(folder, "refs", "main")) as f:
            return f.read().strip() or None
    except OSError:
        pass
    snapshots = os.path.join(folder, "snapshots")
    found = sorted(os.scandir(snapshots), key=lambda e: e.stat().st_mtime) \
        if os.path.isdir(snapshots) else []
    return found[-1].name if found else None


def current_commit(repo: str, task: str) -> tuple[str, str]:
    """(commit, note): the repository's current commit on the hub, else its cached copy's;
    DataError naming the ways to give data when neither is there."""
    if repo in _pinned:
        return _pinned[repo]
    try:
        from huggingface_hub import HfApi
        commit, where = HfApi().dataset_info(repo, timeout=15).sha, "its current commit"
    except Exception as e:  # noqa: BLE001 - offline, unreachable, unknown repository, ...
        commit, where = cached_commit(repo), f"the cached copy (the hub: {type(e).__name__})"
        if commit is None:
            raise DataError(
                f"task {task}: no data_dir, and the Hugging Face hub could not be asked for "
                f"{repo}'s current commit ({type(e).__name__}: {str(e)[:200]}); pass "
                f"data_dir=... (or ZIPAGE_DATA_DIR) or task.data_file=<file.jsonl>") from None
    _pinned[repo] = commit, (f"data: {repo} from the Hugging Face hub at {where}, {commit} "
                             f"(task.hf.revision={commit} pins it)")
    return _pinned[repo]


def _unpinned_hub_repo(cfg) -> str | None:
    """The dataset repository a run reads from the hub without a pinned commit, else None."""
    if OmegaConf.select(cfg, "data_dir") is not None or cfg.task.data_file is not None \
            or cfg.task.hf.revision:
        return None
    repo = hf_source(cfg, get_task(cfg.task.name)).path
    if not repo:
        raise DataError(f"task {cfg.task.name}: no hub copy; pass data_dir=... (or "
                        f"ZIPAGE_DATA_DIR) or task.data_file=<file.jsonl>")
    return repo


def pin_hub_revision(eff) -> list[str]:
    """Set eff.task.hf.revision of an unpinned hub run (in place); the notes."""
    repo = _unpinned_hub_repo(eff)
    if repo is None:
        return []
    eff.task.hf.revision, note = current_commit(repo, eff.task.name)
    return [note]


def pinning_override(cfg) -> list[str]:
    """["task.hf.revision=<commit>"] for an unpinned hub job, else []: a sweep's jobs read
    the commit its planner named their folders after, however long they queue."""
    repo = _unpinned_hub_repo(cfg)
    return [] if repo is None else [f"task.hf.revision={current_commit(repo, cfg.task.name)[0]}"]
