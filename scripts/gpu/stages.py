"""The GPU suite's stages: a name, what it checks, and its commands (`bench gpu-suite --list`).

Each command is a name (its log is OUT/<name>.log), a wall-clock limit and an argument list;
`{out}` in an argument is the suite's output folder. Adding a stage is one STAGES entry, e.g.

    "fp8-kernels": Stage("FP8 kernels on CUDA", [
        pytest("fp8_tests", 300, "-m", "gpu", "tests/gpu/test_fp8_kernels.py")]),

Limits are what the commands took on one H200 plus a margin (docs/benchmarks.md).
"""
import sys
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Command:
    name: str                 # also the log file: OUT/<name>.log
    limit_s: int              # killed (rc 124) after this many seconds
    argv: tuple[str, ...]

    def resolved(self, out: str) -> list[str]:
        return [a.replace("{out}", out) for a in self.argv]


@dataclass(frozen=True)
class Stage:
    description: str
    commands: list[Command]
    env: dict = field(default_factory=dict)  # set for this stage's commands only


def bench(name: str, limit_s: int, *args: str) -> Command:
    return Command(name, limit_s, (sys.executable, "-m", "scripts.bench", *args))


def pytest(name: str, limit_s: int, *args: str) -> Command:
    return Command(name, limit_s, (sys.executable, "-m", "pytest", *args))


# Issue 12's run (a): 192 x (128 -> 4096), budget 256 / block 32, a 200k-token pool
LONG = ("--num-requests", "192", "--output-len", "4096", "--budget", "256", "--block-size", "32",
        "--kv-cache-tokens", "200000")
TP_TESTS = ("tests/distributed/test_tp_engine_gpu.py", "tests/distributed/test_tp_gpu.py")
# Issue 32's workloads (whole GPU, block 256): Zipage 512 x (128 -> 4096) at budget 2048, and
# Full KV 64 x (128 -> 16384)
ZIPAGE_512 = ("long", "--engines", "zipage", "--num-requests", "512", "--output-len", "4096",
              "--budget", "2048", "--block-size", "256")
FULL_64X16K = ("long", "--engines", "full", "--num-requests", "64", "--output-len", "16384",
               "--budget", "2048", "--block-size", "256")
