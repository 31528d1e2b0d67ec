"""One entry point for every benchmark: python -m scripts.bench <subcommand> [options]
(also installed as ``zipage-bench``).

Each subcommand is a module with ``add_arguments(parser)`` and ``main(args) -> int | None``.
Modules are imported only when their subcommand runs, so ``--help`` is fast and a missing
optional dependency of one benchmark does not break the others. Adding a subcommand is one
line in SUBCOMMANDS.
"""
import argparse
import importlib
import sys

from tasks.cli_parser import known_options, with_closest

# name -> (module, one-line description), grouped by concern (the package of the module)
SUBCOMMANDS = {
    # throughput: our engine on the GPU (most have --cpu-smoke)
    "throughput": ("scripts.throughput.throughput",
                   "our engine vs Hugging Face transformers generate"),
    "long": ("scripts.throughput.long", "Zipage vs our Full KV on long generations"),
    "compression": ("scripts.throughput.compression",
                    "compression cost vs decode cost in the engine"),
    "profile": ("scripts.throughput.profile_step",
                "where a decode step's time goes (GPU kernels, host)"),
    "host": ("scripts.throughput.host", "host work per engine step without a model (CPU ok)"),
    "gemm": ("scripts.throughput.gemm",
             "the decode step's GEMMs alone: cuBLAS, cuBLASLt, TunableOp"),
    "kernels": ("scripts.throughput.kernels", "Triton kernels vs PyTorch references: speed"),
    "dp": ("scripts.throughput.dp", "one engine vs N data-parallel replicas, same workload"),
    "fp8": ("scripts.throughput.fp8", "fp8 vs model-dtype KV cache, Full KV and Zipage"),
    "fp8-kernels": ("scripts.throughput.fp8_kernels",
                    "FP8 paged attention kernels vs the FP8 byte roofline, next to bf16"),
    "fp8-energy-choice": ("scripts.throughput.fp8_energy_choice",
                          "the FP8 decode launch for an engine run, chosen by energy per call"),
    "fp8-flat-splits": ("scripts.throughput.fp8_flat_splits",
                        "the flat FP8 decode's split count on shapes the sweep does not tune on"),
    "fp8-rotation": ("scripts.throughput.rotation_cost",
                     "GPU time of fp8_key_rotation's q/k matmuls per layer"),
    # fidelity: does compression change what the model says? (SmolLM2, CPU ok)
    "fidelity": ("scripts.fidelity.nll", "teacher-forced NLL vs Full KV (CPU ok)"),
    "fidelity-decide": ("scripts.fidelity.decide",
                        "the rule that picks the default score from fidelity results"),
    "fidelity-gpu": ("scripts.fidelity.gpu",
                     "fidelity + agreement runs in one time-boxed GPU call"),
    "agreement": ("scripts.fidelity.agreement",
                  "final-answer agreement with Full KV on SmolLM2 (CPU ok)"),
    "fp8-fidelity": ("scripts.fidelity.fp8", "fp8 KV cache NLL vs full precision (CPU ok)"),
    "long-generations": ("scripts.fidelity.long_generations",
                         "SmolLM2's own long trajectories: the long-reasoning fidelity domain"),
    "fidelity-domains": ("scripts.fidelity.domains",
                         "fidelity per domain: every method vs Full KV, the default's rule"),
    # sim: throughput of workloads too long to measure
    "calibrate": ("scripts.sim.calibrate", "step-cost model of the real runner: timed grid, fit"),
    "simulate": ("scripts.sim.simulate",
                 "throughput predicted by the real scheduler on a cost model"),
    # gpu: several of the above in one call, logged
    "gpu-suite": ("scripts.gpu.suite", "named stages of GPU tests and benchmarks, timed, logged"),
}

# Two-word spellings kept working: `fidelity decide ...` is `fidelity-decide ...`.
ALIASES = {("fidelity", "decide"): "fidelity-decide"}


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


def resolve_aliases(argv: list[str]) -> list[str]:
    for i, word in enumerate(argv):
        if not word.startswith("-"):  # the subcommand
            alias = ALIASES.get(tuple(argv[i:i + 2]))
            return argv[:i] + [alias] + argv[i + 2:] if alias else argv
    return argv


def refuse_unknown(parser: argparse.ArgumentParser, name: str, unknown: list[str]) -> None:
    """Exit 2 naming each unknown option of subcommand `name`, with the closest known one."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    chosen = sub.choices[name]
    chosen.error(f"unrecognized arguments: {with_closest(unknown, known_options(chosen))}")


def main(argv: list[str] | None = None) -> int:
    argv = resolve_aliases(sys.argv[1:] if argv is None else list(argv))
    chosen = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(chosen if chosen in SUBCOMMANDS else None)
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        refuse_unknown(parser, args.subcommand, unknown)
    from zipage.models.hub import ModelNotFoundError
    from zipage.models.loader import HostMemoryError
    try:
        return load(args.subcommand).main(args) or 0
    except (ModelNotFoundError, HostMemoryError) as e:  # the message says what to do
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
