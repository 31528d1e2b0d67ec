"""Reading a benchmark's rows (JSON Lines file or the pinned hub copy), validated: errors
name the file and line (or hub row), and a field or id that is not usable is an error, not
a guess (issue 29, item 9)."""
from __future__ import annotations

import json
import math
import os
from typing import Any

from tasks.base import DataError, HFSource
from tasks.hub_answers import gold_answer


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


def missing_file(path: str, what: str = "data file") -> DataError:
    """The error for a data file that is not there: what its folder holds instead, and the
    hub alternative (a typo in data_dir or task.data_file shows at once)."""
    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        held = "no such folder"
    else:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".jsonl"))
        held = (f"{folder} holds {', '.join(names[:8])}{' ...' if len(names) > 8 else ''}"
                if names else f"{folder} holds no .jsonl file")
    return DataError(f"{what} not found: {path} ({held}); without data_dir and "
                     f"task.data_file the run reads the Hugging Face copy")


def read_jsonl(path: str, required: tuple[str, ...]) -> list[dict]:
    """Every row of a JSON Lines file, validated (errors name the file and 1-based line).
    The whole file is checked, not only the rows a `limit` keeps. A UTF-8 byte-order mark
    at the start is accepted."""
    if not os.path.isfile(path):
        raise missing_file(path)
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


def read_hub(hf: HFSource, task: str, required: tuple[str, ...],
             answer_field: str | None = None) -> list[dict]:
    """Every row of the pinned Hugging Face copy, validated (needs network and `datasets`);
    `answer_field` holds the bare answer, as in the local copies (tasks/hub_answers.py)."""
    if not hf.path or not hf.revision:
        raise DataError(
            f"task {task!r}: no data directory given (data_dir=... or ZIPAGE_DATA_DIR) and no "
            f"pinned hub revision (task.hf.revision); refusing an unpinned download")
    try:
        import datasets
    except ImportError:
        raise DataError("loading from the hub needs `pip install datasets`; "
                        "or pass data_dir=../shared/datasets") from None
    try:
        ds = datasets.load_dataset(hf.path, hf.name, split=hf.split, revision=hf.revision)
    except Exception as e:  # noqa: BLE001 - offline, unknown repository or revision, ...
        raise DataError(f"task {task!r}: could not load {hf.path}@{hf.revision} from the hub "
                        f"({type(e).__name__}: {str(e)[:300]}); or pass data_dir=...") from None
    rows, ids = [], UniqueIds()
    for i, rec in enumerate(ds):
        row = {hf.columns.get(k, k): v for k, v in rec.items()}
        where = f"{hf.path}@{hf.revision} row {i}"
        if isinstance(row.get(answer_field), (str, float)):
            row[answer_field] = gold_answer(row[answer_field], hf.answer_rule, where)
        row = check_row(row, required, where)
        row["id"] = row_id(row, i, where)
        ids.add(row["id"], where, f"row {i}")
        rows.append({k: (str(v) if k in required else v) for k, v in row.items()})
    return rows
