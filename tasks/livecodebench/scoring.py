"""Score samples: extract code, run each distinct (problem, code) once in the sandbox pool,
compare, aggregate (pass@1, unbiased pass@k, per-difficulty breakdown)."""
from __future__ import annotations

import os
import platform
import time
from collections import Counter, defaultdict

from tasks.livecodebench.data import DIFFICULTIES
from tasks.livecodebench.extract import extract_code
from tasks.livecodebench.judge import CODES, Judge
from tasks.sandbox import SandboxConfig, run_many
from tasks.summary import pass_at_k

PUBLIC_ONLY_NOTE = ("private tests absent: scored on public examples only (a smoke test that "
                    "over-estimates pass@1; not comparable with the leaderboard)")


def _failed(result: str, reason: str, n: int) -> dict:
    return {"passed": False, "result": result, "result_code": CODES[result], "reason": reason,
            "failed_test": None, "tests_passed": 0, "num_tests": n, "run_time_s": 0.0}


def score_samples(problems, samples: list[dict], cfg: SandboxConfig | None = None,
                  thinking: bool | None = None, ks=(1, 5, 10)) -> tuple[list[dict], dict]:
    """-> (one verdict per sample, in order; summary dict).

    problems: list (or id -> problem dict) of LCBProblem. A sample needs problem_id,
    sample_index, completion, finish_reason. Unknown problem ids raise KeyError.
    """
    cfg = cfg or SandboxConfig()
    by_id = problems if isinstance(problems, dict) else {p.question_id: p for p in problems}
    start = time.monotonic()
    extracted, jobs, slot = [], [], {}
    for s in samples:
        problem = by_id[s["problem_id"]]
        code, flags = extract_code(s.get("completion") or "", s.get("finish_reason"), thinking)
        extracted.append((problem, code, flags))
        key = (problem.question_id, code)
        if code is not None and key not in slot:  # identical programs are run once
            slot[key] = len(jobs)
            judge = Judge(problem)
            jobs.append((judge, {"code": code, "mode": problem.mode, "fn_name": problem.fn_name,
                                 "inputs": [t["input"] for t in problem.tests],
                                 "on_test": judge.on_test}))
    results = run_many([job for _, job in jobs], cfg)
    judged = [judge.verdict(res) for (judge, _), res in zip(jobs, results)]

    verdicts = []
    for s, (problem, code, flags) in zip(samples, extracted):
        if flags["no_think_end"]:
            v = _failed("no_code", "reasoning not finished (no </think>)", len(problem.tests))
        elif code is None:
            v = _failed("no_code", "no fenced code block in the answer", len(problem.tests))
        else:
            v = dict(judged[slot[(problem.question_id, code)]])
        v.update(problem_id=s["problem_id"], sample_index=s.get("sample_index"), code=code,
                 **flags)
        verdicts.append(v)
    isolation = [r.isolation for r in results if r.isolation]
    summary = summarize(by_id, verdicts, ks)
    summary["sandbox"] = {
        **{k: bool(isolation) and all(i.get(k) for i in isolation)
           for k in ("network_isolation", "pid_namespace", "readonly_fs", "uid_drop",
                     "proc_hidden")},
        "workers": cfg.num_workers(), "timeout_s": cfg.timeout_s, "memory_mb": cfg.memory_mb,
        "lcb_guard": cfg.lcb_guard, "host": platform.node(), "cores": os.cpu_count(),
        "programs_run": len(jobs), "scoring_wall_s": round(time.monotonic() - start, 2)}
    return verdicts, summary


def summarize(problems: dict, verdicts: list[dict], ks=(1, 5, 10)) -> dict:
    """pass@1 = mean over problems of c/n; pass@k for every k <= the smallest n."""
    per: dict[str, list[bool]] = defaultdict(list)
    for v in verdicts:
        per[v["problem_id"]].append(v["passed"])
    scored = {pid: problems[pid] for pid in per}
    n_min = min((len(x) for x in per.values()), default=0)

    def mean_pass(pids, k):
        vals = [pass_at_k(len(per[p]), sum(per[p]), k) for p in pids]
        return sum(vals) / len(vals) if vals else None

    out = {"num_problems": len(per), "num_samples": len(verdicts)}
    for k in sorted(set(ks) | {1}):
        if k <= n_min:
            out[f"pass@{k}"] = mean_pass(per, k)
    out["per_difficulty"] = {
        d: {"num_problems": len(ids), "pass@1": mean_pass(ids, 1)}
        for d in DIFFICULTIES
        if (ids := [p for p, prob in scored.items() if prob.difficulty == d])}
    out["results"] = dict(Counter(v["result"] for v in verdicts))
    out["num_truncated"] = sum(1 for v in verdicts if v["truncated"])
    out["num_no_code"] = sum(1 for v in verdicts if v["result"] == "no_code")
    with_private = sum(1 for p in scored.values() if p.has_private_tests)
    out["private_tests"] = ("present" if scored and with_private == len(scored)
                            else "absent" if with_private == 0 else "partial")
    out["public_tests_only"] = with_private == 0
    if with_private == 0 and scored:
        out["note"] = PUBLIC_ONLY_NOTE
    elif with_private < len(scored):
        out["note"] = f"private tests missing for {len(scored) - with_private} problems"
    return out
