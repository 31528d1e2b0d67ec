"""Score a run folder from its samples: `python -m tasks.score RUN_DIR`.

Works on finished, partial and still-generating runs alike: it reads samples.jsonl and
never writes it (verdicts go to scores.jsonl, the summary to summary.json, both replaced
atomically), so a generation appending at the same time loses nothing. Lines it cannot use
are kept and reported with their line numbers.

The folder's plan is rebuilt from its stored config (tasks/plan.py), with the data file as
it is now. If the problems' text changed since the samples were generated, scoring is
refused; if only the data file or the gold answers changed, the run is scored against the
current answers and the report says what changed. The Full-KV baseline it is compared with
is scored again first if its summary was made under another scoring identity.
"""
from __future__ import annotations

import glob
import os
import sys

from omegaconf import OmegaConf

from tasks.base import DataError
from tasks.cli_parser import Parser
from tasks.identity import read_meta
from tasks.plan import plan_for_folder
from tasks.prepare import ConfigError
from tasks.rundir import check_folder
from tasks.samples import CONFIG, META, SAMPLES
from tasks.score_plan import score_baseline, score_run


class NotARunFolder(ValueError):
    pass


def check_run_folder(run_dir: str) -> None:
    if not os.path.isdir(run_dir):
        raise NotARunFolder(f"no run folder at {run_dir}")
    missing = [f for f in (CONFIG, META) if not os.path.exists(os.path.join(run_dir, f))]
    if not missing:
        return
    inside = sorted(os.path.relpath(os.path.dirname(p)) for p in
                    glob.glob(os.path.join(run_dir, "**", META), recursive=True))
    if inside:  # results/<task>: the user meant the runs in it
        shown = ", ".join(inside[:3]) + (f" and {len(inside) - 3} more" if len(inside) > 3 else "")
        raise NotARunFolder(f"{run_dir} is not a run folder but holds {len(inside)}: {shown}; "
                            f"score one at a time (python -m tasks.score <run folder>)")
    raise NotARunFolder(f"{run_dir} is not a run folder: {' and '.join(missing)} missing "
                        f"(run.py writes them when the run's first samples are generated)")


def folder_plan(run_dir: str, timeout: float | None = None):
    """The plan of an existing run folder, checked against the data as it is now."""
    check_run_folder(run_dir)
    meta = read_meta(run_dir)
    plan = plan_for_folder(os.path.abspath(run_dir), OmegaConf.load(os.path.join(run_dir, CONFIG)),
                           meta, {"timeout_s": timeout})
    # The samples answer the prompts of generation time: a changed problem text is refused.
    check_folder(plan.run_dir, plan.identity, parts=("task_version", "problems"))
    then = meta.get("data_sha256")
    if then and then != plan.data_sha256:
        print(f"note: the data file {plan.data_file} changed since the samples were generated "
              f"(sha256 {then[:12]} -> {(plan.data_sha256 or 'none')[:12]}); the problems' "
              f"text is the same, so they are scored against the file as it is now",
              flush=True)
    return plan


def rescore(run_dir: str, workers: int | None = None, timeout: float | None = None) -> dict:
    plan = folder_plan(run_dir, timeout)
    base = plan.baseline
    if base is not None and os.path.exists(os.path.join(base.run_dir, SAMPLES)):
        score_baseline(base, generated=False)
    return score_run(plan, workers)


def main(argv: list[str] | None = None) -> int:
    ap = Parser(prog="python -m tasks.score", description=__doc__.splitlines()[0])
    ap.add_argument("run_dir")
    ap.add_argument("--workers", type=int, default=None,
                    help="scoring processes (default, or 0: the run's scoring.workers, whose 0 "
                         "is one per CPU core)")
    ap.add_argument("--timeout", type=float, default=None,
                    help="per-sample math-verify timeout, in whole seconds")
    a = ap.parse_args(argv)
    if a.workers is not None and a.workers < 0:  # a pool of -1 workers raised inside scoring
        ap.error(f"--workers: 0 or more; got {a.workers}")
    try:
        s = rescore(a.run_dir, a.workers, a.timeout)
    except (NotARunFolder, ConfigError, DataError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    from tasks.report import report
    print(report(s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
