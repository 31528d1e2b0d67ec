"""Where a decode step's time goes: GPU kernels (torch.profiler, eager) and host phases."""
import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from zipage import LLM, SamplingParams  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen3-8b")
    ap.add_argument("--num-requests", type=int, default=256)
    ap.add_argument("--max-model-len", type=int, default=4096)
    a = ap.parse_args()
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(0, 150000, (128,), generator=g).tolist() for _ in range(a.num_requests)]
    params = SamplingParams(temperature=0, max_tokens=48, ignore_eos=True)
    for eager, max_len in ((False, 40960), (False, 4096), (True, 40960)):
        llm = LLM(a.model, load_format="dummy", max_num_seqs=a.num_requests, enforce_eager=eager,
                  max_model_len=max_len)
        llm.generate(prompts, SamplingParams(max_tokens=4, ignore_eos=True), use_tqdm=False)
        import cProfile
        import pstats
        pr = cProfile.Profile()
        t0 = time.perf_counter()
        pr.enable()
        llm.generate(prompts, params, use_tqdm=False)
        pr.disable()
        st = llm.last_stats
        if not eager and max_len == 4096:
            pstats.Stats(pr).sort_stats("tottime").print_stats(8)
        print(f"eager={eager} max_model_len={max_len}: {(time.perf_counter() - t0) / st.num_steps * 1e3:.2f} ms/step "
              f"(schedule {st.schedule_time_s / st.num_steps * 1e3:.2f}, execute "
              f"{st.execute_time_s / st.num_steps * 1e3:.2f})")
        if eager:
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                llm.generate(prompts, SamplingParams(max_tokens=8, ignore_eos=True), use_tqdm=False)
            print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=22, max_name_column_width=60))
        llm.shutdown()
        del llm


if __name__ == "__main__":
    main()
