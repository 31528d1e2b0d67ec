"""Bad input fails alone, and an interrupted or failed generate leaves a usable engine
(issue 11 items 3 and 7)."""
import pytest

from tests.engine.tiny_models import random_prompts
from zipage import LLM, SamplingParams

GREEDY = SamplingParams(temperature=0, max_tokens=30, ignore_eos=True)


@pytest.fixture(scope="module", params=[False, True], ids=["sync", "async"])
def llm(folder, request):
    return LLM(folder, device="cpu", block_size=16, budget=32, kv_cache_tokens=16 * 8,
               max_num_batched_tokens=64, async_scheduling=request.param)


def assert_empty(llm):
    """All KV blocks free, no request in the scheduler, every query slot returned."""
    assert llm.block_manager.num_free_blocks == llm.num_kv_blocks
    assert not llm.scheduler.has_unfinished and not llm.scheduler.running and not llm.scheduler.waiting
    assert sorted(llm.scheduler.free_slots) == list(range(llm.runner.num_query_slots))
    assert not llm.engine.has_unfinished


@pytest.fixture(scope="module")
def prompts():
    return random_prompts([40, 7, 66, 21, 90, 13], vocab=384, seed=31)


@pytest.fixture(scope="module")
def reference(llm, prompts):
    outs = llm.generate(prompts, GREEDY, use_tqdm=False)
    assert llm.last_stats.num_compressions > 0 and llm.last_stats.num_preemptions > 0
    return [o.token_ids for o in outs]


@pytest.mark.parametrize("bad", [10**7, -5, 384, 2.0, "7", True])
def test_an_invalid_token_id_is_an_error_of_its_request_only(llm, prompts, reference, bad):
    mixed = prompts[:2] + [prompts[2][:5] + [bad] + prompts[2][5:]] + prompts[3:]
    outs = llm.generate(mixed, GREEDY, use_tqdm=False)
    assert outs[2].error and f"{bad!r} at position 5" in outs[2].error and outs[2].outputs == []
    assert outs[2].finish_reason == "error"
    assert [o.token_ids for i, o in enumerate(outs) if i != 2] == reference[:2] + reference[3:]
    assert_empty(llm)


def test_a_prompt_that_is_not_a_token_list_is_an_error_of_its_request(llm, prompts, reference):
    outs = llm.generate([prompts[0], None, 5], GREEDY, use_tqdm=False)
    assert outs[0].token_ids == reference[0]
    assert "not NoneType" in outs[1].error and "not int" in outs[2].error


class Interrupt(KeyboardInterrupt):
    pass


@pytest.mark.parametrize("after", [0, 1, 3])
def test_an_interrupt_in_on_sample_leaves_the_engine_empty(llm, prompts, reference, after):
    seen = []

    def on_sample(index, completion):
        if len(seen) == after:
            raise Interrupt  # what Ctrl-C in a notebook raises, from inside generate
        seen.append(index)

    with pytest.raises(Interrupt):
        llm.generate(prompts, GREEDY, use_tqdm=False, on_sample=on_sample)
    assert_empty(llm)
    assert [o.token_ids for o in llm.generate(prompts, GREEDY, use_tqdm=False)] == reference
    assert_empty(llm)


@pytest.mark.parametrize("where", ["launch", "collect", "schedule"])
def test_a_failing_step_leaves_the_engine_empty(llm, prompts, reference, monkeypatch, where):
    owner = llm.scheduler if where == "schedule" else llm.runner
    original, calls = getattr(owner, where), []

    def failing(*args):
        calls.append(1)
        if len(calls) == 7:  # mid-run: requests running and compressing
            raise RuntimeError("device lost")
        return original(*args)

    monkeypatch.setattr(owner, where, failing)
    with pytest.raises(RuntimeError, match="device lost"):
        llm.generate(prompts, GREEDY, use_tqdm=False)
    monkeypatch.undo()
    assert_empty(llm)
    assert [o.token_ids for o in llm.generate(prompts, GREEDY, use_tqdm=False)] == reference


@pytest.mark.parametrize("how", ["interrupt", "failure"])
def test_an_interrupted_generate_reports_the_work_it_dropped(llm, prompts, reference,
                                                             monkeypatch, how):
    """The harness times every generate call, an interrupted one too (tasks/generate.py):
    `last_stats` describes the interrupted call, unfinished requests' tokens included."""
    from tasks.generate import timed_generate
    kept = []

    def on_sample(index, completion):
        kept.append(len(completion.token_ids))
        if how == "interrupt" and len(kept) == 2:
            raise Interrupt
    if how == "failure":
        original = llm.scheduler.schedule

        def failing(*args):
            if len(kept) == 2:
                raise RuntimeError("device lost")
            return original(*args)
        monkeypatch.setattr(llm.scheduler, "schedule", failing)
    segments, before = [], llm.last_stats
    with pytest.raises(Interrupt if how == "interrupt" else RuntimeError):
        timed_generate(llm, prompts, [GREEDY] * len(prompts), "job", on_sample, segments.append,
                       use_tqdm=False)
    monkeypatch.undo()
    stats = llm.last_stats
    assert stats is not before and stats.interrupted and stats.num_steps > 0
    assert sum(kept) == 2 * 30 < stats.num_output_tokens < len(prompts) * 30  # running ones too
    (seg,) = segments
    assert seg["interrupted"] and seg["work_measured"]
    assert seg["num_output_tokens"] == stats.num_output_tokens and seg["kept_samples"] == 2
    assert_empty(llm)
    outs = llm.generate(prompts, GREEDY, use_tqdm=False)
    assert [o.token_ids for o in outs] == reference and not llm.last_stats.interrupted


def test_empty_stop_strings_and_wrong_types_name_the_field():
    with pytest.raises(ValueError, match="stop contains an empty string"):
        SamplingParams(stop=["", "x"])
    with pytest.raises(ValueError, match="stop contains an empty string"):
        SamplingParams(stop="")
    bad = dict(n="2", temperature="0.5", top_p=None, top_k=1.5, min_p="0", seed=1.0,
               max_tokens=True, min_tokens="1", stop=[1], stop_token_ids=[1.0],
               ignore_eos=1, skip_special_tokens="no", forced_tokens="abc")
    for name, value in bad.items():
        with pytest.raises(TypeError, match=rf"SamplingParams\.{name} must be"):
            SamplingParams(**{name: value})
    with pytest.raises(ValueError, match="n must be >= 1"):
        SamplingParams(n=0)


def test_generate_rejects_what_is_not_sampling_params(llm, prompts):
    with pytest.raises(TypeError, match="SamplingParams"):
        llm.generate(prompts[:1], {"temperature": 0}, use_tqdm=False)
    assert_empty(llm)


@pytest.mark.parametrize("option, says", [
    (dict(max_num_seqs=0), "max_num_seqs must be at least 1"),        # stalled with all waiting
    (dict(kv_cache_tokens=-16), "kv_cache_tokens must be at least 1"),  # failed in torch.zeros
    (dict(kv_cache_tokens=0), "kv_cache_tokens must be at least 1"),  # was silently the default
    (dict(max_model_len=0), "max_model_len must be at least 1"),      # was silently the default
])
def test_pool_and_batch_sizes_that_cannot_run_are_refused_at_once(option, says):
    from zipage.config import EngineConfig
    with pytest.raises(ValueError, match=says):
        EngineConfig(model="x", **option)
