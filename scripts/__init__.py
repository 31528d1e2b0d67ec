"""The benchmark tooling: `python -m scripts.bench <subcommand>` (scripts/bench.py)."""
