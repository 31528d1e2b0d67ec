"""Asynchronous scheduling (step N+1 scheduled while step N runs) changes no output."""
from collections import Counter

from tests.engine.tiny_models import random_prompts
from zipage import LLM, SamplingParams


def _run(folder, prompts, params, **options):
    """{async_scheduling: outputs}, {async_scheduling: preemptions} for both modes."""
    outs, preemptions = {}, {}
    for mode in (False, True):
        llm = LLM(folder, device="cpu", block_size=16, async_scheduling=mode, **options)
        res = llm.generate(prompts, params, use_tqdm=False)
        outs[mode] = [[(c.token_ids, c.finish_reason, c.metrics["num_compressions"],
                        c.metrics["peak_kv_tokens"], c.metrics.get("forced_logprobs"))
                       for c in r.outputs] for r in res]
        preemptions[mode] = llm.last_stats.num_preemptions
        assert llm.block_manager.num_free_blocks == llm.num_kv_blocks  # nothing leaked
        assert not llm.scheduler.has_unfinished and not llm.scheduler.running
    return outs, preemptions


def _stop_token(folder, prompts):
    """A token the model emits often, so that many samples stop early on it."""
    llm = LLM(folder, device="cpu", block_size=16, kv_cache_tokens=8192)
    outs = llm.generate(prompts, SamplingParams(temperature=0, max_tokens=40, ignore_eos=True),
                        use_tqdm=False)
    return Counter(t for o in outs for t in o.token_ids).most_common(1)[0][0]


def test_same_tokens_with_stops_sampling_and_shared_prefixes(folder):
    prompts = random_prompts([5, 33, 17, 1, 48, 9], vocab=384)
    stop = _stop_token(folder, prompts)
    params = [SamplingParams(temperature=t, seed=3, n=2, max_tokens=m, min_tokens=mn,
                             stop_token_ids=[stop])
              for t, m, mn in [(0, 30, 0), (0.8, 45, 0), (0.8, 7, 0), (0, 50, 10), (1.0, 64, 0),
                               (0.5, 20, 20)]]
    outs, _ = _run(folder, prompts, params, kv_cache_tokens=8192)
    assert outs[True] == outs[False]
    reasons = Counter(c[1] for r in outs[True] for c in r)
    assert reasons["stop"] >= 2 and reasons["length"] >= 2  # both paths exercised


def test_same_tokens_with_compression_and_preemption(folder):
    prompts = random_prompts([70, 3, 20, 41, 9, 100, 15, 2], vocab=384)
    params = SamplingParams(temperature=0.7, seed=11, max_tokens=150, ignore_eos=True)
    outs, preemptions = _run(folder, prompts, params, budget=64, kv_cache_tokens=30 * 16,
                             max_num_seqs=8)
    assert outs[True] == outs[False] and preemptions[True] > 0
    assert all(c[2] > 0 for r in outs[True] for c in r)  # every request compressed


def test_same_tokens_with_preemption_under_full_kv(folder):
    prompts = random_prompts([30, 12, 50, 7, 22, 40], vocab=384)
    params = SamplingParams(temperature=0, max_tokens=60, ignore_eos=True)
    llm_opts = dict(kv_cache_tokens=12 * 16, max_num_seqs=6)
    outs, preemptions = _run(folder, prompts, params, **llm_opts)
    assert outs[True] == outs[False] and preemptions[True] > 0


def test_teacher_forcing_records_are_the_same(folder):
    prompts = random_prompts([10, 25], vocab=384)
    forced = random_prompts([30], vocab=384, seed=9)[0]
    params = SamplingParams(temperature=0, max_tokens=30, ignore_eos=True, forced_tokens=forced)
    outs, _ = _run(folder, prompts, params, kv_cache_tokens=4096)
    assert outs[True] == outs[False] and outs[True][0][0][4] is not None
