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
import json
import math
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
    revision: str | None = None  # must be a pinned commit: we refuse an unpinned download
    columns: dict = field(default_factory=dict)  # hub column -> our field name


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


def _kind(value: Any) -> str:
    """A JSON value as the data file spells it, with its type: `true (bool)`, `null`."""
    return "null" if value is None else f"{json.dumps(value)} ({type(value).__name__})"


def _scalar_error(value: Any) -> str | None:
    """Why `value` is not a usable field value (a string, or a finite non-bool number)."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return f"must be a string or a number, got {_kind(value)}"
    if isinstance(value, float) and not math.isfinite(value):
        return f"must be a finite number, got {value}"
    if not str(value).strip():
        return "is empty"
    return None


def check_row(row: Any, required: tuple[str, ...], where: str) -> dict:
    """A row must be an object whose required fields are non-empty strings or finite
    numbers (JSON true/false, null, NaN, lists and objects are errors)."""
    if not isinstance(row, dict):
        raise DataError(f"{where}: expected a JSON object, got {type(row).__name__}")
    missing = [k for k in required if k not in row]
    if missing:
        raise DataError(f"{where}: missing field(s) {', '.join(missing)}")
    for k in required:
        why = _scalar_error(row[k])
        if why:
            raise DataError(f"{where}: field(s) {k} empty" if why == "is empty" else
                            f"{where}: field {k} {why}")
    return row


def row_id(row: dict, default: int, where: str) -> str:
    """A row's problem id: its `id` (a non-empty string, or an integer taken as its decimal
    string), else `default` (the row's 0-based position)."""
    if "id" not in row:
        return str(default)
    value = row["id"]
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str) or not value.strip():
        raise DataError(f"{where}: id must be a non-empty string or an integer, got "
                        f"{'an empty string' if value == '' else _kind(value)}")
    return value


class UniqueIds:
    """Problem ids seen so far and where: a duplicate names both places."""

    def __init__(self):
        self.where: dict[str, str] = {}

    def add(self, pid: str, where: str, line: str) -> None:
        if pid in self.where:
            raise DataError(f"{where}: duplicate problem id {pid!r} at {self.where[pid]} and {line}")
        self.where[pid] = line


def read_jsonl(path: str, required: tuple[str, ...]) -> list[dict]:
    """Every row of a JSON Lines file, validated (errors name the file and 1-based line).
    The whole file is checked, not only the rows a `limit` keeps. A UTF-8 byte-order mark
    at the start is accepted."""
    if not os.path.isfile(path):
        raise DataError(f"data file not found: {path}")
    rows, ids = [], UniqueIds()
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            where = f"{path}:{lineno}"
            try:
                line = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
            except UnicodeDecodeError:
                raise DataError(f"{where}: not UTF-8 text") from None
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataError(f"{where}: invalid JSON ({e.msg})") from None
            row = check_row(row, required, where)
            row["id"] = row_id(row, lineno - 1, where)
            ids.add(row["id"], where, f"line {lineno}")
            rows.append(row)
    return rows


def read_hub(hf: HFSource, task: str, required: tuple[str, ...]) -> list[dict]:
    """Every row of the pinned Hugging Face copy, validated (needs network and `datasets`)."""
    if not hf.path or not hf.revision:
        raise DataError(
            f"task {task!r}: no data directory given (data_dir=... or ZIPAGE_DATA_DIR) and no "
            f"pinned hub revision (task.hf.revision); refusing an unpinned download")
    try:
        import datasets
    except ImportError:
        raise DataError("loading from the hub needs `pip install datasets`; "
                        "or pass data_dir=../shared/datasets") from None
    ds = datasets.load_dataset(hf.path, hf.name, split=hf.split, revision=hf.revision)
    rows, ids = [], UniqueIds()
    for i, rec in enumerate(ds):
        row = {hf.columns.get(k, k): v for k, v in rec.items()}
        where = f"{hf.path}@{hf.revision} row {i}"
        row = check_row(row, required, where)
        row["id"] = row_id(row, i, where)
        ids.add(row["id"], where, f"row {i}")
        rows.append({k: (str(v) if k in required else v) for k, v in row.items()})
    return rows


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
