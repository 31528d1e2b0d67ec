"""LiveCodeBench code generation: data, prompts, extraction, sandboxed scoring.

Public API lives in tasks/livecodebench/task.py (importing this package registers the
`livecodebench` task with the harness)."""
from tasks.livecodebench.task import (LCBProblem, LiveCodeBenchTask, build_messages,
                                      extract_code, load_problems, pass_at_k, score_samples)

__all__ = ["LCBProblem", "LiveCodeBenchTask", "build_messages", "extract_code",
           "load_problems", "pass_at_k", "score_samples"]
