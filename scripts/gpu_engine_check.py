"""GPU end-to-end checks of the engine (run on the device; exits non-zero on failure).

1. A tiny random Qwen3 in float32 on CUDA (Triton kernels, CUDA graphs) gives the same greedy
   tokens as transformers on the CPU.
2. CUDA graphs and eager decode give the same tokens (bf16, Qwen3-1.7B shape, dummy weights).
3. Compressed PagedAttention on the GPU: blocks stay capped, none leak.
"""
import gc
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from tests.engine.tiny_models import hf_greedy, random_prompts, tiny_checkpoint  # noqa: E402
from zipage import LLM, SamplingParams  # noqa: E402

failures = []


def check(name, ok, detail=""):
    print(f"{'PASS' if ok else 'FAIL'} {name} {detail}")
    if not ok:
        failures.append(name)


def main():
    quick = "--quick" in sys.argv  # only check 1 (exactness vs transformers)
    folder, hf = tiny_checkpoint("qwen3")
    prompts = random_prompts([3, 17, 40, 9, 64, 25, 1, 33], vocab=384)
    reference = [hf_greedy(hf, p, 64) for p in prompts]
    greedy = SamplingParams(temperature=0, max_tokens=64, ignore_eos=True)
    for eager, async_ in ((True, False), (False, False), (True, True), (False, True)):
        llm = LLM(folder, dtype="float32", block_size=16, max_num_seqs=16, enforce_eager=eager,
                  gpu_memory_utilization=0.3, async_scheduling=async_)
        got = [o.token_ids for o in llm.generate(prompts, greedy, use_tqdm=False)]
        same = sum(a == b for a, b in zip(got, reference))
        check(f"tiny qwen3 fp32 cuda eager={eager} async_scheduling={async_} == transformers",
              same == len(prompts), f"{same}/8")
        check("no leaked blocks", llm.block_manager.num_free_blocks == llm.num_kv_blocks)
        del llm
        gc.collect()
        torch.cuda.empty_cache()

    if quick:
        print("engine checks (quick):", "ALL PASS" if not failures else f"FAILED {failures}")
        sys.exit(1 if failures else 0)
    tokens = {}
    for eager in (True, False):
        llm = LLM("qwen3-1.7b", load_format="dummy", block_size=16, max_num_seqs=64,
                  enforce_eager=eager, max_model_len=4096, gpu_memory_utilization=0.5)
        ps = random_prompts([20 + 7 * i for i in range(32)], vocab=151936, seed=5)
        t0 = time.perf_counter()
        tokens[eager] = [o.token_ids for o in llm.generate(ps, greedy, use_tqdm=False)]
        print(f"qwen3-1.7b dummy bf16 eager={eager}: {time.perf_counter() - t0:.2f}s")
        del llm
        gc.collect()
        torch.cuda.empty_cache()
    same = sum(a == b for a, b in zip(tokens[True], tokens[False]))
    check("cuda graphs == eager (bf16 1.7B)", same >= 30, f"{same}/32 identical")

    for mode in ("none", "lightning", "raw"):
        llm = LLM("qwen3-1.7b", load_format="dummy", block_size=16, budget=128, max_num_seqs=64,
                  max_model_len=4096, gpu_memory_utilization=0.5, use_global_score=True,
                  use_pooling=True, redundancy=mode, profile_compression=True)
        ps = random_prompts([20 + 11 * i for i in range(32)], vocab=151936, seed=6)
        t0 = time.perf_counter()
        outs = llm.generate(ps, SamplingParams(temperature=0.6, seed=1, max_tokens=400, ignore_eos=True),
                            use_tqdm=False)
        peaks = [o.metrics["peak_kv_tokens"] for o in outs]
        comps = [o.metrics["num_compressions"] for o in outs]
        check(f"compression {mode}: peak <= max(prompt, cap)",
              all(p <= max(144, len(x)) for p, x in zip(peaks, ps)), f"max peak {max(peaks)}")
        check(f"compression {mode}: every request compressed", min(comps) >= 1, f"min {min(comps)}")
        check(f"compression {mode}: no leaked blocks", llm.block_manager.num_free_blocks == llm.num_kv_blocks)
        print(f"  {mode}: {time.perf_counter() - t0:.2f}s, stats {llm.last_stats.as_dict()}")
        print(f"  stage ms: {llm.runner.compressor.stage_ms}")
        del llm
        gc.collect()
        torch.cuda.empty_cache()
    print("engine checks:", "ALL PASS" if not failures else f"FAILED {failures}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
