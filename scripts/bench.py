"""One entry point for every benchmark: python -m scripts.bench <subcommand> [options]
(also installed as ``zipage-bench``).

Each subcommand is a module with ``add_arguments(parser)`` and ``main(args) -> int | None``.
Modules are imported only when their subcommand runs, so ``--help`` is fast and a missing
optional dependency of one benchmark does not break the others.
"""
import argparse
import importlib
import sys

# name -> (module, one-line description)
SUBCOMMANDS = {
    "throughput": ("scripts.throughput", "our engine vs Hugging Face transformers generate"),
    "long": ("scripts.long_reasoning", "Zipage vs our Full KV on long generations"),
    "compression": ("scripts.compression_cost", "compression cost vs decode cost in the engine"),
    "host": ("scripts.host", "host work per engine step without a model (CPU ok)"),
    "profile": ("scripts.profile_step", "where a decode step's time goes (GPU kernels, host)"),
    "fidelity": ("scripts.fidelity", "teacher-forced NLL / agreement vs Full KV (CPU ok)"),
    "agreement": ("scripts.agreement", "final-answer agreement with Full KV on SmolLM2 (CPU ok)"),
    "long-generations": ("scripts.long_generations",
                         "SmolLM2's own long trajectories: the long-reasoning fidelity domain"),
    "fidelity-domains": ("scripts.fidelity_domains",
                         "fidelity per domain, every method vs Full KV, and the default rule"),
    "gemm": ("scripts.gemm", "the decode step's GEMMs alone: cuBLAS, cuBLASLt, TunableOp"),
    "kernels": ("scripts.kernels", "Triton kernels vs PyTorch references: speed"),
    "calibrate": ("scripts.calibrate", "step-cost model of the real runner: timed grid, fit"),
    "simulate": ("scripts.simulate", "throughput predicted by the real scheduler on a cost model"),
    "dp": ("scripts.data_parallel", "one engine vs N data-parallel replicas, same workload"),
}


def build_parser(chosen: str | None) -> argparse.ArgumentParser:
    """The parser; only the chosen subcommand's module is imported to add its options."""
    parser = argparse.ArgumentParser(
        prog="python -m scripts.bench", description=__doc__.splitlines()[0], allow_abbrev=False,
        epilog="`python -m scripts.bench <subcommand> --help` lists a subcommand's options.")
    sub = parser.add_subparsers(dest="subcommand", metavar="subcommand", required=True)
    for name, (module_name, description) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=description, description=description, allow_abbrev=False)
        if name == chosen:
            load(name).add_arguments(p)
    return parser


def load(name: str):
    module_name = SUBCOMMANDS[name][0]
    try:
        return importlib.import_module(module_name)
    except ImportError as e:
        missing = getattr(e, "name", None)
        if missing == module_name:
            raise SystemExit(f"subcommand {name!r}: module {module_name} is not in this "
                             f"checkout") from None
        raise SystemExit(f"subcommand {name!r} cannot run: {e} (install what it needs, "
                         f"e.g. `pip install -e \".[test]\"`)") from None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    chosen = next((a for a in argv if not a.startswith("-")), None)
    args = build_parser(chosen if chosen in SUBCOMMANDS else None).parse_args(argv)
    return load(args.subcommand).main(args) or 0


if __name__ == "__main__":
    sys.exit(main())
