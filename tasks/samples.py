"""A run folder's files and who owns them.

samples.jsonl   generation only, append-only: one finished sample per line, flushed before
                the next one starts (every replica of a data-parallel run appends to it,
                each line whole under a lock). Nothing ever rewrites or deletes a line of it.
scores.jsonl    the scorer: one verdict per scored sample, replaced atomically per scoring.
summary.json    the scorer, replaced atomically.
generation_stats.jsonl, run.json, config.yaml, retime.json   generation (under the run lock).

Readers keep going past lines they cannot use and report them with their line numbers.
"""
from __future__ import annotations

import fcntl
import json
import os
from dataclasses import dataclass, field

SAMPLES, SCORES, SUMMARY, STATS, META, CONFIG, RETIME = (
    "samples.jsonl", "scores.jsonl", "summary.json", "generation_stats.jsonl", "run.json",
    "config.yaml", "retime.json")


@dataclass
class Samples:
    rows: list[dict] = field(default_factory=list)     # every usable row, with its `line`;
    #                    which one is scored per (problem, index): tasks/sample_rows.py
    bad_lines: list[tuple[int, str]] = field(default_factory=list)  # (line, why), kept on disk
    torn_tail: bool = False    # an unterminated last line: still being written, or a kill

    def keys(self) -> set[tuple[str, int]]:
        return {(r["problem_id"], r["sample_index"]) for r in self.rows}


def _why_unusable(raw: bytes) -> tuple[dict | None, str | None]:
    try:
        row = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return None, "not UTF-8 text"
    except json.JSONDecodeError as e:
        return None, f"invalid JSON ({e.msg})"
    if not isinstance(row, dict):
        return None, f"a JSON {type(row).__name__}, not an object"
    if not isinstance(row.get("problem_id"), str):
        return None, "no string problem_id"
    index = row.get("sample_index")
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        return None, "no non-negative integer sample_index"
    return row, None


def read_samples(path: str) -> Samples:
    out = Samples()
    if not os.path.exists(path):
        return out
    with open(path, "rb") as f:
        data = f.read()
    lines = data.split(b"\n")
    last = len(lines) - 1          # after the final newline: b"" for a complete file
    for lineno, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        row, why = _why_unusable(raw)
        if why is not None:
            if lineno - 1 == last:
                out.torn_tail = True
            else:
                out.bad_lines.append((lineno, why))
            continue
        row["line"] = lineno
        out.rows.append(row)
    return out


def terminate_last_line(path: str) -> None:
    """Give an unterminated last line (a write cut by a kill) its newline, so appended rows
    start on a line of their own; the torn line is kept and reported, not deleted."""
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return
    with open(path, "rb+") as f:
        f.seek(-1, os.SEEK_END)
        if f.read(1) != b"\n":
            f.write(b"\n")


def write_atomic(path: str, text: str) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def write_jsonl_atomic(path: str, rows: list[dict]) -> None:
    write_atomic(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def read_jsonl_lenient(path: str) -> list[dict]:
    """Object lines of a harness-written JSONL file (stats); others are skipped."""
    if not os.path.exists(path):
        return []
    out = []
    with open(path, "rb") as f:
        for raw in f:
            try:
                row = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError):
                continue
            if isinstance(row, dict):
                out.append(row)
    return out


def append_line(path: str, line: str) -> None:
    """Append one whole line, safely when several processes append to the same file (the
    replicas of a data-parallel run): under an exclusive flock, in one write, after a newline
    if the file ends in a line cut short by a kill (that line is kept and reported, never
    glued to this one). In the OS page cache when it returns: it survives a kill."""
    data = line.encode("utf-8")
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # released by close
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data
        while data:
            data = data[os.write(fd, data):]
    finally:
        os.close(fd)


def append_jsonl(path: str, row: dict) -> None:
    append_line(path, json.dumps(row, ensure_ascii=False) + "\n")
