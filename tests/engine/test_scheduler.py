"""Scheduler decisions over token counts and block ids, with exact expectations."""
from zipage.engine.block_manager import BlockManager
from zipage.engine.messages import StepResult
from zipage.engine.scheduler import Scheduler, SchedulerConfig, prefill_chunk
from zipage.engine.sequence import Sequence
from zipage.sampling_params import SamplingParams

B = 4


def make(num_blocks=16, budget_tokens=16, kept=None, max_seqs=8, slots=0):
    bm = BlockManager(num_blocks, B)
    cfg = SchedulerConfig(block_size=B, max_num_seqs=max_seqs, max_num_batched_tokens=budget_tokens,
                          max_model_len=1000, num_kept_blocks=kept, num_query_slots=slots)
    return Scheduler(cfg, bm), bm


def seq(n, start=0, max_tokens=50):
    return Sequence(list(range(start, start + n)), SamplingParams(max_tokens=max_tokens, ignore_eos=True), B)


def step(sch, token=7):
    out = sch.schedule()
    sampled = {sid: token for sid, row in out.requests.items() if row.sampling is not None}
    sch.update_from_output(out, StepResult(sampled), eos_ids=set())
    return out


def rows(out, *seqs):
    """[(index of the request in seqs, new tokens)] in batch order."""
    ids = [s.seq_id for s in seqs]
    return [(ids.index(sid), r.num_tokens) for sid, r in out.requests.items()]


def test_chunked_prefill_splits_long_prompts_and_decodes_come_first():
    sch, bm = make(budget_tokens=8)
    a, b = seq(10), seq(3, start=100)
    sch.add(a)
    sch.add(b)
    out = step(sch)
    assert rows(out, a, b) == [(0, 8)]
    assert a.block_table == [0, 1] and len(a) == 10  # no token sampled mid-prompt
    out = step(sch)  # a finishes its prompt (2 tokens), b is admitted with the rest of the budget
    assert rows(out, a, b) == [(0, 2), (1, 3)]
    assert len(a) == 11 and len(b) == 4 and a.block_table == [0, 1, 2] and b.block_table == [3]
    out = step(sch)
    assert rows(out, a, b) == [(0, 1), (1, 1)]


def test_preemption_takes_the_newest_request_and_recomputes_it_later():
    sch, bm = make(num_blocks=4, budget_tokens=16)
    a, b = seq(4), seq(4, start=50)
    sch.add(a)
    sch.add(b)
    step(sch)  # both prefilled; the sampled (pending) token needs a block at the next step
    assert a.block_table == [0] and b.block_table == [1]
    step(sch)
    assert a.block_table == [0, 2] and b.block_table == [1, 3]
    for _ in range(3):
        step(sch)  # 8 tokens resident each: both blocks full, no block free
    out = sch.schedule()  # a needs a third block: b (the tail) is preempted
    assert out.preempted == [b.seq_id] and b.num_computed == 0 and b.block_table == []
    assert sch.waiting[0] is b and a.block_table == [0, 2, 3]  # b freed 3 then 1: 3 comes first
    assert b.num_preemptions == 1


def test_compression_task_when_the_cap_is_full():
    sch, bm = make(num_blocks=16, budget_tokens=64, kept=2, slots=2)
    a = seq(12)  # C=2 kept blocks, cap 3 blocks = 12 tokens
    sch.add(a)
    step(sch)  # prefill 12 tokens; 13th (pending) token sampled
    assert a.phys_len == 12 and a.block_table == [0, 1, 2] and a.query_slot == 1
    out = step(sch)
    (task,) = out.compressions.values()
    assert task.old_table == [0, 1, 2] and task.target_table == [0, 1, 2]
    assert bm.num_free_blocks == 13  # compressed in place: nothing taken, nothing released
    assert task.phys_len == 12 and a.num_evicted == 4 and a.phys_len == 9 and a.num_compressions == 1
    for _ in range(3):
        assert not step(sch).compressions
    assert a.phys_len == 12 and step(sch).compressions  # every block_size tokens after that


def test_long_prompt_compresses_right_after_prefill_and_releases_the_rest():
    sch, bm = make(num_blocks=16, budget_tokens=64, kept=2, slots=1)
    a = seq(22)
    sch.add(a)
    step(sch)
    assert a.block_table == [0, 1, 2, 3, 4, 5]
    out = step(sch)
    (task,) = out.compressions.values()
    assert task.target_table == [0, 1, 2] and task.old_table == [0, 1, 2, 3, 4, 5]
    assert a.block_table == [0, 1, 2] and a.phys_len == 9 and a.peak_kv_tokens == 22
    assert list(bm.free_queue)[-3:] == [3, 4, 5]


