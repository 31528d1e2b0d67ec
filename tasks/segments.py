"""Generation segments as generation_stats.jsonl records them, including those whose
process died (issue 29, item 2).

Each generate call appends an *open* record (segment id, job, host, pid, start) before it
starts and its full record (`event: close`, timings, tokens) when it ends, interrupted or
not. Each sample row names its segment and when it finished (`segment`, `finish_s`, on the
segment's clock). A SIGKILL, an OOM kill or a preempted job leaves an open record without
its close: that segment *died*. Its finished samples are on disk, so it is counted from its
start to its last finished sample, with those samples' tokens; the work of the samples it
was still running is unknown, so the run's throughput is then a lower bound, and the
summary says which segment and why. Samples no segment accounts for (a folder from before
open records) make the run's time partial: no time-to-finish speedup is computed from it.
"""
from __future__ import annotations

import os
import platform


def process_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), to tell it from a later
    process that reuses its pid."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def open_record(segment: str, conditions: dict, start_s: float, num_requests: int) -> dict:
    return {"event": "open", "segment": segment, "conditions": conditions,
            "pid": os.getpid(), "process_start": process_start(os.getpid()),
            "start_s": start_s, "num_requests": num_requests}


def still_running(record: dict) -> bool:
    """The open segment's process is alive (on this host): it is generating now."""
    c = record.get("conditions") or {}
    pid = record.get("pid")
    if pid is None or c.get("host") != platform.node():
        return False
    now = process_start(pid)
    return now is not None and now == record.get("process_start")


def died(records: list[dict], rows: list[dict]) -> list[dict]:
    """A segment record for each open segment that never closed and whose process is gone,
    built from its sample rows."""
    closed = {r.get("segment") for r in records if r.get("event") != "open"}
    out = []
    for rec in records:
        if rec.get("event") != "open" or rec["segment"] in closed or still_running(rec):
            continue
        mine = {(r["problem_id"], r["sample_index"]): r for r in rows
                if r.get("segment") == rec["segment"] and r.get("finish_s") is not None}
        tokens = sum(r.get("completion_tokens") or 0 for r in mine.values())
        end = max((r["finish_s"] for r in mine.values()), default=rec["start_s"])
        seg = {k: rec[k] for k in ("segment", "conditions", "start_s", "num_requests")}
        if rec.get("replica"):
            seg["replica"] = rec["replica"]
        seg.update(died=True, interrupted=True, work_measured=False, error="process died",
                   wall_time_s=end - rec["start_s"], num_output_tokens=tokens,
                   kept_samples=len(mine), kept_output_tokens=tokens)
        out.append(seg)
    return out


def all_segments(records: list[dict], rows: list[dict]) -> list[dict]:
    """Closed segments (records from before open records existed included) and died ones."""
    return [r for r in records if r.get("event") != "open"] + died(records, rows)


def running(records: list[dict]) -> set[str]:
    """The ids of open segments whose process is generating now (re-scoring a live run)."""
    closed = {r.get("segment") for r in records if r.get("event") != "open"}
    return {r["segment"] for r in records if r.get("event") == "open"
            and r["segment"] not in closed and still_running(r)}


def untimed(segments: list[dict], rows: list[dict], live: set[str] = frozenset()) -> dict:
    """Generated samples (scored rows the engine completed) no segment accounts for; those
    of a segment still running (`live`) are accounted for when it closes."""
    made = [r for r in rows
            if r.get("finish_reason") != "error" and r.get("segment") not in live]
    timed = sum(s.get("kept_samples") or 0 for s in segments)
    timed_tokens = sum(s.get("kept_output_tokens") or 0 for s in segments)
    missing = max(0, len(made) - timed)
    tokens = max(0, sum(r.get("completion_tokens") or 0 for r in made) - timed_tokens)
    return {"untimed_samples": missing, "untimed_output_tokens": tokens if missing else 0}


def describe(seg: dict) -> str:
    """Why a segment makes the throughput a lower bound."""
    c = seg.get("conditions") or {}
    where = f"segment {seg.get('segment', '?')} of job {c.get('job')} started at " \
            f"{c.get('started_at')} on {c.get('host')}"
    if seg.get("died"):
        return (f"{where} was killed (no close record); its {seg['kept_samples']} finished "
                f"samples ({seg['kept_output_tokens']} tokens) are timed from its start to "
                f"the last of them ({seg['wall_time_s']:.1f} s); the work of the samples it "
                f"was still running is unknown")
    return (f"{where} was interrupted and the engine did not report its unfinished samples' "
            f"work")
