#!/usr/bin/env python
"""Evaluate Zipage against Full KV on a reasoning benchmark.

    python run.py task=amc23 budget=2048
    python run.py task=gsm8k task.limit=4 sampling.n=2 sampling.max_tokens=64 data_dir=../shared/datasets

Results go to results/<task>/<model>/<run>/, a folder named after what ran (CPU clamps
applied) and created only once the config is valid; run_dir=... picks another. Rerunning
the same command resumes there. Re-score a run folder with `python -m tasks.score RUN_DIR`.
"""
import os
import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode

from tasks.config import register_configs
from tasks.overrides import check_overrides

register_configs()  # schemas must exist before Hydra composes the config


CONFIGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "configs")


@hydra.main(version_base=None, config_path=CONFIGS, config_name="config")
def main(cfg) -> None:
    from tasks.base import DataError
    from tasks.evaluate import ConfigError, evaluate
    from tasks.report import report
    from zipage.models.hub import ModelNotFoundError
    from zipage.models.loader import HostMemoryError

    from tasks.model_choice import stated_keys

    hydra_cfg = HydraConfig.get()
    try:
        summary = evaluate(cfg, *run_folder(hydra_cfg),
                           stated=stated_keys(hydra_cfg.overrides.task))
    except (ConfigError, DataError, ModelNotFoundError, HostMemoryError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:  # finished samples are already on disk
        print("\ninterrupted: finished samples are saved; rerun the same command to resume",
              file=sys.stderr)
        sys.exit(130)
    print(report(summary))


def run_folder(hydra_cfg) -> tuple[str | None, str | None]:
    """(the run folder if the command names one, else the folder runs are named under).
    hydra.run.dir=... (or hydra.sweep.subdir=...) names it; a multirun names each job's
    folder after what ran, under hydra.sweep.dir (results/multirun/<task>/<model>/<run>)."""
    if hydra_cfg.mode == RunMode.MULTIRUN:
        sub = hydra_cfg.sweep.subdir
        if sub in (None, "", "."):
            return None, hydra_cfg.sweep.dir
        return os.path.join(hydra_cfg.sweep.dir, sub), None
    return (hydra_cfg.run.dir if hydra_cfg.run.dir != "." else None), None


def cli() -> None:
    error = check_overrides(sys.argv[1:])  # `+key=` included: Hydra would accept a typo
    if error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    main()


if __name__ == "__main__":
    cli()
