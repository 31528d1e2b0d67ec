"""LiveCodeBench task: public API and the adapter to the harness protocol (tasks/base.py).

    problems = load_problems("/work/shared/datasets", release="release_v6")
    messages = build_messages(problems[0])
    code, flags = extract_code(completion, finish_reason)
    verdicts, summary = score_samples(problems, samples)   # samples: problem_id, sample_index,
                                                           # completion, finish_reason
Harness options (task.options): release, start_date, end_date, thinking (bool|None),
system_prompt (bool, default False), timeout_s (per test, default 6), memory_mb, lcb_guard,
ks (pass@k list).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, ClassVar, List, Optional

from tasks.base import HFSource, Problem, Task, check_unique, register
from tasks.livecodebench.data import (HUB_REPO, DataError, LCBProblem, decode_tests,
                                      read_file, read_hub, restricted_unpickle, select)
from tasks.livecodebench.extract import extract_code
from tasks.livecodebench.prompts import build_messages
from tasks.livecodebench.scoring import pass_at_k, score_samples, summarize
from tasks.sandbox import SandboxConfig

DATA_FILE = os.path.join("livecodebench", "livecodebench.jsonl")

__all__ = ["load_problems", "build_messages", "extract_code", "score_samples", "pass_at_k",
           "summarize", "decode_tests", "restricted_unpickle", "LCBProblem", "DataError",
           "SandboxConfig", "LiveCodeBenchTask"]


def load_problems(data_dir: str | None, release=None, start_date: str | None = None,
                  end_date: str | None = None, limit: int | None = None, *,
                  data_file: str = DATA_FILE, hub_revision: str | None = None,
                  hub_subset: str = "release_v6") -> list[LCBProblem]:
    """Problems from `<data_dir>/livecodebench/livecodebench.jsonl`, or (data_dir=None) from
    the hub mirror at `hub_revision`; filtered by release added and/or an inclusive
    contest-date window, in file order, first `limit`."""
    if data_dir:
        problems = read_file(os.path.join(data_dir, data_file))
    else:
        problems = read_hub(hub_subset, hub_revision)
    return select(problems, release, start_date, end_date, limit)


@dataclass
class LCBOptions:
    release: Any = None                  # release(s) that added the problems, e.g. "v6"
    start_date: Optional[str] = None     # inclusive contest-date window (ISO dates)
    end_date: Optional[str] = None
    thinking: Optional[bool] = None      # None: decide per output (tasks/reasoning.py)
    system_prompt: bool = False          # instruction in a system turn (else the user turn)
    timeout_s: float = 6.0               # per test
    memory_mb: int = 4096
    lcb_guard: bool = True
    ks: List[int] = field(default_factory=lambda: [1, 5, 10])


@dataclass
class LiveCodeBenchTask(Task):
    """Adapter for run.py / tasks.score (see tasks/base.py for the protocol)."""
    options: LCBOptions = field(default_factory=LCBOptions)
    reads_scoring_timeout: ClassVar[bool] = False  # its per-test limit is options.timeout_s

    def gold(self, problem: Problem):
        """The problem's tests (a sample passes them all)."""
        return problem.meta["lcb"].tests

    def load(self, data_dir, limit=None, *, data_file=None, hf: HFSource | None = None):
        o = self.options
        if data_dir:
            where = self.data_path(data_dir, data_file)
            lcb = load_problems(data_dir, o.release, o.start_date, o.end_date, limit,
                                data_file=data_file or self.data_file)
        else:  # on the hub the subset (hf.name, else options.release) is the release
            hf = hf or self.hf
            subset = hf.name or (o.release if isinstance(o.release, str) else None) or "release_v6"
            where = f"{hf.path or HUB_REPO}/{subset}@{hf.revision}"
            problems = read_hub(subset, hf.revision, hf.path or HUB_REPO)
            lcb = select(problems, None, o.start_date, o.end_date, limit)
        problems = [Problem(id=p.question_id, prompt=p.content, answer=None,
                            meta={"lcb": p, "difficulty": p.difficulty, "platform": p.platform,
                                  "contest_date": p.contest_date, "release": p.release})
                    for p in lcb]
        return check_unique(self.name, problems, where)

    def messages(self, problem: Problem) -> list[dict]:
        return build_messages(problem.meta["lcb"], system=self.options.system_prompt)

    def sandbox_config(self, workers: int) -> SandboxConfig:
        o = self.options
        cap = max(1, len(os.sched_getaffinity(0)) - 1)  # TLEs depend on contention
        return SandboxConfig(timeout_s=float(o.timeout_s), memory_mb=int(o.memory_mb),
                             lcb_guard=bool(o.lcb_guard), workers=max(1, min(workers or cap, cap)))

    def score(self, rows, problems, *, workers=2, timeout=5.0):
        """`timeout` (the harness's per-sample math timeout) is not used: LiveCodeBench's
        per-test limit is options.timeout_s (default 6 s)."""
        lcb = {pid: p.meta["lcb"] for pid, p in problems.items()}
        verdicts, self._summary = score_samples(
            lcb, rows, self.sandbox_config(workers), thinking=self.options.thinking,
            ks=tuple(self.options.ks))
        out = []
        for r, v in zip(rows, verdicts):
            failed = bool(r.get("error"))  # the engine could not run this request
            code = v["code"]
            v = {k: x for k, x in v.items() if k != "code"}  # kept as extracted_answer
            out.append({**v, "correct": v["passed"] and not failed,
                        "correct_lenient": v["passed"] and not failed,
                        "extracted_answer": code,
                        "error": r.get("error") if failed else (
                            v["reason"] if v["result"] == "runner_error" else None)})
        return out

    def summary_extras(self, rows, verdicts, problems):
        summary = getattr(self, "_summary", None)
        if summary is None:
            summary = summarize({pid: p.meta["lcb"] for pid, p in problems.items()},
                                [{**v, "problem_id": r["problem_id"]}
                                 for r, v in zip(rows, verdicts)])
        return {"livecodebench": summary}


register(LiveCodeBenchTask("livecodebench", version=1, hf=HFSource(HUB_REPO), data_file=DATA_FILE))
