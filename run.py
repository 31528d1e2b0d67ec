#!/usr/bin/env python
"""Evaluate Zipage against Full KV on a reasoning benchmark.

    python run.py task=amc23 budget=2048
    python run.py task=gsm8k task.limit=4 sampling.n=2 sampling.max_tokens=64 data_dir=../shared/datasets

Results go to results/<task>/<model>/<run>/ (override with hydra.run.dir=...); rerunning the
same command resumes there. Re-score a run folder with `python -m tasks.score RUN_DIR`.
"""
import sys

import hydra
from hydra.core.hydra_config import HydraConfig

from tasks.config import register_configs

register_configs()  # schemas and resolvers must exist before Hydra composes the config


@hydra.main(version_base=None, config_path="configs", config_name="config")
def main(cfg) -> None:
    from tasks.base import DataError
    from tasks.report import report
    from tasks.evaluate import ConfigError, evaluate

    run_dir = HydraConfig.get().runtime.output_dir
    try:
        summary = evaluate(cfg, run_dir)
    except (ConfigError, DataError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:  # finished samples are already on disk
        print(f"\ninterrupted; rerun the same command to resume ({run_dir})", file=sys.stderr)
        sys.exit(130)
    print(report(summary))


if __name__ == "__main__":
    main()
