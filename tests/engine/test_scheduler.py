"""Scheduler decisions over token counts and block ids, with exact expectations."""
from zipage.engine.block_manager import BlockManager
from zipage.engine.scheduler import Scheduler, SchedulerConfig
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
    sampled = {s.seq_id: token for s, n in zip(out.seqs, out.num_new_tokens)
               if s.num_computed + n == len(s)}
    sch.postprocess(out, sampled, eos_ids=set())
    return out


def test_chunked_prefill_splits_long_prompts_and_decodes_come_first():
    sch, bm = make(budget_tokens=8)
    a, b = seq(10), seq(3, start=100)
    sch.add(a)
    sch.add(b)
    out = step(sch)
    assert [(s is a, n) for s, n in zip(out.seqs, out.num_new_tokens)] == [(True, 8)]
    assert a.block_table == [0, 1] and len(a) == 10  # no token sampled mid-prompt
    out = step(sch)  # a finishes its prompt (2 tokens), b is admitted with the rest of the budget
    assert [(s is a, n) for s, n in zip(out.seqs, out.num_new_tokens)] == [(True, 2), (False, 3)]
    assert len(a) == 11 and len(b) == 4 and a.block_table == [0, 1, 2] and b.block_table == [3]
    out = step(sch)
    assert out.num_new_tokens == [1, 1]


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
    assert out.preempted == [b] and b.num_computed == 0 and b.block_table == []
    assert sch.waiting[0] is b and a.block_table == [0, 2, 3]  # b freed 3 then 1: 3 comes first
    assert b.num_preemptions == 1


def test_compression_task_when_the_cap_is_full():
    sch, bm = make(num_blocks=16, budget_tokens=64, kept=2, slots=2)
    a = seq(12)  # C=2 kept blocks, cap 3 blocks = 12 tokens
    sch.add(a)
    step(sch)  # prefill 12 tokens; 13th (pending) token sampled
    assert a.phys_len == 12 and a.block_table == [0, 1, 2] and a.query_slot == 1
    out = step(sch)
    (task,) = out.compressions
    assert task.old_table == [0, 1, 2] and task.target_table == [0, 1, 2] and task.release == []
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
    (task,) = out.compressions
    assert task.target_table == [0, 1, 2] and task.release == [3, 4, 5]
    assert a.block_table == [0, 1, 2] and a.phys_len == 9 and a.peak_kv_tokens == 22
    assert list(bm.free_queue)[-3:] == [3, 4, 5]
