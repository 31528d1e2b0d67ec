"""What the benchmark subcommands share: model / dtype / seed / JSON options, the scoring
preset, the hardware and version header, and small device helpers."""
import argparse
import gc
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from scripts.arg_types import positive_int
from zipage.compression.config import CompressionConfig
from zipage.compression.presets import PRESETS
from zipage.config import EngineConfig
from zipage.models.presets import SHAPES

DTYPES = ("auto", "bfloat16", "float16", "float32")
# The scoring of the harness' engine presets (configs/engine/): `zipage` is the default (the
# published score); the other Zipage scorings and the comparison methods (docs/method.md §14).
SCORING = PRESETS


def add_model_arguments(p: argparse.ArgumentParser, default: str = "qwen3-8b",
                        cpu_smoke: bool = True) -> None:
    p.add_argument("--model", default=default,
                   help=f"preset shape with random weights ({', '.join(SHAPES)}) or a Hugging "
                        f"Face checkpoint folder (default {default})")
    p.add_argument("--dtype", default="auto", choices=DTYPES,
                   help="auto = bfloat16 on a GPU, float32 on the CPU (the engine's rule)")
    p.add_argument("--tensor-parallel-size", type=positive_int, default=1,
                   help="GPUs (rank processes) per engine; LLM(tensor_parallel_size=N)")
    p.add_argument("--kv-cache-dtype", default="auto", choices=("auto", "fp8"),
                   help="KV cache storage: auto = the model dtype; fp8 = e4m3 with a float32 "
                        "scale per (token, KV head) (docs/fp8.md)")
    p.add_argument("--fp8-decode", default="f16", choices=("f16", "e4m3"),
                   help="fp8 only: decode attention with tiles converted to f16 (default) or "
                        "with e4m3 MMAs on the cache bytes (EngineConfig.fp8_decode)")
    if cpu_smoke:
        p.add_argument("--cpu-smoke", action="store_true",
                       help="tiny random Qwen3 on the CPU (checks the flow, not speed)")


def add_common_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", metavar="OUT", help="also write all results to this JSON file")


def add_async_argument(p: argparse.ArgumentParser, help: str) -> None:
    """--async-scheduling / --no-async-scheduling, defaulting to the engine's default."""
    default = EngineConfig.__dataclass_fields__["async_scheduling"].default
    p.add_argument("--async-scheduling", action=argparse.BooleanOptionalAction, default=default,
                   help=f"{help} (default: {'on' if default else 'off'}, the engine's default)")


def add_scoring_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scoring", default="zipage", choices=sorted(SCORING),
                   help="eviction score: zipage = CompressionConfig() (the default, what "
                        "engine=zipage runs: the published Zipage score, global + pool + "
                        "lightning redundancy at weight 0.8; zipage_paper is the same); "
                        "zipage_full = CompressionConfig.full_score() (weight 0.2); "
                        "zipage_attn_recent = CompressionConfig.attn_recent() (tuned on "
                        "SmolLM2: attention + 4 sinks + the most recent quarter); the others: "
                        "the comparison presets of docs/method.md §14")


def scoring(args, **overrides) -> CompressionConfig:
    return SCORING[args.scoring](**overrides)


def check_engine_options(model: str, opts: dict, engine: str) -> dict:
    """`opts` if the engine accepts them; else exit naming the engine, before any model loads
    (a run of several engines would otherwise fail only after the ones before it ran)."""
    try:
        EngineConfig.from_kwargs(model, **opts)
    except (TypeError, ValueError) as e:
        raise SystemExit(f"error: engine {engine}: {e}") from None
    return opts


def device_for(args) -> torch.device:
    if getattr(args, "cpu_smoke", False) or not torch.cuda.is_available():
        return torch.device("cpu")
    return torch.device("cuda")


def torch_dtype(name: str, device: torch.device) -> torch.dtype:
    if name == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    return getattr(torch, name)


