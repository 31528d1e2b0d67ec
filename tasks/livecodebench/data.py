"""LiveCodeBench problems: the local JSONL copy or the hub parquet mirror, validated.

Upstream `private_test_cases` is either a JSON string or base64(zlib(pickle(json string))).
We never call `pickle.loads`: the payload is a pickled `str`, which needs no globals, so
our unpickler refuses every global (a crafted payload cannot import anything).
"""
from __future__ import annotations

import base64
import io
import json
import os
import pickle
import zlib
from dataclasses import dataclass, field
from datetime import datetime

from tasks.base import DataError
from tasks.data_files import missing_file

HUB_REPO = "lighteval/code_generation_lite"   # parquet mirror; works with datasets>=4
MAX_DECODED_BYTES = 1 << 30                      # zlib-bomb guard for private tests
DIFFICULTIES = ("easy", "medium", "hard")


@dataclass
class LCBProblem:
    question_id: str
    title: str
    content: str
    platform: str
    contest_id: str
    contest_date: str
    difficulty: str
    starter_code: str
    fn_name: str | None          # set for functional (LeetCode) problems
    tests: list = field(default_factory=list)   # [{"input", "output", "testtype"}], public first
    num_public: int = 0
    num_private: int = 0
    release: str | None = None

    @property
    def mode(self) -> str:
        return "functional" if self.fn_name else "stdin"

    @property
    def has_private_tests(self) -> bool:
        return self.num_private > 0


class _NoGlobals(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"refused global {module}.{name} in test payload")


def restricted_unpickle(data: bytes):
    """pickle.loads that cannot construct anything but builtin scalars and containers."""
    return _NoGlobals(io.BytesIO(data)).load()


def decode_tests(blob, what: str = "tests") -> list[dict]:
    """A test-case field -> list of {"input", "output", "testtype"} (DataError if malformed)."""
    if blob is None or blob == "":
        return []
    if isinstance(blob, str):
        try:
            tests = json.loads(blob)
        except ValueError:
            try:
                z = zlib.decompressobj()
                raw = z.decompress(base64.b64decode(blob, validate=True), MAX_DECODED_BYTES)
                if z.unconsumed_tail:
                    raise DataError(f"{what}: payload over {MAX_DECODED_BYTES} bytes")
                text = restricted_unpickle(raw)
            except Exception as e:  # noqa: BLE001 - any malformed payload is a data error
                raise DataError(f"{what}: neither JSON nor a safe encoded payload ({e})") from None
            if not isinstance(text, str):
                raise DataError(f"{what}: payload holds {type(text).__name__}, expected str")
            try:
                tests = json.loads(text)
            except ValueError as e:
                raise DataError(f"{what}: decoded payload is not JSON ({e})") from None
    else:
        tests = blob
    if not isinstance(tests, list) or not all(
            isinstance(t, dict) and isinstance(t.get("input"), str)
            and isinstance(t.get("output"), str) and t.get("testtype") in ("stdin", "functional")
            for t in tests):
        raise DataError(f"{what}: expected a list of {{input, output, testtype}} objects")
    return tests


def row_to_problem(row: dict, where: str, release: str | None = None) -> LCBProblem:
    """Validate one upstream-schema row; `where` (file:line) prefixes every error."""
    if not isinstance(row, dict):
        raise DataError(f"{where}: expected a JSON object")
    for key in ("question_id", "question_content", "platform", "contest_date", "difficulty",
                "public_test_cases"):
        if not isinstance(row.get(key), str) or not row[key]:
            raise DataError(f"{where}: missing or non-string field {key!r}")
    try:
        date = datetime.fromisoformat(row["contest_date"]).isoformat()
    except ValueError:
        raise DataError(f"{where}: bad contest_date {row['contest_date']!r}") from None
    if row["difficulty"] not in DIFFICULTIES:
        raise DataError(f"{where}: difficulty {row['difficulty']!r} not in {DIFFICULTIES}")
    try:
        meta = json.loads(row.get("metadata") or "{}")
    except ValueError:
        raise DataError(f"{where}: metadata is not JSON") from None
    public = decode_tests(row["public_test_cases"], f"{where}: public_test_cases")
    private = decode_tests(row.get("private_test_cases"), f"{where}: private_test_cases")
    if not public and not private:
        raise DataError(f"{where}: no test cases")
    fn_name = meta.get("func_name") if isinstance(meta, dict) else None
    kind = "functional" if fn_name else "stdin"
    if any(t["testtype"] != kind for t in public + private):
        raise DataError(f"{where}: tests are not all {kind} (func_name={fn_name!r})")
    return LCBProblem(
        question_id=row["question_id"], title=str(row.get("question_title") or ""),
        content=row["question_content"], platform=row["platform"],
        contest_id=str(row.get("contest_id") or ""), contest_date=date,
        difficulty=row["difficulty"], starter_code=str(row.get("starter_code") or ""),
        fn_name=fn_name, tests=public + private, num_public=len(public),
        num_private=len(private), release=row.get("release_added") or release)


def _releases(release) -> set[str] | None:
    if release is None:
        return None
    names = [release] if isinstance(release, str) else list(release)
    return {r if r.startswith("release_") else f"release_{r}" for r in names}


def select(problems: list[LCBProblem], release=None, start_date=None, end_date=None,
           limit=None) -> list[LCBProblem]:
    """Filter by release (the release that *added* the problem; a name or a list) and by an
    inclusive contest-date window (ISO dates), then keep the first `limit`."""
    wanted = _releases(release)
    lo = datetime.fromisoformat(start_date) if start_date else None
    hi = datetime.fromisoformat(end_date) if end_date else None
    out = [p for p in problems
           if (wanted is None or p.release in wanted)
           and (lo is None or datetime.fromisoformat(p.contest_date) >= lo)
           and (hi is None or datetime.fromisoformat(p.contest_date) <= hi)]
    return out[:limit] if limit is not None else out


def read_file(path: str) -> list[LCBProblem]:
    """All rows of a LiveCodeBench JSONL file (errors name the file and the 1-based line)."""
    if not os.path.isfile(path):
        raise missing_file(path, "LiveCodeBench data")
    problems, seen = [], {}
    with open(path, encoding="utf-8-sig") as f:  # a byte-order mark at the start is accepted
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                row = json.loads(line)
            except ValueError as e:
                raise DataError(f"{where}: invalid JSON ({e})") from None
            p = row_to_problem(row, where)
            if p.question_id in seen:
                raise DataError(f"{where}: duplicate question_id {p.question_id!r} at line "
                                f"{seen[p.question_id]} and line {lineno}")
            seen[p.question_id] = lineno
            problems.append(p)
    return problems


def read_hub(subset: str = "release_v6", revision: str | None = None,
             repo: str = HUB_REPO) -> list[LCBProblem]:
    """The hub parquet mirror at a pinned commit (needs `datasets` and network)."""
    if not revision:
        raise DataError(f"{repo}: pin a commit (revision=...) to load from the hub")
    try:
        import datasets
    except ImportError:
        raise DataError("loading LiveCodeBench from the hub needs `pip install datasets`; "
                        "or use the local copy (data_dir=.../shared/datasets)") from None
    try:
        ds = datasets.load_dataset(repo, subset, split="test", revision=revision)
    except Exception as e:  # noqa: BLE001 - offline, unknown revision, ...
        raise DataError(f"could not load {repo}/{subset}@{revision}: {e}") from None
    return [row_to_problem(dict(r), f"{repo}/{subset}@{revision} row {i}", release=subset)
            for i, r in enumerate(ds)]
