"""Benchmarks for run.py: data, prompts and scoring. See tasks/base.py for the protocol."""
from tasks import math_tasks  # noqa: F401  (registers amc23, aime24, aime25, math500, gsm8k)
from tasks.base import REGISTRY, DataError, Problem, Task, get_task, register  # noqa: F401
