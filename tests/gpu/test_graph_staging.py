"""CUDA-graph decode steps launched back to back without collecting (as the calibration
times them) behind a busy device give the tokens of the same steps run one at a time: no
step's queued input copies read a later step's staging (zipage/worker/staging.py).

    python -m pytest -m gpu tests/gpu/test_graph_staging.py     (~30 s, tiny model)
"""
from dataclasses import replace

import torch

from tests.engine.tiny_models import tiny_checkpoint
from zipage import LLM, SamplingParams
from zipage.engine.messages import SchedulerOutput
from zipage.sim.synthetic import GridPoint, synthetic_step


def _step(k: int, context: int, num_blocks: int) -> SchedulerOutput:
    """Eight decode rows over blocks no other step touches, with their own token ids."""
    step = synthetic_step(GridPoint(8, context), 16, num_blocks, None, 0,
                          SamplingParams(temperature=0))
    for sid, row in step.requests.items():
        step.requests[sid] = replace(row, token_ids=[1 + sid + 11 * k],
                                     block_table=[b + 64 * (k + 1) for b in row.block_table])
    return step


def test_back_to_back_graph_steps_keep_their_own_inputs():
    llm = LLM(tiny_checkpoint("qwen3")[0], device="cuda", dtype="float32", block_size=16,
              kv_cache_tokens=4096, max_num_seqs=8)
    runner = llm.runner
    assert runner.graphs is not None and runner.num_kv_blocks >= 4 * 64
    steps = [_step(k, ctx, 64) for k, ctx in enumerate((40, 70, 100))]
    expected = [runner.execute(s).sampled for s in steps]
    assert len({tuple(e.values()) for e in expected}) == 3  # a mix-up would show
    torch.cuda.synchronize()
    torch.cuda._sleep(500_000_000)  # ~0.25 s: every copy below is still queued when the
    handles = [runner.launch(s) for s in steps]  # host prepares the steps after it
    assert [runner.collect(h).sampled for h in handles] == expected
    llm.shutdown()
