"""The progress bar shows what a user watching a long run wants (issue 15)."""
import time

import pytest

import zipage.engine.progress as progress
from tests.engine.tiny_models import random_prompts, tiny_checkpoint
from zipage import LLM, SamplingParams


@pytest.fixture(scope="module")
def llm():
    return LLM(tiny_checkpoint("qwen3")[0], device="cpu", block_size=16, budget=32,
               kv_cache_tokens=16 * 12, max_num_seqs=3)


def test_the_numbers_mid_run(llm):
    params = SamplingParams(temperature=0, max_tokens=40, ignore_eos=True)
    for i, prompt in enumerate(random_prompts([50, 10, 20, 30, 5], vocab=384)):
        llm.engine.add_request(i, prompt, params)
    bar = progress.Progress(llm.engine, 5, start=time.perf_counter(), enabled=False)
    for _ in range(30):
        for _, completion in llm.engine.step():
            bar.sample_done(len(completion.token_ids))
    n = bar.numbers()
    assert n["running"] == 3 and n["waiting"] == 2  # max_num_seqs=3
    assert n["compressions"] == llm.scheduler.num_compressions > 0
    held = llm.num_kv_blocks - llm.block_manager.num_free_blocks
    assert n["kv"] == f"{held / llm.num_kv_blocks:.0%}"
    # The bound on time left: every unfinished sample runs to max_tokens at the rate so far.
    left_tokens = sum(s.max_num_tokens - len(s) for s in llm.scheduler.requests.values())
    assert left_tokens > 0 and n["left<"] != "?" and float(n["out_tok_s"]) > 0
    while llm.engine.has_unfinished:
        llm.engine.step()


def test_the_bar_prints_them(llm, capsys, monkeypatch):
    monkeypatch.setattr(progress, "REFRESH_S", 0.0)
    llm.generate(random_prompts([40, 8], vocab=384), SamplingParams(temperature=0, max_tokens=30),
                 use_tqdm=True)
    err = capsys.readouterr().err
    for field in ("generate", "out_tok_s=", "running=", "waiting=", "kv=", "compressions=", "left<="):
        assert field in err
