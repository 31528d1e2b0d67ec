"""Metrics over scored samples and generation segments: pure functions, no engine needed.
`pass_at_k` is the one estimator every task uses (math and code)."""
from __future__ import annotations

import math
from collections import defaultdict

from tasks import conditions
from tasks import segments as segments_mod


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one problem, 1 - C(n-c, k) / C(n, k), as a stable product."""
    if k > n:
        raise ValueError(f"k={k} > n={n}")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def percentile(values: list[float], q: float) -> float | None:
    """Linear-interpolated percentile (q in [0, 100])."""
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def accuracy(rows: list[dict], key: str = "correct") -> dict:
    """pass@1 = mean over problems of c_i/n_i; its standard error across problems; pass@k."""
    per: dict[str, list[bool]] = defaultdict(list)
    for r in rows:
        per[r["problem_id"]].append(bool(r.get(key)))
    if not per:
        return {"pass@1": None, "pass@1_stderr": None}
    fracs = [sum(v) / len(v) for v in per.values()]
    p = len(fracs)
    mean = sum(fracs) / p
    var = sum((f - mean) ** 2 for f in fracs) / (p - 1) if p > 1 else 0.0
    out = {"pass@1": mean, "pass@1_stderr": math.sqrt(var / p)}
    n_min = min(len(v) for v in per.values())
    k = 2
    while k <= n_min:  # pass@k for powers of two every problem has enough samples for
        out[f"pass@{k}"] = sum(pass_at_k(len(v), sum(v), k) for v in per.values()) / p
        k *= 2
    return out


def generation_wall_time(timed: list[dict]) -> float:
    """Wall time of the generate calls. Replicas of one data-parallel launch (same
    `replica.group`) ran at the same time: their group counts from its first start to its
    last end (one host's perf_counter), not the sum of their calls."""
    groups: dict[str, list[dict]] = defaultdict(list)
    wall = 0.0
    for s in timed:
        group = (s.get("replica") or {}).get("group")
        if group is None or s.get("start_s") is None:
            wall += s["wall_time_s"]
        else:
            groups[group].append(s)
    for segs in groups.values():
        wall += (max(s["start_s"] + s["wall_time_s"] for s in segs)
                 - min(s["start_s"] for s in segs))
    return wall


def throughput(segments: list[dict]) -> dict:
    """Aggregate over every timed generation segment (each resume is one, interrupted ones
    included): output tok/s = tokens the engine(s) generated / wall time of the generate
    calls (concurrent replicas counted once, generation_wall_time)."""
    timed = [s for s in segments if (s.get("wall_time_s") or 0) > 0]
    wall = generation_wall_time(timed)
    out_tok = sum(s.get("num_output_tokens", 0) or 0 for s in timed)
    comp = sum(s.get("compression_time_s", 0.0) or 0.0 for s in timed)
    mean_run = (sum((s.get("mean_running") or 0.0) * s["wall_time_s"] for s in timed) / wall
                if wall > 0 else None)
    unmeasured = [s for s in segments if s.get("interrupted") and not s.get("work_measured")
                  and (s.get("died") or s in timed)]
    return {
        "timed_output_tokens": out_tok,
        "generation_wall_time_s": wall,             # model load excluded
        "output_tokens_per_s": out_tok / wall if wall > 0 else None,
        # An interrupted segment whose unfinished work the engine did not report, or whose
        # process died (tasks/segments.py), counts only its finished samples' tokens: the
        # rate is then a lower bound, and the reasons say which segment.
        "throughput_lower_bound": bool(unmeasured),
        "throughput_lower_bound_reasons": [segments_mod.describe(s) for s in unmeasured],
        # the largest of one engine (replicas of a launch are not added up)
        "peak_running": max((s.get("peak_running") or 0 for s in timed), default=None),
        "mean_running": mean_run,
        "compression_time_share": comp / wall if wall > 0 else None,
        "num_compressions": sum(s.get("num_compressions", 0) or 0 for s in timed),
        "num_preemptions": sum(s.get("num_preemptions", 0) or 0 for s in timed),
        "time_to_finish_s": wall,                   # all generate() calls of this run
        "generation_segments": len(timed),
        "data_parallel_replicas": max(((s.get("replica") or {}).get("size", 1) for s in timed),
                                      default=1),
        "interrupted_segments": sum(1 for s in segments if s.get("interrupted")),
        "died_segments": sum(1 for s in segments if s.get("died")),
    }


def engine_errors(rows: list[dict]) -> list[dict]:
    """Problems the engine rejected (one entry per problem, with its message)."""
    per: dict[str, dict] = {}
    for r in rows:
        if r.get("finish_reason") == "error":
            e = per.setdefault(r["problem_id"], {"problem_id": r["problem_id"], "samples": 0,
                                                 "error": r.get("error")})
            e["samples"] += 1
    return list(per.values())


def summarize(rows: list[dict], num_problems: int, n: int, segments: list[dict]) -> dict:
    """The summary.json body (without the baseline block). Output lengths leave out the
    samples the engine rejected (0 tokens, not an output)."""
    lengths = [r.get("completion_tokens", 0) for r in rows if r.get("finish_reason") != "error"]
    s: dict = {"num_problems": len({r["problem_id"] for r in rows}),
               "num_problems_expected": num_problems,
               "num_samples": len(rows), "num_samples_expected": num_problems * n,
               "complete": len(rows) >= num_problems * n}
    s.update(accuracy(rows))
    lenient = accuracy(rows, "correct_lenient")
    s["pass@1_incl_truncated"] = lenient["pass@1"]
    frac = (lambda pred: sum(1 for r in rows if pred(r)) / len(rows) if rows else None)
    s["truncation_rate"] = frac(lambda r: r.get("finish_reason") == "length")
    # Only tasks whose verdicts say (math): a code task has no boxed answer to count.
    s["boxed_rate"] = (frac(lambda r: bool(r.get("has_boxed")))
                       if any("has_boxed" in r for r in rows) else None)
    s["error_rate"] = frac(lambda r: bool(r.get("error")))
    s["num_scoring_timeouts"] = sum(1 for r in rows if str(r.get("error") or "").startswith("timeout"))
    s["mean_output_tokens"] = sum(lengths) / len(lengths) if lengths else None
    s["p95_output_tokens"] = percentile(lengths, 95)
    s["num_rejected_samples"] = len(rows) - len(lengths)
    s.update(throughput(segments))
    s["output_tokens"] = sum(lengths)
    wall = s["generation_wall_time_s"]
    correct = sum(1 for r in rows if r.get("correct"))
    s["correct_per_hour"] = correct / (wall / 3600) if wall else None
    return s


def compare(run: dict, base: dict) -> dict:
    """The `baseline` block: Full-KV numbers plus accuracy retained (%) and speedup (x)."""
    p, bp = run.get("pass@1"), base.get("pass@1")
    t, bt = run.get("output_tokens_per_s"), base.get("output_tokens_per_s")
    f, bf = run.get("time_to_finish_s"), base.get("time_to_finish_s")
    return {
        "pass@1": bp, "pass@1_stderr": base.get("pass@1_stderr"), "maj@k": base.get("maj@k"),
        "accuracy_by_length": base.get("accuracy_by_length"),
        "output_tokens_per_s": bt, "time_to_finish_s": bf,
        "mean_output_tokens": base.get("mean_output_tokens"),
        "truncation_rate": base.get("truncation_rate"),
        "accuracy_retained": 100.0 * p / bp if p is not None and bp else None,
        "speedup": t / bt if t and bt else None,
        # Only when both times cover every sample (tasks/segments.py): never a partial time.
        "time_to_finish_speedup": bf / f if f and bf and not run.get("untimed_samples")
        and not base.get("untimed_samples") else None,
    }


def throughput_source(run_segments: list[dict], base_segments: list[dict],
                      retime: dict | None) -> dict:
    """Where the baseline's throughput in `speedup` comes from, and whether it was measured
    like this run's (same job; host, GPU, torch, CPU load)."""
    if retime and retime.get("speedup"):
        diffs = conditions.differences([retime["run"]["conditions"]],
                                       [retime["baseline"]["conditions"]])
        return {"speedup": retime["speedup"], "same_job": True, "conditions_differ": diffs,
                "throughput_source": f"re-timed in job {retime['job']}: Full KV and this engine "
                                     f"ran the same {len(retime['problems'])} problems back to "
                                     f"back (baseline.retime=true)"}
    run_c = [s["conditions"] for s in run_segments if s.get("conditions")]
    base_c = [s["conditions"] for s in base_segments if s.get("conditions")]
    if not run_c or not base_c:
        return {"same_job": None, "conditions_differ": [],
                "throughput_source": "unknown (segments recorded without their conditions)"}
    jobs = {c.get("job") for c in run_c}
    same = len(jobs) == 1 and jobs == {c.get("job") for c in base_c}
    diffs = conditions.differences(run_c, base_c)
    text = ("measured in the same job as this run" if same else
            f"measured in another job (baseline {conditions.describe(base_c)}; "
            f"this run {conditions.describe(run_c)})")
    if not same or diffs:
        text += "; baseline.retime=true times both in one job"
    return {"same_job": same, "conditions_differ": diffs, "throughput_source": text}
