"""One fidelity run's settings as keys of its cells (nll.py's flags -> cell keys).

`bench fidelity` and the time-boxed batch runner (`bench fidelity-gpu`, gpu.py) both
name their cells with these functions, so a cell made by one is found by the other:
`bench fidelity <same flags> --report-only` tabulates what the batch runner made.
"""
import hashlib
import json
import os
from pathlib import Path

from scripts.fidelity import methods as fm
from scripts.fidelity.cells import CellStore

ROOT = Path(__file__).resolve().parents[2]


def data_dir() -> str:
    return os.environ.get("ZIPAGE_DATA_DIR") or str(ROOT.parent / "shared/datasets")


def finish_args(args):
    """Fill the defaults that depend on the environment (in place); returns args."""
    if args.prompt_tokens != "budget" and not str(args.prompt_tokens).isdigit():
        raise SystemExit("--prompt-tokens must be 'budget' or an int")
    args.dataset = args.dataset or os.path.join(data_dir(), "math500.jsonl")
    args.methods = fm.expand(args.methods)
    return args


def store(args) -> CellStore:
    return CellStore(args.cells_dir or str(ROOT / "results/cells" / Path(args.out).name))


def prompt_len(args, budget: int) -> int:
    return budget if args.prompt_tokens == "budget" else int(args.prompt_tokens)


def num_tokens(args) -> int:
    p_max = max(prompt_len(args, B) for B in args.budgets)
    return p_max + args.forced_tokens if args.forced_tokens else args.text_tokens


def excluded_records(args) -> list[str]:
    exclude = []
    for path in args.exclude_sources:
        with open(path) as f:
            exclude += [r for text in json.load(f)["text_sources"] for r in text]
    return sorted(set(exclude))


def texts_key(args, device: str) -> dict:
    key = dict(model=args.model, dataset=os.path.basename(args.dataset), source=args.text_source,
               num_texts=args.num_texts, num_tokens=num_tokens(args), seed=args.seed,
               exclude=excluded_records(args))
    if args.text_source == "generated":
        key["device"] = device  # the sampled solutions depend on the device's numerics
        if args.solution_tokens != 512:  # (512: keys of runs made before the flag existed)
            key["solution_tokens"] = args.solution_tokens
    return key


def text_sha(texts) -> str:
    return hashlib.sha1(json.dumps(texts).encode()).hexdigest()[:16]


def check_budgets(args, texts) -> None:
    b = args.block_size
    for B in args.budgets:
        P = prompt_len(args, B)
        if B % b or P + b >= len(texts[0]):
            raise SystemExit(f"budget {B}: needs a multiple of the block size {b} and a prompt "
                             f"({P}) + block shorter than the texts ({len(texts[0])} tokens)")


def full_prompt(args) -> int:
    """Full KV runs once, from the smallest prompt (teacher forcing is causal)."""
    return min(prompt_len(args, B) for B in args.budgets)


def forced_end(args, budget: int, n_text: int) -> int:
    return prompt_len(args, budget) + args.forced_tokens if args.forced_tokens else n_text


def full_key(args, sha: str, device: str) -> dict:
    ref_dtype = "float32" if args.reference == "transformers" else args.dtype
    return dict(kind="full", reference=args.reference, model=args.model, texts=sha,
                prompt_tokens=full_prompt(args),
                device="cpu" if args.reference == "transformers" else device, dtype=ref_dtype)


def method_options(args, method: str) -> dict:
    return fm.engine_options(method, args.window, args.sinks)


def cell_key(args, method: str, budget: int, sha: str, n_text: int, device: str) -> dict:
    return dict(kind="run", method=method, options=method_options(args, method), budget=budget,
                block_size=args.block_size, prompt_tokens=prompt_len(args, budget),
                forced_end=forced_end(args, budget, n_text), model=args.model, texts=sha,
                device=device, dtype=args.dtype)
