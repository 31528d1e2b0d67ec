"""Task protocol and registry: how a benchmark plugs into run.py and `python -m tasks.score`.

A task is one object that holds everything about a benchmark (lighteval's task configs are
the pattern): its data (file name, fields, pinned hub copy), its prompt, its scoring, its
typed options and a `version`. Bump `version` whenever the prompt wording or the way rows
become problems changes: it is part of every run's identity (tasks/identity.py), so old
samples are never mixed with new ones. Register an instance with `register(task)`; the
harness binds the config's `task.options` with `get_task(name, options)` (unknown options
fail, naming the close match) and calls, in order:

    problems = task.load(data_dir, limit, data_file=..., hf=...)   # list[Problem]
    msgs     = task.messages(problem)                              # chat messages
    ... generation; each sample becomes one row of samples.jsonl ...
    verdicts = task.score(rows, problems_by_id, workers=2, timeout=5.0)
    extras   = task.summary_extras(rows, verdicts, problems_by_id) # merged into summary.json

Rows (one per sample) carry at least: problem_id, sample_index, seed, prompt_tokens,
prompt_hash, completion, completion_tokens, finish_reason ("stop" | "length" | "error"),
error. A verdict is a dict with at least `correct` (bool) and `extracted_answer`
(str | None); optional keys the generic summary understands: `truncated`, `has_boxed`,
`error` (str | None), `correct_lenient` (correct if truncation were not penalised).
`score` must never raise for one bad sample: return a verdict with `error` set instead.
"""
from __future__ import annotations

import dataclasses
import difflib
import importlib
import os
import pkgutil
from dataclasses import dataclass, field
from typing import Any, ClassVar

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

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
    """The Hugging Face copy, used when no data directory is given."""
    path: str | None = None
    name: str | None = None
    split: str = "test"
    revision: str | None = None  # a commit; a run pins an unset one (tasks/hub_revision.py)
    columns: dict = field(default_factory=dict)  # hub column -> our field name
    answer_rule: str | None = None  # how its answer column holds the answer (tasks/hub_answers.py)


def close_match(word: str, choices) -> str:
    """' (did you mean X?)' for the closest choice, or ''."""
    near = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {near[0]!r}?)" if near else ""


@dataclass
class Task:
    name: str
    version: int
    hf: HFSource = field(default_factory=HFSource)
    data_file: str = ""          # inside data_dir; "" = <name>.jsonl
    options: Any = None          # an instance of the task's options dataclass
    # Bump when the scoring changes (a verdict could differ for the same sample): part of
    # the scoring identity a summary is checked against (tasks/scoring_identity.py).
    scorer_version: int = 1
    reads_scoring_timeout: ClassVar[bool] = True  # verdicts depend on scoring.timeout_s

    def bind(self, options: dict | None) -> "Task":
        """A copy with `options` (a plain dict) checked against the options dataclass."""
        kind = type(self.options)
        fields = [f.name for f in dataclasses.fields(kind)]
        for key in options or {}:
            if key not in fields:
                raise KeyError(f"unknown option task.options.{key} for task {self.name}"
                               f"{close_match(key, fields)}; valid: {', '.join(fields)}")
        try:
            merged = OmegaConf.merge(OmegaConf.structured(self.options), options or {})
        except OmegaConfBaseException as e:
            raise KeyError(f"task {self.name}: task.options.{e.full_key}: "
                           f"{str(e.msg).splitlines()[0]}") from None
        return dataclasses.replace(self, options=OmegaConf.to_object(merged))

    def data_path(self, data_dir: str, data_file: str | None = None) -> str:
        return os.path.join(data_dir, data_file or self.data_file or f"{self.name}.jsonl")

    # -- data, prompt, scoring (each task overrides what it needs) ----------------------
    def load(self, data_dir: str | None, limit: int | None = None, *,
             data_file: str | None = None, hf: HFSource | None = None) -> list[Problem]:
        raise NotImplementedError

    def messages(self, problem: Problem) -> list[dict]:
        raise NotImplementedError

    def score(self, rows: list[dict], problems: dict[str, Problem], *,
              workers: int = 2, timeout: float = 5.0) -> list[dict]:
        raise NotImplementedError

    def summary_extras(self, rows: list[dict], verdicts: list[dict],
                       problems: dict[str, Problem]) -> dict:
        return {}

    def gold(self, problem: Problem) -> Any:
        """What a sample of `problem` is scored against (its answer; a code task's tests)."""
        return problem.answer

    def grader(self) -> str:
        """The scoring library and its version, when verdicts depend on it."""
        return ""


def check_unique(task: str, problems: list[Problem], where: str) -> list[Problem]:
    if not problems:
        raise DataError(f"{where}: no problems for task {task} (empty data)")
    seen: set[str] = set()
    for p in problems:
        if p.id in seen:
            raise DataError(f"{where}: task {task}: duplicate problem id {p.id!r}")
        seen.add(p.id)
    return problems


# -- registry ----------------------------------------------------------------------------
REGISTRY: dict[str, Task] = {}


def register(task: Task) -> Task:
    if task.name in REGISTRY:
        raise ValueError(f"task {task.name!r} registered twice")
    REGISTRY[task.name] = task
    return task


def get_task(name: str, options: dict | None = None) -> Task:
    """A registered task bound to `options`; `tasks.<name>` is imported on demand (e.g.
    livecodebench, whose sandbox the math tasks do not need). The built-in math tasks are
    registered when the `tasks` package is imported, before this module is."""
    if name not in REGISTRY:
        try:
            importlib.import_module(f"tasks.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"tasks.{name}":
                raise
    if name not in REGISTRY:
        names = known_tasks()
        raise KeyError(f"unknown task {name!r}{close_match(name, names)}; "
                       f"registered: {', '.join(names)}")
    return REGISTRY[name].bind(options)


def known_tasks() -> list[str]:
    """Every task name, the on-demand ones (a subpackage of tasks/) included."""
    folder = os.path.dirname(os.path.abspath(__file__))
    for mod in pkgutil.iter_modules([folder]):
        if mod.ispkg and mod.name not in ("sandbox",):
            importlib.import_module(f"tasks.{mod.name}")
    return sorted(REGISTRY)
