"""Functions run on each rank by the distributed tests (importable by spawned processes).

Heavy imports stay inside the functions, so a rank only loads what its test needs.
"""
import os
import time

import torch


def model_outputs(tp, cases: dict, prompts, steps: int) -> dict:
    """{label: PagedRun.greedy result plus this rank's samples of the last logits}.
    A case is (ModelSpec, folder or None, gguf or None, load_format)."""
    from tests.distributed.paged_run import PagedRun, sample_rows
    from zipage.models.loader import build_model
    out = {}
    for label, (spec, path, gguf, load_format) in cases.items():
        model = build_model(spec, path, gguf, load_format, torch.float32, tp.device, seed=0, tp=tp)
        result = PagedRun(model, prompts, steps).greedy(steps)
        result["sampled"] = sample_rows(result["logits"][-1].to(tp.device)).cpu()
        if load_format == "dummy":
            result["state"] = {k: v.cpu() for k, v in model.state_dict().items()}
        out[label] = result
    return out


def dummy_forward(tp, spec, dtype, prompt_len: int) -> dict:
    """One prefill of a random-weight model: this rank's parameter bytes and last logits."""
    from tests.distributed.paged_run import PagedRun
    from zipage.models.loader import build_model
    model = build_model(spec, None, None, "dummy", dtype, tp.device, tp=tp)
    run = PagedRun(model, [list(range(1, prompt_len + 1))], steps=1)
    with torch.inference_mode():
        logits = run.forward([], [0])
    return {"param_bytes": sum(p.numel() * p.element_size() for p in model.parameters()),
            "logits": logits.float().cpu()}




def group_facts(tp, value: int) -> dict:
    """What the group computes: a sum, a gather, a minimum; and this rank's own pid."""
    x = torch.tensor([float(value + tp.rank)])
    return {"sum": tp.all_reduce(x.clone()).item(), "gather": tp.all_gather(x).flatten().tolist(),
            "min": tp.min(value + 10 * tp.rank), "pid": os.getpid(), "rank": tp.rank}


def build_on_rank_one(tp, spec) -> None:
    """Rank 1 builds its share of `spec`; rank 0 waits in an all-reduce for it."""
    if tp.rank == 1:
        from zipage.models.decoder import CausalLM
        CausalLM(spec, tp)
    tp.all_reduce(torch.zeros(1))


def crash_on_rank_one(tp) -> None:
    if tp.rank == 1:
        os._exit(3)  # dies without a word, like a segfault or the OOM killer
    tp.all_reduce(torch.zeros(1))


def sleep_forever(tp, pid_file: str) -> None:
    with open(f"{pid_file}.{tp.rank}", "w") as f:
        f.write(str(os.getpid()))
    time.sleep(600)


def runner_pool(tp, folder: str, tokens_per_rank: list[int]) -> dict:
    """A ModelRunner on this rank's shard, each rank offered a different pool: the plan."""
    from zipage.config import EngineConfig
    from zipage.models.loader import build_model, spec_for
    from zipage.worker.model_runner import ModelRunner
    cfg = EngineConfig(model=folder, block_size=16, kv_cache_tokens=tokens_per_rank[tp.rank],
                       tensor_parallel_size=tp.size)
    model = build_model(spec_for(folder, None), folder, None, "auto", torch.float32, tp.device,
                        tp=tp)
    runner = ModelRunner(cfg, model, tp.device, torch.float32, 256)
    return {"blocks": runner.plan.num_blocks, "kv_shape": tuple(runner.kv_cache.shape)}
