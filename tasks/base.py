"""Task protocol: how a benchmark plugs into run.py and `python -m tasks.score`.

A task is a class registered by name with `@register("name")`. The harness builds it as
`Task(options)` (`options` = the `task.options` mapping of the config, task-specific knobs,
plus `penalize_truncated` from scoring.* and `thinking` from model.thinking, unless the task
options set them) and calls, in order:

    problems = task.load(data_dir, limit, data_file=..., hf=...)   # list[Problem]
    msgs     = task.messages(problem)                              # chat messages
    ... generation; each sample becomes one row of samples.jsonl ...
    verdicts = task.score(rows, problems_by_id, workers=2, timeout=5.0)
    extras   = task.summary_extras(rows, verdicts, problems_by_id) # merged into summary.json

Rows (one per sample) carry at least: problem_id, sample_index, seed, prompt_tokens,
completion, completion_tokens, finish_reason ("stop" | "length" | "error"), error.
A verdict is a dict with at least `correct` (bool) and `extracted_answer` (str | None);
optional keys the generic summary understands: `truncated` (bool), `has_boxed` (bool),
`error` (str | None), `correct_lenient` (bool: correct if truncation were not penalised).
Verdicts are merged into the rows, so keep their values JSON-serialisable.
`score` must never raise for one bad sample: return a verdict with `error` set instead.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable

INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."


class DataError(ValueError):
    """Malformed or missing benchmark data (message names file and line)."""


@dataclass
class Problem:
    id: str                      # unique within the task, a string
    prompt: str                  # the problem statement shown to the model
    answer: Any = None           # gold (a string for math; anything the task's scorer reads)
    meta: dict = field(default_factory=dict)   # extra fields (difficulty, tests, ...)


@dataclass
class HFSource:
    """Hugging Face fallback used when no data directory is given."""
    path: str | None = None
    name: str | None = None
    split: str = "test"
    revision: str | None = None  # must be a pinned commit: we refuse to load an unpinned hub set
    columns: dict = field(default_factory=dict)  # hub column -> our field name


class Task:
    name: str = ""
    required_fields: tuple[str, ...] = ()   # fields every row must have (checked per line)

    def __init__(self, options: dict | None = None):
        self.options = dict(options or {})

    # -- data ------------------------------------------------------------------------
    def to_problem(self, row: dict) -> Problem:
        raise NotImplementedError

    def load(self, data_dir: str | None, limit: int | None = None, *,
             data_file: str | None = None, hf: HFSource | None = None) -> list[Problem]:
        """First `limit` problems from `<data_dir>/<data_file or name.jsonl>`, else the hub."""
        if data_dir:
            path = os.path.join(data_dir, data_file or f"{self.name}.jsonl")
            rows = read_jsonl(path, self.required_fields, limit)
        else:
            rows = read_hub(hf or HFSource(), self.name, self.required_fields, limit)
        problems = [self.to_problem(r) for r in rows]
        seen: set[str] = set()
        for p in problems:
            if p.id in seen:
                raise DataError(f"{self.name}: duplicate problem id {p.id!r}")
            seen.add(p.id)
        return problems

    # -- prompting and scoring ---------------------------------------------------------
    def messages(self, problem: Problem) -> list[dict]:
        return [{"role": "user", "content": f"{problem.prompt}\n{INSTRUCTION}"}]

    def score(self, rows: list[dict], problems: dict[str, Problem], *,
              workers: int = 2, timeout: float = 5.0) -> list[dict]:
        raise NotImplementedError

    def summary_extras(self, rows: list[dict], verdicts: list[dict],
                       problems: dict[str, Problem]) -> dict:
        return {}


def read_jsonl(path: str, required: tuple[str, ...], limit: int | None = None) -> list[dict]:
    """Read and validate a JSON Lines file; errors name the file and the 1-based line."""
    if not os.path.isfile(path):
        raise DataError(f"data file not found: {path}")
    rows = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if limit is not None and len(rows) >= limit:
                break
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataError(f"{path}:{lineno}: invalid JSON ({e.msg})") from None
            if not isinstance(row, dict):
                raise DataError(f"{path}:{lineno}: expected a JSON object, got {type(row).__name__}")
            missing = [k for k in required if k not in row or row[k] is None]
            if missing:
                raise DataError(f"{path}:{lineno}: missing field(s) {', '.join(missing)}")
            bad = [k for k in required if not isinstance(row[k], (str, int, float))]
            if bad:
                raise DataError(f"{path}:{lineno}: field(s) {', '.join(bad)} must be scalars")
            row["id"] = str(row.get("id", lineno - 1))
            rows.append(row)
    return rows


def read_hub(hf: HFSource, task: str, required: tuple[str, ...], limit: int | None) -> list[dict]:
    """The pinned Hugging Face copy (needs network and `datasets`)."""
    if not hf.path or not hf.revision:
        raise DataError(
            f"task {task!r}: no data directory given (data_dir=... or ZIPAGE_DATA_DIR) and no "
            f"pinned hub revision (task.hf.path / task.hf.revision); refusing an unpinned download")
    try:
        import datasets
    except ImportError:
        raise DataError("loading from the hub needs `pip install datasets`; "
                        "or pass data_dir=../shared/datasets") from None
    ds = datasets.load_dataset(hf.path, hf.name, split=hf.split, revision=hf.revision)
    rows = []
    for i, rec in enumerate(ds):
        if limit is not None and i >= limit:
            break
        row = {hf.columns.get(k, k): v for k, v in rec.items()}
        row.setdefault("id", str(i))
        missing = [k for k in required if row.get(k) is None]
        if missing:
            raise DataError(f"{hf.path}@{hf.revision} row {i}: missing field(s) {', '.join(missing)}")
        row["id"] = str(row["id"])
        rows.append({k: (str(v) if k in required else v) for k, v in row.items()})
    return rows


# -- registry ----------------------------------------------------------------------------
REGISTRY: dict[str, type[Task]] = {}


def register(name: str) -> Callable[[type[Task]], type[Task]]:
    def deco(cls: type[Task]) -> type[Task]:
        if name in REGISTRY and REGISTRY[name] is not cls:
            raise ValueError(f"task {name!r} registered twice")
        cls.name = name
        REGISTRY[name] = cls
        return cls
    return deco


def get_task(name: str, options: dict | None = None) -> Task:
    """Build a registered task; `tasks.<name>` is imported on demand (e.g. livecodebench)."""
    import importlib
    import tasks  # noqa: F401  (registers the built-in math tasks)
    if name not in REGISTRY:
        try:
            importlib.import_module(f"tasks.{name}")
        except ModuleNotFoundError as e:
            if e.name not in (f"tasks.{name}",):
                raise
    if name not in REGISTRY:
        raise KeyError(f"unknown task {name!r}; registered: {', '.join(sorted(REGISTRY))}")
    return REGISTRY[name](options)