SMOLLM2_ENV = {"OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}

STAGES = {
    "tests": Stage("every GPU check: kernels and engine on CUDA (pytest -m gpu)", [
        pytest("tests", 540, "-m", "gpu", "tests/gpu", "-rA", "--junitxml={out}/tests.xml")]),
    "quick": Stage("the fast subset of the GPU checks", [
        pytest("quick", 240, "-m", "gpu and quick", "tests/gpu", "-rA")]),
    "throughput": Stage("W1: our engine vs HF generate, Qwen3-8B shape, 256 x (128 -> 512)", [
        bench("throughput", 420, "throughput", "--json", "{out}/throughput.json")]),
    "long": Stage("Zipage vs Full KV on run (a), traced", [
        bench("long", 540, "long", *LONG, "--json", "{out}/long.json",
              "--trace", "{out}/long_trace.json.gz")]),
    "compression": Stage("compression cost vs decode cost", [
        bench("compression", 300, "compression", "--json", "{out}/compression.json")]),
    "profile": Stage("where a decode step's time goes", [
        bench("profile", 300, "profile", "--json", "{out}/profile.json")]),
    "kernels": Stage("Triton kernels vs PyTorch references: speed", [
        bench("kernels", 300, "kernels", "--json", "{out}/kernels.json")]),
    "calibrate": Stage("step-cost model of the runner, four configs (docs/throughput_model.md)", [
        bench("calibrate", 400, "calibrate", "--out", "{out}/step_cost.json")]),
    "fidelity": Stage("fidelity and answer agreement, time-boxed (docs/fidelity.md); needs "
                      "the SmolLM2 GGUF and gguf on PYTHONPATH, ZIPAGE_DATA_DIR", [
        bench("fidelity", 440, "fidelity-gpu", "--max-wall-s", "380",
              "--log-dir", "{out}/fidelity_logs", "--results-dir", "{out}/fidelity")],
        env={"OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}),
    "fp8-kernels": Stage("FP8 paged attention vs the FP8 byte roofline next to bf16 (sweep, "
                         "with each decode variant's energy per call), and the FP8 GPU checks "
                         "(the e4m3 decode's shapes included)", [
        bench("fp8_kernels", 420, "fp8-kernels", "--energy", "1",
              "--json", "{out}/fp8_kernel_sweep.json"),
        pytest("fp8_tests", 300, "-m", "gpu", "tests/gpu/test_fp8_kernels.py",
               "tests/gpu/test_fp8_decode_mma_shapes.py", "-rA")]),
    "rotation": Stage("the FP8 key rotation fused into qk_rotary: GPU time next to the two "
                      "matmuls it replaced, and the compiled kernel's checks", [
        bench("fp8_rotation", 120, "fp8-rotation"),
        pytest("rotation_tests", 180, "-m", "gpu", "tests/gpu/test_pointwise_kernels_gpu.py",
               "-rA")]),
    "fp8-flat-splits": Stage("the flat FP8 decode's split count on six shapes the sweep does "
                             "not tune on (results/bench/fp8_forecast.md, eleventh)", [
        bench("fp8_flat_splits", 200, "fp8-flat-splits", "--json",
              "{out}/fp8_flat_splits.json")]),
    "calibrate-zipage-bf16": Stage("the bf16 Zipage config (block 256) alone: its compression "
                                   "costs predate the published score (results/bench/"
                                   "bf16_compression_whatif.md); merge with --replace", [
        bench("calibrate_zipage_b256", 240, "calibrate", "--configs", "zipage/b256",
              "--out", "{out}/step_cost_zipage_b256.json")]),
    "fp8-calibrate-e4m3": Stage("the FP8 step-cost calibration with the e4m3-MMA decode "
                                "(fp8_decode=e4m3)", [
        bench("fp8_calibrate_e4m3", 360, "calibrate", "--configs", "fullkv/b256", "zipage/b256",
              "--kv-cache-dtype", "fp8", "--fp8-decode", "e4m3", "--rows", "1", "8", "16", "32",
              "48", "64", "96", "128", "192", "256", "384", "512",
              "--out", "{out}/step_cost_fp8_e4m3.json")]),
    "fp8-calibrate": Stage("the FP8 step-cost calibration (Full KV and Zipage, block 256)", [
        bench("fp8_calibrate", 360, "calibrate", "--configs", "fullkv/b256", "zipage/b256",
              "--kv-cache-dtype", "fp8", "--rows", "1", "8", "16", "32", "48", "64", "96",
              "128", "192", "256", "384", "512", "--out", "{out}/step_cost_fp8.json")]),
    "fp8-zipage": Stage("Zipage 512 x (128 -> 4096), budget 2048: bf16 then FP8 KV", [
        bench("zipage512_bf16", 330, *ZIPAGE_512, "--kv-cache-dtype", "auto",
              "--json", "{out}/zipage512_bf16.json"),
        bench("zipage512_fp8", 270, *ZIPAGE_512, "--kv-cache-dtype", "fp8",
              "--json", "{out}/zipage512_fp8.json")]),
    "fp8-zipage-e4m3": Stage("Zipage 512 x (128 -> 4096), budget 2048: bf16 then FP8 KV "
                             "with the e4m3-MMA decode", [
        bench("zipage512_bf16", 330, *ZIPAGE_512, "--kv-cache-dtype", "auto",
              "--json", "{out}/zipage512_bf16.json"),
        bench("zipage512_fp8_e4m3", 270, *ZIPAGE_512, "--kv-cache-dtype", "fp8",
              "--fp8-decode", "e4m3", "--json", "{out}/zipage512_fp8_e4m3.json")]),
    "fp8-full-long-e4m3": Stage("Full KV 64 x (128 -> 16384), FP8 KV, e4m3-MMA decode", [
        bench("full64x16k_fp8_e4m3", 420, *FULL_64X16K, "--kv-cache-dtype", "fp8",
              "--fp8-decode", "e4m3", "--json", "{out}/full64x16k_fp8_e4m3.json")]),
    "fp8-full-long": Stage("Full KV 64 x (128 -> 16384) with FP8 KV", [
        bench("full64x16k_fp8", 420, *FULL_64X16K, "--kv-cache-dtype", "fp8",
              "--json", "{out}/full64x16k_fp8.json")]),
    "fp8-profile": Stage("where FP8's step time goes, next to bf16: 512 decode rows at a short "
                         "context (the step without KV reads, T(512): FP8 1.6 ms over bf16 in "
                         "the calibration) and the compression stages (FP8 3x bf16 there)", [
        bench(f"profile512_{kv}", 240, "profile", "--num-requests", "512", "--budget", "0",
              "--block-size", "256", "--kv-cache-tokens", "400000", "--kv-cache-dtype", kv,
              "--json", f"{{out}}/profile512_{kv}.json") for kv in ("auto", "fp8")] + [
        bench(f"compression_{kv}", 240, "compression", "--kv-cache-dtype", kv,
              "--json", f"{{out}}/compression_{kv}.json") for kv in ("auto", "fp8")]),
    "full-long": Stage("Full KV 64 x (128 -> 16384) with bf16 KV", [
        bench("full64x16k_bf16", 540, *FULL_64X16K, "--kv-cache-dtype", "auto",
              "--json", "{out}/full64x16k_bf16.json")]),
    "fidelity-domains": Stage("issue 31: SmolLM2's long generations, then every method's "
                              "fidelity per domain (needs the SmolLM2 GGUF and gguf/omegaconf "
                              "on PYTHONPATH, ZIPAGE_DATA_DIR)", [
        bench("long_generations", 300, "long-generations",
              "--out", "{out}/long_generations"),
        bench("fidelity_domains", 560, "fidelity-domains", "--device", "cuda",
              "--generations", "{out}/long_generations.json.gz", "--workers", "8",
              "--max-wall-s", "380", "--out", "{out}/domains")],
        env=SMOLLM2_ENV),
    "multi-gpu": Stage("2 GPUs: tensor-parallel tests, 1 engine vs 2 replicas", [
        pytest("tp_tests", 580, "-m", "gpu", "-rA", *TP_TESTS),
        bench("dp", 580, "dp", "--replicas", "2", "--num-requests", "512", "--output-len",
              "1024", "--json", "{out}/dp.json")]),
    "tp-throughput": Stage("2 GPUs: W1 at TP=1 then TP=2", [
        bench("tp1", 280, "throughput", "--skip-hf", "--json", "{out}/tp1.json"),
        bench("tp2", 280, "throughput", "--skip-hf", "--tensor-parallel-size", "2",
              "--json", "{out}/tp2.json")]),
    "long-14b": Stage("2 GPUs: Qwen3-14B shape at TP=2 on run (a)'s workload", [
        bench("long_14b", 580, "long", "--model", "qwen3-14b", "--tensor-parallel-size", "2",
              *LONG[:8], "--json", "{out}/long_14b_tp2.json")]),
}
DEFAULT = ("tests", "throughput")
