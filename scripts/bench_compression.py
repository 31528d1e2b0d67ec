"""Compression cost inside the engine vs decode cost (issue: Compressed PagedAttention, item 5).

Runs N requests (default 64, Qwen3-8B shape, random weights) long enough that every request
compresses, with per-stage compression timing on, and prints: time of one compression of the
whole batch (per-stage breakdown) next to the time of 256 decode steps of that batch.
"""
import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from zipage import LLM, SamplingParams  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen3-8b")
    ap.add_argument("--num-requests", type=int, default=64)
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--output-len", type=int, default=2600)
    ap.add_argument("--budget", type=int, default=2048)
    ap.add_argument("--block-size", type=int, default=256)
    ap.add_argument("--redundancy", default="lightning")
    a = ap.parse_args()
    print(f"gpu {torch.cuda.get_device_name()} | torch {torch.__version__} | workload {vars(a)}")
    llm = LLM(a.model, load_format="dummy", budget=a.budget, block_size=a.block_size,
              max_num_seqs=a.num_requests, max_model_len=a.prompt_len + a.output_len + 16,
              use_global_score=True, use_pooling=True, redundancy=a.redundancy,
              profile_compression=True)
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(0, 150000, (a.prompt_len,), generator=g).tolist()
               for _ in range(a.num_requests)]
    params = SamplingParams(temperature=0.6, seed=0, max_tokens=a.output_len, ignore_eos=True)
    # Warm-up that compresses (prompts longer than the cap compress right after prefill), so
    # Triton's one-time kernel compilation stays out of the timed run.
    long_prompts = [torch.randint(0, 150000, (a.budget + 2 * a.block_size,), generator=g).tolist()
                    for _ in range(a.num_requests)]  # same batch size: same Triton specialisation
    llm.generate(long_prompts, SamplingParams(max_tokens=4, ignore_eos=True), use_tqdm=False)
    assert llm.last_stats.num_compressions >= a.num_requests, "warm-up did not compress"
    llm.runner.compressor.stage_ms.clear()
    llm.runner.compressor.round_ms.clear()
    t0 = time.perf_counter()
    outs = llm.generate(prompts, params, use_tqdm=False)
    wall = time.perf_counter() - t0
    st = llm.last_stats
    events = st.num_compressions / a.num_requests  # batch-wide compression rounds
    stage = llm.runner.compressor.stage_ms
    per_round = {k: v / max(events, 1) for k, v in stage.items()}
    decode_s = wall - st.compression_time_s
    step_ms = decode_s / st.num_steps * 1e3
    print(f"requests {a.num_requests}, steps {st.num_steps}, compressions {st.num_compressions} "
          f"({events:.1f} per request), peak KV tokens {max(o.metrics['peak_kv_tokens'] for o in outs)}")
    print(f"wall {wall:.2f} s, output tok/s {st.output_tokens_per_s:.0f}, compression share "
          f"{st.compression_time_s / wall:.1%}")
    print("per-stage compression time per batch round (ms): "
          + ", ".join(f"{k}={v:.2f}" for k, v in per_round.items()))
    rounds = llm.runner.compressor.round_ms
    full = sorted(ms for n, ms in rounds if n == a.num_requests)
    print(f"compression calls: {len(rounds)} (batch sizes {sorted({n for n, _ in rounds})}); "
          f"whole-batch calls: {len(full)}, ms min/median/max "
          + (f"{full[0]:.1f}/{full[len(full) // 2]:.1f}/{full[-1]:.1f}" if full else "-"))
    print(f"\n{'one compression of the batch':<36}{per_round.get('total', 0):>10.1f} ms")
    print(f"{'256 decode steps of the batch':<36}{256 * step_ms:>10.1f} ms  ({step_ms:.2f} ms/step)")
    print(f"{'ratio (compression / 256 steps)':<36}{per_round.get('total', 0) / (256 * step_ms):>10.3f}")


if __name__ == "__main__":
    main()