def engine_model(args, device: torch.device) -> tuple[str, dict, object]:
    """(model for LLM(...), base engine options, temporary folder to clean up or None)."""
    opts = {"dtype": args.dtype, "seed": args.seed, "kv_cache_dtype": args.kv_cache_dtype}
    if getattr(args, "fp8_decode", "f16") != "f16":
        opts["fp8_decode"] = args.fp8_decode
    if getattr(args, "tensor_parallel_size", 1) > 1:
        opts["tensor_parallel_size"] = args.tensor_parallel_size
    if device.type == "cpu":
        opts["device"] = "cpu"
    if getattr(args, "cpu_smoke", False):
        tmp = tempfile.TemporaryDirectory()
        return tiny_checkpoint(tmp.name), opts, tmp
    if args.model in SHAPES:
        opts["load_format"] = "dummy"
    return args.model, opts, None


def tiny_checkpoint(folder: str) -> str:
    """A tiny random Qwen3 checkpoint (config.json + safetensors), like the test models."""
    from transformers import AutoModelForCausalLM, Qwen3Config
    cfg = Qwen3Config(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                      max_position_embeddings=512, tie_word_embeddings=False)
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).save_pretrained(folder)
    return folder


def _run(cmd: list[str]) -> str | None:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=20,
                              check=True).stdout.strip() or None
    except Exception:  # tool missing, no GPU, not a git checkout, ...
        return None


ROOT = Path(__file__).resolve().parents[1]  # the repository


def invocation() -> str:
    """The command line that started this process, as a user would type it (written into
    reports so that each says how it was made)."""
    script = Path(sys.argv[0])
    try:
        rel = script.resolve().relative_to(ROOT)
        head = ["python", "-m", ".".join(rel.with_suffix("").parts)]
    except ValueError:
        head = [str(script)]  # an installed entry point (zipage-bench)
    return " ".join(head + [shlex.quote(a) for a in sys.argv[1:]])


# Environment variables that change what a benchmark times (recorded with its results).
SPEED_OVERRIDES = ("ZIPAGE_FP8_DECODE_LAUNCH", "ZIPAGE_NO_COMPILE")


def environment(device: torch.device) -> dict:
    """Hardware and software versions, printed first and stored in the JSON."""
    env = {"python": platform.python_version(), "torch": torch.__version__,
           "torch_cuda": torch.version.cuda, "platform": platform.platform(),
           "cpu": platform.processor() or platform.machine(), "cpu_count": os.cpu_count()}
    for mod in ("triton", "transformers"):
        try:
            env[mod] = __import__(mod).__version__
        except Exception:
            env[mod] = None
    commit = _run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"])
    dirty = _run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"])
    env["zipage_commit"] = f"{commit}{'+dirty' if dirty else ''}" if commit else None
    overrides = {k: os.environ[k] for k in SPEED_OVERRIDES if k in os.environ}
    if overrides:  # kernels other than the code's defaults: a run must say so
        env["zipage_overrides"] = overrides
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        env.update(gpu=p.name, gpu_memory_gib=round(p.total_memory / 2**30, 1),
                   sm_count=p.multi_processor_count, capability=f"{p.major}.{p.minor}")
        env["nvidia_smi"] = _run(["nvidia-smi", f"--id={device.index or 0}",
                                  "--query-gpu=driver_version,clocks.max.sm,clocks.max.mem,"
                                  "power.limit,persistence_mode", "--format=csv,noheader"])
    return env


def print_header(device: torch.device, workload: dict) -> dict:
    """Print the environment and the workload; returns the environment."""
    env = environment(device)
    print("== environment\n" + "\n".join(f"  {k}: {v}" for k, v in env.items()))
    print("== workload\n" + "\n".join(f"  {k}: {v}" for k, v in workload.items()), flush=True)
    return env


def write_json(path: str | None, result: dict) -> None:
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(f"{path}.tmp")  # a crash mid-write leaves the previous file whole
        tmp.write_text(json.dumps(result, indent=2, default=str))
        os.replace(tmp, path)
        print(f"== results written to {path}")


def prompt_vocab(model: str) -> int:
    """Token ids for random prompts: below 150000 (every preset's vocabulary is larger; the
    measured workloads used this bound) and below the model's own vocabulary."""
    if model in SHAPES:
        vocab = SHAPES[model]["vocab_size"]
    else:
        from transformers import AutoConfig
        vocab = AutoConfig.from_pretrained(model).vocab_size
    return min(150000, vocab)


def random_prompts(n: int, length: int, vocab_size: int, seed: int) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab_size, (n, length), generator=g).tolist()


def sync(device: torch.device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def free_memory(device: torch.device):
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
