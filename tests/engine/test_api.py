"""What users see at the API surface: errors, ordering, outputs, stop conditions."""
import pytest

from tests.engine.tiny_models import random_prompts, tiny_checkpoint
from zipage import LLM, SamplingParams


@pytest.fixture(scope="module")
def folder():
    return tiny_checkpoint("llama")[0]


@pytest.fixture(scope="module")
def llm(folder):
    return LLM(folder, device="cpu", block_size=16, kv_cache_tokens=2048, max_model_len=256)


def test_unknown_option_names_the_valid_ones(folder):
    with pytest.raises(TypeError, match="use_similarity.*valid options: .*budget"):
        LLM(folder, device="cpu", use_similarity=True)


def test_missing_model_and_bad_budget_are_clear_errors(folder, tmp_path):
    with pytest.raises(FileNotFoundError, match="model not found"):
        LLM(str(tmp_path / "nope"))
    with pytest.raises(ValueError, match="multiple of block_size"):
        LLM(folder, device="cpu", block_size=16, budget=100)
    # 4 sinks besides the 16-token window (zipage_attn_recent's): a 16-token budget says how
    with pytest.raises(ValueError, match="16 \\+ num_sink_tokens 4 exceed the budget 16: raise "
                                         "the budget or pass num_sink_tokens=0"):
        LLM(folder, device="cpu", block_size=16, budget=16, num_sink_tokens=4)


def test_unsupported_architecture(tmp_path):
    (tmp_path / "config.json").write_text('{"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2"}')
    with pytest.raises(ValueError, match="unsupported architecture.*GPT2LMHeadModel"):
        LLM(str(tmp_path), device="cpu")


def test_too_long_prompt_fails_alone_and_others_run(llm):
    prompts = random_prompts([10, 300, 20], vocab=384)
    with pytest.warns(UserWarning, match="1 of 3 requests cannot run.*request 1: .*300 tokens"):
        outs = llm.generate(prompts, SamplingParams(temperature=0, max_tokens=5),
                            use_tqdm=False)
    assert outs[1].error and "300 tokens" in outs[1].error and "max_model_len" in outs[1].error
    assert outs[1].outputs == []
    with pytest.raises(ValueError, match="request 1 has no output: prompt has 300 tokens"):
        outs[1].text
    assert [len(outs[i].token_ids) for i in (0, 2)] == [5, 5]


def test_outputs_follow_input_order_with_timings(llm):
    prompts = random_prompts([30, 2, 17, 5], vocab=384, seed=9)
    params = [SamplingParams(temperature=0, max_tokens=m, ignore_eos=True) for m in (3, 9, 1, 6)]
    outs = llm.generate(prompts, params, use_tqdm=False)
    assert [o.request_id for o in outs] == [0, 1, 2, 3]
    assert [o.prompt_token_ids for o in outs] == prompts
    assert [len(o.token_ids) for o in outs] == [3, 9, 1, 6]
    assert all(o.finish_reason == "length" for o in outs)
    m = outs[1].metrics
    assert m["arrival_time"] <= m["first_token_time"] <= m["finish_time"]
    stats = llm.last_stats
    assert stats.num_output_tokens == 19 and stats.output_tokens_per_s > 0


def test_stop_token_ids_and_max_model_len(llm):
    prompt = random_prompts([8], vocab=384, seed=2)
    (free,) = llm.generate(prompt, SamplingParams(temperature=0, max_tokens=12, ignore_eos=True), use_tqdm=False)
    stop = free.token_ids[4]
    (stopped,) = llm.generate(prompt, SamplingParams(temperature=0, max_tokens=12, stop_token_ids=[stop]),
                              use_tqdm=False)
    assert stopped.finish_reason == "stop"
    assert stopped.token_ids == free.token_ids[:free.token_ids.index(stop) + 1]
    (capped,) = llm.generate(random_prompts([250], vocab=384), SamplingParams(temperature=0, max_tokens=50,
                                                                               ignore_eos=True), use_tqdm=False)
    assert len(capped.token_ids) == 6 and capped.finish_reason == "length"


def test_bad_sampling_params():
    with pytest.raises(ValueError, match="top_p"):
        SamplingParams(top_p=0)
    with pytest.raises(ValueError, match="temperature"):
        SamplingParams(temperature=-1)


def test_teacher_forcing_reports_log_probs_and_greedy_choices(llm):
    prompt, forced = random_prompts([6, 12], vocab=384, seed=5)
    (free,) = llm.generate([prompt], SamplingParams(temperature=0, max_tokens=12, ignore_eos=True),
                           use_tqdm=False)
    (out,) = llm.generate([prompt], SamplingParams(forced_tokens=forced), use_tqdm=False)
    m = out.metrics
    assert out.token_ids == forced and len(m["forced_logprobs"]) == 12
    assert all(lp <= 0 for lp in m["forced_logprobs"])
    assert m["forced_argmax"][0] == free.token_ids[0]  # same context before the first forced token
    assert m["forced_greedy_match"] == [a == f for a, f in zip(m["forced_argmax"], forced)]


def test_issue29_api_edges_fail_clearly(llm, folder):
    """Issue 29 item 7: a seed the sampler cannot hold, a prompt of the wrong type and a
    generate after shutdown are clear errors at the call; a second shutdown does nothing."""
    with pytest.raises(ValueError, match=r"seed must be in \[0, 4294967295\]"):
        SamplingParams(seed=2**70)
    with pytest.raises(ValueError, match=r"seed must be in \[0, 4294967294\] for n=2"):
        SamplingParams(seed=2**32 - 1, n=2)
    with pytest.raises(ValueError, match="seed must be in"):
        SamplingParams(seed=-1)
    SamplingParams(seed=2**32 - 1)  # the largest seed of one sample
    with pytest.raises(TypeError, match="prompts must be a string, a list of token ids, or a "
                                        "list of those; got int"):
        llm.generate(5, SamplingParams(), use_tqdm=False)
    other = LLM(folder, device="cpu", block_size=16, kv_cache_tokens=256, max_model_len=64)
    other.shutdown()
    with pytest.raises(RuntimeError, match="shut down"):
        other.generate([[1, 2, 3]], SamplingParams(max_tokens=2), use_tqdm=False)
    other.shutdown()  # a no-op


def test_issue29_a_one_step_request_counts_as_running(llm):
    """Issue 29 item 11: a request that finishes in its first step ran (peak_running 1)."""
    llm.generate(random_prompts([10], vocab=384), SamplingParams(temperature=0, max_tokens=1),
                 use_tqdm=False)
    assert llm.last_stats.num_steps == 1 and llm.last_stats.peak_running == 1
    assert llm.last_stats.mean_running == 1.0