def test_prefill_chunks_never_leave_or_take_a_single_token():
    assert prefill_chunk(10, 16) == 10 and prefill_chunk(1, 16) == 1  # all that remains
    assert prefill_chunk(10, 9) == 8  # not 9: one token left would pass for a decode
    assert prefill_chunk(10, 8) == 8 and prefill_chunk(3, 2) == 0 and prefill_chunk(2, 1) == 0
    for remaining in range(1, 40):
        for tokens_left in range(1, 40):
            n = prefill_chunk(remaining, tokens_left)
            assert n <= tokens_left and (n == remaining or (n >= 2 and remaining - n >= 2) or n == 0)


def test_a_chunked_prefill_compresses_only_after_its_last_prompt_token():
    """Issue 10 item 1 at the scheduler: a chunk that left one prompt token looked like a
    decode and compressed with the prompt unfinished."""
    sch, bm = make(num_blocks=40, budget_tokens=21, kept=2, slots=1)
    a = seq(22)  # cap 12: compresses right after its prefill
    sch.add(a)
    out = step(sch)
    assert rows(out, a) == [(0, 20)] and a.num_computed == 20 and len(a) == 22  # 2 left, not 1
    out = step(sch)
    assert rows(out, a) == [(0, 2)] and not out.compressions and len(a) == 23
    out = step(sch)
    (task,) = out.compressions.values()
    assert task.phys_len == 22 and task.num_computed == 22  # the whole prompt, then compressed


def test_asynchronous_steps_count_placeholders_and_copy_what_the_runner_reads():
    sch, bm = make(num_blocks=16, budget_tokens=16)
    a = seq(4, max_tokens=3)
    sch.add(a)
    first = sch.schedule()  # prefill: samples token 4
    second = sch.schedule()  # scheduled before the first step's token is known
    row = second.requests[a.seq_id]
    assert (row.start, row.num_tokens, row.token_ids, row.input_from_previous) == (4, 1, [], True)
    assert row.block_table == [0, 1] and a.token_ids == list(range(4))
    assert a.num_placeholders == 2 and len(a) == 6
    third = sch.schedule()  # its last token (max_tokens=3): freed with the step, output pending
    assert a.is_finished and bm.num_free_blocks == 16 and a.finish_reason is None
    # Messages are copies: later steps did not change what the first one says.
    assert first.requests[a.seq_id].block_table == [0]
    assert first.requests[a.seq_id].token_ids == [0, 1, 2, 3]
    assert not sch.schedule().requests  # nothing left to run
    for out, token in ((first, 11), (second, 12), (third, 13)):
        sch.update_from_output(out, StepResult({a.seq_id: token}), eos_ids=set())
    assert a.output_token_ids == [11, 12, 13] and a.finish_reason == "length"
    assert not sch.has_unfinished


def test_a_stop_cuts_the_steps_already_launched():
    sch, bm = make(num_blocks=16, budget_tokens=16)
    a = Sequence(list(range(5)), SamplingParams(max_tokens=50), B)
    sch.add(a)
    first, second = sch.schedule(), sch.schedule()
    done = sch.update_from_output(first, StepResult({a.seq_id: 99}), eos_ids={99})
    assert done == [a] and a.finish_reason == "stop" and a.output_token_ids == [99]
    assert sch.update_from_output(second, StepResult({a.seq_id: 5}), eos_ids={99}) == []
    assert a.output_token_ids == [99] and bm.num_free_blocks == 16


def test_a_preempted_request_recomputes_up_to_its_pending_token():
    """It resumes as a decode of its last sampled token: the same compression point and the
    same window as if it had never been preempted."""
    sch, bm = make(num_blocks=4, budget_tokens=16, kept=None)
    a, b = seq(4, max_tokens=9), seq(4, start=50)
    sch.add(a)
    sch.add(b)
    for _ in range(5):
        step(sch)
    assert step(sch).preempted == [b.seq_id] and len(b) == 9
    while b.status.name == "WAITING":
        out = step(sch)
    row = out.requests[b.seq_id]
    assert (row.start, row.num_tokens) == (4, 4)  # its prompt block is a prefix-cache hit
    assert b.num_computed == 8 and len(b) == 9 and row.sampling is None  # nothing sampled
    out = step(sch)
    assert out.requests[b.seq_id].start == 8 and out.requests[b.seq_id].sampling is not None


def test_abort_all_empties_the_scheduler_and_returns_the_slots():
    sch, bm = make(num_blocks=16, budget_tokens=8, kept=2, slots=3)
    for i in range(4):
        sch.add(seq(6, start=10 * i))
    sch.schedule()
    sch.abort_all()
    bm.reset()
    assert not sch.has_unfinished and not sch.running and not sch.waiting
    assert sorted(sch.free_slots) == [0, 1, 2] and bm.num_free_blocks == 16
